/* test_abi: the tables through which bindings and the command line see the
 * public structs. tc_abi_fields must describe every member of every
 * struct (a member added to taskcache.h and not to the table would let a
 * binding with an old mirror pass its check), and tc_stats_fields must
 * name every member of tc_stats once, at its real offset. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "taskcache.h"

static int by_offset(const void *a, const void *b)
{
    const tc_abi_field *x = *(const tc_abi_field *const *)a, *y = *(const tc_abi_field *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* One struct's rows, in the order of their offsets: no overlap, and no
 * gap a member could hide in (padding before a member is smaller than it,
 * or than 8 bytes; after the last, smaller than 8). */
static void check_struct(const tc_abi_field *rows, size_t n, const char *type)
{
    const tc_abi_field **mine = calloc(n, sizeof *mine);
    size_t end = 0, size = 0, members = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(rows[i].type, type) != 0)
            continue;
        if (rows[i].member)
            mine[members++] = &rows[i];
        else
            size = rows[i].size;
    }
    qsort(mine, members, sizeof *mine, by_offset);
    for (size_t i = 0; i < members; i++) {
        size_t gap_limit = mine[i]->size < 8 ? mine[i]->size : 8;
        CHECK(mine[i]->offset >= end);
        if (mine[i]->offset < end || mine[i]->offset - end >= gap_limit) {
            fprintf(stderr, "%s: %s overlaps, or %zu bytes before it no member covers\n", type,
                    mine[i]->member, mine[i]->offset - end);
            check_failures++;
        }
        end = mine[i]->offset + mine[i]->size;
    }
    free(mine);
    CHECK(members > 0);
    CHECK(size >= end && size - end < 8);
}

static void test_abi_table_covers_every_struct(void)
{
    size_t n = 0;
    const tc_abi_field *rows = tc_abi_fields(&n);
    CHECK(rows && n > 0);
    const char *types[] = {"tc_error", "tc_stats", "tc_stats_field", "tc_gc_report",
                           "tc_report", "tc_param_info", "tc_entry_info", "tc_task",
                           "tc_host", "tc_task_info", "tc_kernel", "tc_launch",
                           "tc_abi_field", "tc_remote_report"};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        check_struct(rows, n, types[t]);
    /* spot checks against the compiler's own layout */
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(rows[i].type, "tc_entry_info") && rows[i].member &&
            !strcmp(rows[i].member, "cached")) {
            CHECK(rows[i].offset == offsetof(tc_entry_info, cached));
            seen++;
        }
        if (!strcmp(rows[i].type, "tc_host") && !rows[i].member) {
            CHECK(rows[i].size == sizeof(tc_host));
            seen++;
        }
    }
    CHECK(seen == 2);
}

static void test_stats_table_names_every_member_once(void)
{
    size_t n = 0;
    const tc_stats_field *f = tc_stats_fields(&n);
    CHECK(n == sizeof(tc_stats) / sizeof(uint64_t));
    char *seen = calloc(sizeof(tc_stats), 1);
    size_t counters = 0, labelled = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(f[i].offset % sizeof(uint64_t) == 0 && f[i].offset < sizeof(tc_stats));
        CHECK(!seen[f[i].offset]);
        seen[f[i].offset] = 1;
        counters += (f[i].flags & TC_STATS_COUNTER) != 0;
        labelled += f[i].label != NULL;
    }
    free(seen);
    /* the members the command line and the Python package rely on */
    tc_stats s;
    memset(&s, 0, sizeof s);
    s.waited = 7;
    s.max_size = 9;
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        memcpy(&v, (const char *)&s + f[i].offset, sizeof v);
        if (!strcmp(f[i].name, "waited"))
            found += v == 7 && (f[i].flags & TC_STATS_COUNTER);
        if (!strcmp(f[i].name, "max_size"))
            found += v == 9 && (f[i].flags & TC_STATS_LIMIT) && !(f[i].flags & TC_STATS_COUNTER);
    }
    CHECK(found == 2);
    CHECK(counters == 31);    /* everything but the six figures measured on disk */
    CHECK(labelled == n - 2); /* bytes_written is shown with records_written, and
                                 remote_write_bytes with remote_writes */
}

int main(void)
{
    test_abi_table_covers_every_struct();
    test_stats_table_names_every_member_once();
    printf("test_abi: %d checks, %d failed\n", check_count, check_failures);
    return check_failures != 0;
}
