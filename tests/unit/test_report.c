/* Tests of ptxas's -v report as taskcache keeps and prints it: a compiler's
 * log is cut into each kernel's lines (the register limits it overrides,
 * printed before compiling, going to the kernels they are about, once
 * however often ptxas -ewp repeats them; -c's functions with the first
 * kernel; the in-process compiler's continuation lines in ptxas's form;
 * diagnostics, advice and the module's memory line left out), and the
 * report is put together again in ptxas's order, with ptxas's warnings made
 * from the figures and what a kernel without lines is known by. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "api/handles.h"
#include "check.h"
#include "compile/ptxas.h"
#include "ptx/slice.h"

#define INFO "ptxas info    : "

static const char heads[] =
    INFO "Overriding maximum register limit 256 for 'k2' with  24 of maxrregcount option\n"
    INFO "Overriding global maxrregcount 24 with entry-specific value 40 of .maxnreg\n";

static const char report[] =
    INFO "(C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized\n"
    INFO "12 bytes gmem\n"
    INFO "Compiling entry function 'k2' for 'sm_90'\n"
    INFO "Function properties for k2\n"
    "ptxas         .     0 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
    INFO "Used 24 registers, used 1 barriers, 8 bytes cumulative stack size, 256 bytes smem\n"
    INFO "Compile time = 1.000 ms\n"
    INFO "Function properties for helper\n"
    "    16 bytes stack frame, 12 bytes spill stores, 0 bytes spill loads\n"
    "ptxas warning : Registers are spilled to local memory in function 'helper'\n"
    INFO "Compiling entry function 'k1' for 'sm_90'\n"
    INFO "Function properties for k1\n"
    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    INFO "Used 10 registers, used 0 barriers\n"
    INFO "Compile time = 2.000 ms\n";

static const char k2_lines[] =
    INFO "Compiling entry function 'k2' for 'sm_90'\n"
    INFO "Function properties for k2\n"
    "    0 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
    INFO "Used 24 registers, used 1 barriers, 8 bytes cumulative stack size, 256 bytes smem\n"
    INFO "Compile time = 1.000 ms\n"
    INFO "Function properties for helper\n"
    "    16 bytes stack frame, 12 bytes spill stores, 0 bytes spill loads\n";

static const char k1_lines[] =
    INFO "Compiling entry function 'k1' for 'sm_90'\n"
    INFO "Function properties for k1\n"
    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    INFO "Used 10 registers, used 0 barriers\n"
    INFO "Compile time = 2.000 ms\n";

static char *joined(const char *a, const char *b, const char *c)
{
    size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
    char *s = malloc(n);
    snprintf(s, n, "%s%s%s", a, b, c);
    return s;
}

static void test_parse(void)
{
    /* ptxas, and ptxas -ewp, which prints the register limits twice */
    for (int twice = 0; twice < 2; twice++) {
        char *log = joined("ptxas warning : For profile sm_90 adjusting per thread register "
                           "count of 16 to lower bound of 24\n",
                           heads, twice ? heads : "");
        char *all = joined(log, report, "");
        tc_ptxas_report r;
        CHECK(tc_ptxas_parse_report(all, strlen(all), &r) == 0);
        CHECK(r.n == 2);
        if (r.n == 2) {
            CHECK_STR(r.kernels[0].name, "k2");
            CHECK_STR(r.kernels[0].head.data,
                      INFO "Overriding maximum register limit 256 for 'k2' with  24 of "
                           "maxrregcount option\n");
            /* names no kernel: the next one's */
            CHECK_STR(r.kernels[1].head.data, INFO "Overriding global maxrregcount 24 with "
                                                   "entry-specific value 40 of .maxnreg\n");
            CHECK_STR(r.kernels[0].body.data, k2_lines);
            CHECK_STR(r.kernels[1].body.data, k1_lines);
            const tc_ptxas_res *k2 = &r.kernels[0].res, *k1 = &r.kernels[1].res;
            CHECK(k2->registers == 24 && k2->shared_bytes == 256 && k2->stack_bytes == 0);
            CHECK(k2->spill_store_bytes == 4 && k2->spill_load_bytes == 4);
            CHECK(k1->registers == 10 && k1->shared_bytes == 0 && k1->stack_bytes == 0);
        }
        tc_ptxas_report_free(&r);
        free(log);
        free(all);
    }
    /* -c: the functions compiled on their own go with the first kernel */
    static const char object[] =
        INFO "0 bytes gmem\n"
        INFO "Function properties for f\n"
        "    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        INFO "Compile time = 0.5 ms\n";
    char *all = joined(object, k1_lines, "");
    tc_ptxas_report r;
    CHECK(tc_ptxas_parse_report(all, strlen(all), &r) == 0 && r.n == 1);
    if (r.n == 1) {
        CHECK_STR(r.kernels[0].body.data, all + strlen(INFO "0 bytes gmem\n"));
        CHECK(r.kernels[0].res.stack_bytes == 0 && r.kernels[0].res.registers == 10);
        CHECK(r.kernels[0].head.len == 0);
    }
    tc_ptxas_report_free(&r);
    free(all);
    /* a log without a report */
    CHECK(tc_ptxas_parse_report("", 0, &r) == 0 && r.n == 0);
    tc_ptxas_report_free(&r);
}

static tc_entry_info entry(const char *name)
{
    tc_entry_info e;
    memset(&e, 0, sizeof e);
    e.name = strdup(name);
    e.registers = e.shared_bytes = e.stack_bytes = e.spill_store_bytes = e.spill_load_bytes = -1;
    return e;
}

static char *text_of(const tc_result *r, unsigned what)
{
    size_t n = tc_result_ptxas_report(r, what, NULL, 0);
    char *buf = malloc(n + 1);
    CHECK(tc_result_ptxas_report(r, what, buf, n + 1) == n);
    return buf;
}

static void test_compose(void)
{
    tc_result *r = tc_result_new();
    snprintf(r->arch, sizeof r->arch, "sm_90");
    r->entries = calloc(3, sizeof *r->entries);
    r->entries[0] = entry("k0"); /* name order; k0's lines are unknown */
    r->entries[1] = entry("k1");
    r->entries[2] = entry("k2");
    r->nentries = 3;
    r->entries[0].verbose_rank = 9;
    r->entries[0].registers = 16;
    r->entries[0].stack_bytes = 32;
    r->entries[0].spill_store_bytes = 8;
    r->entries[0].spill_load_bytes = 0;
    char *log = joined(heads, report, "");
    CHECK(tc_entries_take_report(r->entries, 3, log, strlen(log), 1) == 0);
    CHECK(r->entries[2].verbose_rank == 0 && r->entries[1].verbose_rank == 1);
    CHECK(r->entries[0].verbose_rank == 11); /* after those the log names */
    CHECK(r->entries[2].registers == 24 && r->entries[2].spill_load_bytes == 4);

    char *t = text_of(r, TC_PTXAS_LIMITS);
    CHECK_STR(t, heads);
    free(t);
    /* a kernel's local memory is its cumulative stack size; spills one way
     * only are not warned of; k0 by its figures */
    t = text_of(r, TC_PTXAS_WARN_SPILLS | TC_PTXAS_WARN_LOCAL_MEMORY);
    CHECK_STR(t, "ptxas warning : Local memory used for function 'k2', size of stack frame: "
                 "8 bytes\n"
                 "ptxas warning : Registers are spilled to local memory in function 'k2', "
                 "4 bytes spill stores, 4 bytes spill loads\n"
                 "ptxas warning : Local memory used for function 'helper', size of stack frame: "
                 "16 bytes\n"
                 "ptxas warning : Local memory used for function 'k0', size of stack frame: "
                 "32 bytes\n");
    free(t);
    t = text_of(r, TC_PTXAS_WARN_SPILLS);
    CHECK_STR(t, "ptxas warning : Registers are spilled to local memory in function 'k2', "
                 "4 bytes spill stores, 4 bytes spill loads\n");
    free(t);
    /* no image: no memory line; k0 with what its figures give */
    t = text_of(r, TC_PTXAS_RESOURCES);
    char *want = joined(k2_lines, k1_lines,
                        INFO "Compiling entry function 'k0' for 'sm_90'\n"
                        INFO "Function properties for k0\n"
                        "    32 bytes stack frame, 8 bytes spill stores, 0 bytes spill loads\n"
                        INFO "Used 16 registers\n");
    CHECK_STR(t, want);
    free(t);
    /* as snprintf: the length of the whole, as much as fits */
    char small[8];
    CHECK(tc_result_ptxas_report(r, TC_PTXAS_RESOURCES, small, sizeof small) == strlen(want));
    CHECK(!memcmp(small, want, 7) && small[7] == '\0');
    CHECK(tc_result_ptxas_report(r, 0, small, sizeof small) == 0 && small[0] == '\0');
    free(want);
    free(log);
    tc_result_free(r);
}

/* ptxas's errors and advice, told against the input's lines through a
 * unit's line map; a line number is read within its own line. */
static void test_diagnostics(void)
{
    tc_line_seg segs[] = {{1, 40, 9}};
    tc_text map;
    memset(&map, 0, sizeof map);
    map.segs = segs;
    map.nsegs = 1;
    const char log[] = "ptxas /tmp/unit3.ptx, line 3; error   : Unknown symbol '%f9'\n"
                       "ptxas fatal   : Ptx assembly aborted due to errors\n"
                       INFO "(C7519) injected in around line 5 by compiler\n"
                       INFO "(C7517) injected in around line \n"
                       "7 this line is not the advice's";
    tc_sb out = TC_SB_INIT;
    CHECK(tc_ptxas_diagnostics(log, sizeof log - 1, &map, "m.ptx", &out) == 1);
    CHECK_STR(out.data, "m.ptx:42: error: Unknown symbol '%f9'\n"
                        "m.ptx: info: (C7519) injected in around line 44 by compiler\n"
                        "m.ptx: info: (C7517) injected in around line \n");
    tc_sb_free(&out);
}

int main(void)
{
    test_diagnostics();
    test_parse();
    test_compose();
    return check_report("test_report");
}
