/* abi: the layout of the public structs (tc_abi_fields), which bindings
 * without a C compiler check their mirrors against. tests/unit/test_abi.c
 * checks that each struct's rows account for all of it, so a member added
 * to taskcache.h and forgotten here fails the tests. */
#include <stddef.h>

#include "store/stats.h"
#include "taskcache.h"

#define MEMBER(type, m) {#type, #m, offsetof(type, m), sizeof(((type *)0)->m)}
#define SIZE(type) {#type, NULL, 0, sizeof(type)}
static const tc_abi_field fields[] = {
    MEMBER(tc_error, code), MEMBER(tc_error, message), SIZE(tc_error),

    /* tc_stats from the statistics table, which api/cache.c checks against it */
#define TC_X(id, name, label, flags) MEMBER(tc_stats, name),
    TC_STATS_TABLE(TC_X)
#undef TC_X
    SIZE(tc_stats),

    MEMBER(tc_stats_field, name), MEMBER(tc_stats_field, label), MEMBER(tc_stats_field, offset),
    MEMBER(tc_stats_field, flags), SIZE(tc_stats_field),

#define RR(m) MEMBER(tc_remote_report, m)
    RR(reachable), RR(writable), RR(read_back), RR(read_only), RR(connect_seconds),
    RR(write_seconds), RR(read_seconds), RR(server_bytes), RR(server_records), RR(server),
    RR(message), SIZE(tc_remote_report),
#undef RR

    MEMBER(tc_gc_report, evicted_files), MEMBER(tc_gc_report, evicted_bytes),
    MEMBER(tc_gc_report, files), MEMBER(tc_gc_report, bytes),
    MEMBER(tc_gc_report, temps_removed), MEMBER(tc_gc_report, skipped), SIZE(tc_gc_report),

#define R(m) MEMBER(tc_report, m)
    R(module_hit), R(split), R(entries), R(units), R(unit_hits), R(units_compiled), R(seconds),
    R(seconds_compile), R(seconds_link), R(in_process), R(codegen_calls), R(group_hit),
    R(nvjitlink), R(whole_program_units), SIZE(tc_report),
#undef R

    MEMBER(tc_param_info, type), MEMBER(tc_param_info, offset), MEMBER(tc_param_info, size),
    MEMBER(tc_param_info, align), SIZE(tc_param_info),

#define E(m) MEMBER(tc_entry_info, m)
    E(name), E(param_count), E(param_bytes), E(params), E(maxntid), E(reqntid),
    E(minnctapersm), E(maxnreg), E(reqnctapercluster), E(maxclusterrank), E(registers),
    E(shared_bytes), E(stack_bytes), E(spill_store_bytes), E(spill_load_bytes), E(unit_key),
    E(slice_key), E(unit), E(cached), E(verbose_head), E(verbose), E(verbose_rank),
    SIZE(tc_entry_info),
#undef E

    MEMBER(tc_task, name), MEMBER(tc_task, key), MEMBER(tc_task, key_size), SIZE(tc_task),

    MEMBER(tc_host, version), MEMBER(tc_host, codegen), MEMBER(tc_host, user),
    MEMBER(tc_host, serialize_codegen), MEMBER(tc_host, group_key),
    MEMBER(tc_host, group_key_size), SIZE(tc_host),

    MEMBER(tc_task_info, name), MEMBER(tc_task_info, key), MEMBER(tc_task_info, cached),
    MEMBER(tc_task_info, codegen_ran), MEMBER(tc_task_info, metadata),
    MEMBER(tc_task_info, metadata_size), MEMBER(tc_task_info, first_entry),
    MEMBER(tc_task_info, entry_count), SIZE(tc_task_info),

    MEMBER(tc_kernel, function), MEMBER(tc_kernel, entry),
    MEMBER(tc_kernel, max_threads_per_block), MEMBER(tc_kernel, registers),
    MEMBER(tc_kernel, shared_bytes), MEMBER(tc_kernel, local_bytes),
    MEMBER(tc_kernel, const_bytes), SIZE(tc_kernel),

    MEMBER(tc_launch, grid), MEMBER(tc_launch, block), MEMBER(tc_launch, shared_bytes),
    MEMBER(tc_launch, stream), MEMBER(tc_launch, cooperative), SIZE(tc_launch),

    MEMBER(tc_abi_field, type), MEMBER(tc_abi_field, member), MEMBER(tc_abi_field, offset),
    MEMBER(tc_abi_field, size), SIZE(tc_abi_field),
};

const tc_abi_field *tc_abi_fields(size_t *count)
{
    if (count)
        *count = sizeof fields / sizeof fields[0];
    return fields;
}
