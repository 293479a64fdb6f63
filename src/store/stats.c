/* stats: persistent counters (see stats.h). */
#define _GNU_SOURCE
#include "stats.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "../util/fs.h"
#include "../util/strbuf.h"

static const char *names[TC_NCOUNTERS] = {
    "builds",          "module_hits",     "module_misses", "unit_hits",
    "unit_misses",     "compiles",        "compile_errors", "whole_builds",
    "records_written", "bytes_written",   "bad_records",   "store_errors",
    "task_hits",       "task_misses",     "codegen_calls", "group_hits",
    "group_misses",    "evictions",       "cache_bytes",   "waited_for_others",
};

const char *tc_counter_name(int i) { return i >= 0 && i < TC_NCOUNTERS ? names[i] : "?"; }

void tc_stats_read(const char *root, tc_counters *out)
{
    memset(out, 0, sizeof *out);
    char *path = tc_path_join(root, "stats"), *data = NULL;
    size_t len;
    if (path && tc_read_file(path, 1, &data, &len) == 0) {
        char *save = NULL;
        for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            char *sp = strchr(line, ' ');
            if (!sp)
                continue;
            *sp = '\0';
            for (int i = 0; i < TC_NCOUNTERS; i++)
                if (!strcmp(line, names[i]))
                    out->v[i] = strtoull(sp + 1, NULL, 10);
        }
    }
    free(data);
    free(path);
}

static int update(const char *root, const tc_counters *delta, tc_counters *after, int zero,
                  int set, uint64_t value)
{
    char *lockp = tc_path_join(root, "stats.lock"), *path = tc_path_join(root, "stats");
    int rc = -1, fd = -1;
    if (!lockp || !path)
        goto done;
    fd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) != 0)
        goto done;
    tc_counters c;
    if (zero)
        memset(&c, 0, sizeof c);
    else
        tc_stats_read(root, &c);
    for (int i = 0; delta && i < TC_NCOUNTERS; i++)
        c.v[i] += delta->v[i];
    if (set >= 0 && set < TC_NCOUNTERS)
        c.v[set] = value;
    tc_sb text = TC_SB_INIT;
    for (int i = 0; i < TC_NCOUNTERS; i++)
        tc_sb_printf(&text, "%s %llu\n", names[i], (unsigned long long)c.v[i]);
    rc = text.oom ? -1 : tc_write_atomic(path, text.data, text.len, 0600);
    tc_sb_free(&text);
    if (rc == 0 && after)
        *after = c;
done:
    if (fd >= 0)
        close(fd); /* releases the lock */
    free(lockp);
    free(path);
    return rc;
}

int tc_stats_add(const char *root, const tc_counters *delta, tc_counters *after)
{
    return update(root, delta, after, 0, -1, 0);
}

int tc_stats_set(const char *root, int counter, uint64_t value)
{
    return update(root, NULL, NULL, 0, counter, value);
}

int tc_stats_zero(const char *root)
{
    /* the size estimate is a property of the disk, not a statistic */
    tc_counters c;
    tc_stats_read(root, &c);
    return update(root, NULL, NULL, 1, TC_C_CACHE_BYTES, c.v[TC_C_CACHE_BYTES]);
}
