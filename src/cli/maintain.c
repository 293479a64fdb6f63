/* maintain: taskcache stats, gc, verify and clear, over the public
 * header's cache calls (see maintain.h). */
#include "cli/maintain.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"

const char cli_usage_stats[] =
    "usage: taskcache stats [--cache-dir DIR] [--json] [--zero]\n"
    "\n"
    "Prints the cache's counters (summed over every process that used it) and\n"
    "what is on disk. --zero resets the counters afterwards. With remote storage\n"
    "('taskcache help remote'), its lookups of records missing locally (an error\n"
    "or a bad record counts as a miss), their time, and its uploads are shown once\n"
    "it has been used.\n";

const char cli_usage_gc[] =
    "usage: taskcache gc [--cache-dir DIR] [--max-size SIZE] [--evict-older-than AGE]\n"
    "\n"
    "Evicts the least recently used records (of every tier) until the cache\n"
    "holds 90% of SIZE (default: the cache's limit: $TASKCACHE_MAXSIZE, else\n"
    "max_size in DIR/taskcache.conf, else 5G), and every record unused for\n"
    "AGE (e.g. 30d, 12h, 90m, 3600 seconds). Builds do the size part on their\n"
    "own when the cache outgrows its limit. Also removes temporary files and\n"
    "scratch directories left by killed processes, and links and special files\n"
    "(FIFOs, sockets, devices) planted in the cache. Safe while other processes\n"
    "use the cache.\n"
    "\n"
    "DIR/taskcache.conf holds 'max_size = 10G' and 'shared = true' (a cache\n"
    "shared by a group: directories 2770, files 0660; default private, 0700).\n"
    "With TASKCACHE_SECRET_FILE set, records are authenticated with its secret\n"
    "(docs/remote.md, 'Who must be trusted'). 'remote = SPEC' puts remote\n"
    "storage behind it ('taskcache help remote'); gc, verify and clear are\n"
    "local only.\n";

const char cli_usage_verify[] =
    "usage: taskcache verify [--cache-dir DIR] [--remove-bad] [--json]\n"
    "\n"
    "Reads every record and checks its header, key and checksum. Builds already\n"
    "treat a bad record as a miss and replace it; --remove-bad deletes them now.\n"
    "Records authenticated with a secret are checked only with that secret\n"
    "(TASKCACHE_SECRET_FILE). Those it does not verify, like every one read\n"
    "without a secret, are not counted and never removed: another secret's\n"
    "records share the directory, and their checksum cannot tell them from\n"
    "damaged ones. Nor are records another version of taskcache wrote (another\n"
    "record format); gc evicts what no build uses.\n"
    "Checking a record is no use of it: gc's least-recently-used order stays.\n"
    "Exit status 1 when bad records were found.\n";

const char cli_usage_clear[] =
    "usage: taskcache clear [--cache-dir DIR]\n"
    "\n"
    "Removes every record and resets the counters. Safe while other processes\n"
    "use the cache: they see misses.\n";

/* The options of a maintenance command, beyond --cache-dir. */
enum { TAKES_JSON = 1, TAKES_ZERO = 2, TAKES_MAX_SIZE = 4, TAKES_AGE = 8, TAKES_REMOVE_BAD = 16 };

/* Reads the arguments into a (zeroed first); an option the command does
 * not take is a usage error that says which it takes. */
static int parse_cache_args(int argc, char **argv, args *a, const char *usage, unsigned takes,
                            const char *takes_what)
{
    memset(a, 0, sizeof *a);
    int rc = EXIT_OK;
    for (int i = 0; i < argc && rc == EXIT_OK; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            exit(EXIT_OK);
        } else if ((v = cli_value_of(argc, argv, &i, "--cache-dir", 0))) {
            if (!*v)
                rc = cli_usage_error("%s needs a directory", "--cache-dir");
            a->cache_dir = v;
        } else if (!strcmp(argv[i], "--json")) {
            a->json = 1;
        } else if ((v = cli_value_of(argc, argv, &i, "--max-size", 0))) {
            a->max_size = v;
        } else if ((v = cli_value_of(argc, argv, &i, "--evict-older-than", 0))) {
            a->older_than = v;
        } else if (!strcmp(argv[i], "--zero")) {
            a->zero = 1;
        } else if (!strcmp(argv[i], "--remove-bad")) {
            a->remove_bad = 1;
        } else {
            rc = cli_usage_error("unknown argument '%s'", argv[i]);
        }
    }
    unsigned given = (a->json ? TAKES_JSON : 0) | (a->zero ? TAKES_ZERO : 0) |
                     (a->max_size ? TAKES_MAX_SIZE : 0) | (a->older_than ? TAKES_AGE : 0) |
                     (a->remove_bad ? TAKES_REMOVE_BAD : 0);
    if (rc == EXIT_OK && (given & ~takes))
        rc = cli_usage_error("%s", takes_what);
    return rc;
}

/* "30d", "12h", "90m", "45s", "3600" (seconds). */
static int parse_age(const char *s, int64_t *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || v < 0)
        return -1;
    long long mult = 1;
    switch (*end) {
    case 'd': mult = 86400; end++; break;
    case 'h': mult = 3600; end++; break;
    case 'm': mult = 60; end++; break;
    case 's': end++; break;
    default: break;
    }
    if (*end)
        return -1;
    /* an age too large to count in seconds is older than anything */
    *out = v > INT64_MAX / mult ? INT64_MAX : v * mult;
    return 0;
}

static void human_bytes(uint64_t b, char *out, size_t n)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(out, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

/* The value of one member of tc_stats, as tc_stats_fields describes it. */
static uint64_t stat_value(const tc_stats *s, const tc_stats_field *f)
{
    uint64_t v;
    memcpy(&v, (const char *)s + f->offset, sizeof v);
    return v;
}

/* A row of optional figures (host tasks, `taskcache run`: FLAG) is shown
 * when one of its run of adjacent rows with that flag is not 0 (a cache no
 * host or interceptor uses does not list them). */
static int run_used(const tc_stats *s, const tc_stats_field *f, size_t n, size_t i,
                    unsigned flag)
{
    while (i > 0 && (f[i - 1].flags & flag))
        i--;
    for (; i < n && (f[i].flags & flag); i++)
        if (stat_value(s, &f[i]))
            return 1;
    return 0;
}

static int shown(const tc_stats *s, const tc_stats_field *f, size_t n, size_t i)
{
    static const unsigned optional[] = {TC_STATS_HOST, TC_STATS_INTERCEPT, TC_STATS_REMOTE};
    if (!f[i].label)
        return 0;
    for (size_t k = 0; k < sizeof optional / sizeof *optional; k++)
        if ((f[i].flags & optional[k]) && !run_used(s, f, n, i, optional[k]))
            return 0;
    return 1;
}

/* The events a row of microseconds (TC_STATS_MICROS) timed: the sum of
 * the nearest pair of shares above it. */
static uint64_t timed_events(const tc_stats *s, const tc_stats_field *f, size_t i)
{
    while (i > 0 && !(f[i - 1].flags & TC_STATS_SHARE))
        i--;
    if (i < 2 || !(f[i - 2].flags & TC_STATS_SHARE))
        return 0;
    return stat_value(s, &f[i - 1]) + stat_value(s, &f[i - 2]);
}

/* `taskcache stats`: one line per figure with a label, in the table's
 * order; a pair of shares (hits, misses) with their percentage of the
 * pair's sum; a row without a label in parentheses on the line before; a
 * time in seconds, with its mean per event. */
static void print_stats_text(const tc_cache *c, const tc_stats *s)
{
    size_t n;
    const tc_stats_field *f = tc_stats_fields(&n);
    printf("%-34s %s\n", "cache directory", tc_cache_dir(c));
    if (tc_cache_warning(c))
        printf("%-34s %s\n", "warning", tc_cache_warning(c));
    if (tc_cache_remote(c))
        printf("%-34s %s\n", "remote", tc_cache_remote(c));
    if (tc_cache_remote_problem(c))
        printf("%-34s %s\n", "warning", tc_cache_remote_problem(c));
    size_t shares = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = stat_value(s, &f[i]);
        int first_of_pair = (f[i].flags & TC_STATS_SHARE) && shares++ % 2 == 0;
        if (!shown(s, f, n, i))
            continue;
        char human[32];
        if (f[i].flags & TC_STATS_MICROS) {
            uint64_t events = timed_events(s, f, i);
            printf("%-34s %10.3f s", f[i].label, (double)v / 1e6);
            if (events)
                printf("  (%.2f ms each)", (double)v / 1e3 / (double)events);
            putchar('\n');
            continue;
        }
        if (f[i].flags & TC_STATS_BYTES) {
            human_bytes(v, human, sizeof human);
            printf("%-34s %12s\n", f[i].label,
                   v || !(f[i].flags & TC_STATS_LIMIT) ? human : "none");
            continue;
        }
        printf("%-34s %12llu", f[i].label, (unsigned long long)v);
        if (f[i].flags & TC_STATS_SHARE) {
            uint64_t total = v + stat_value(s, &f[first_of_pair ? i + 1 : i - 1]);
            if (total)
                printf("  (%5.1f %%)", 100.0 * (double)v / (double)total);
        } else if (i + 1 < n && !f[i + 1].label && (f[i + 1].flags & TC_STATS_BYTES)) {
            human_bytes(stat_value(s, &f[i + 1]), human, sizeof human);
            printf("  (%s)", human);
        }
        putchar('\n');
    }
}

/* `taskcache stats --json`: every figure under its name. */
static void print_stats_json(const tc_cache *c, const tc_stats *s)
{
    size_t n;
    const tc_stats_field *f = tc_stats_fields(&n);
    printf("{\"cache_dir\": ");
    cli_json_string(tc_cache_dir(c));
    printf(", \"remote\": ");
    if (tc_cache_remote(c))
        cli_json_string(tc_cache_remote(c));
    else
        printf("null");
    for (size_t i = 0; i < n; i++)
        printf(", \"%s\": %llu", f[i].name, (unsigned long long)stat_value(s, &f[i]));
    printf("}\n");
}

int cli_stats(int argc, char **argv)
{
    args a;
    int rc = parse_cache_args(argc, argv, &a, cli_usage_stats, TAKES_JSON | TAKES_ZERO,
                              "stats takes --cache-dir, --json and --zero");
    if (rc)
        return rc;
    tc_cache *c = cli_open_cache(a.cache_dir);
    if (!c)
        return EXIT_FAIL;
    tc_stats s;
    tc_error err;
    if (tc_cache_stats(c, &s, &err) != TC_OK) {
        fprintf(stderr, "%s: error: %s\n", cli_prog, err.message);
        tc_cache_close(c);
        return EXIT_FAIL;
    }
    if (a.json)
        print_stats_json(c, &s);
    else
        print_stats_text(c, &s);
    if (a.zero && tc_cache_zero_stats(c, &err) != TC_OK) {
        fprintf(stderr, "%s: error: %s\n", cli_prog, err.message);
        rc = EXIT_FAIL;
    }
    tc_cache_close(c);
    return rc;
}

int cli_gc(int argc, char **argv)
{
    args a;
    int rc = parse_cache_args(argc, argv, &a, cli_usage_gc,
                              TAKES_JSON | TAKES_MAX_SIZE | TAKES_AGE,
                              "gc takes --cache-dir, --max-size, --evict-older-than, --json");
    if (rc)
        return rc;
    uint64_t max = 0;
    int64_t age = -1;
    if (a.max_size && tc_parse_size(a.max_size, &max) != 0)
        return cli_usage_error("--max-size takes a size like 5G or 500M, not '%s'", a.max_size);
    if (a.older_than && parse_age(a.older_than, &age) != 0)
        return cli_usage_error("--evict-older-than takes an age like 30d, 12h or 90m, not '%s'",
                           a.older_than);
    tc_cache *c = cli_open_cache(a.cache_dir);
    if (!c)
        return EXIT_FAIL;
    tc_gc_report g;
    tc_error err;
    if (tc_cache_gc(c, max, age, &g, &err) != TC_OK) {
        fprintf(stderr, "%s: error: %s\n", cli_prog, err.message);
        rc = EXIT_FAIL;
    } else if (g.skipped) {
        printf("another process is cleaning %s; nothing done\n", tc_cache_dir(c));
    } else {
        char ev[32], left[32];
        human_bytes(g.evicted_bytes, ev, sizeof ev);
        human_bytes(g.bytes, left, sizeof left);
        if (a.json)
            printf("{\"evicted_files\": %llu, \"evicted_bytes\": %llu, \"files\": %llu, "
                   "\"bytes\": %llu, \"temps_removed\": %llu}\n",
                   (unsigned long long)g.evicted_files, (unsigned long long)g.evicted_bytes,
                   (unsigned long long)g.files, (unsigned long long)g.bytes,
                   (unsigned long long)g.temps_removed);
        else
            printf("evicted %llu records (%s); %llu records (%s) remain; %llu stale "
                   "temporaries removed\n",
                   (unsigned long long)g.evicted_files, ev, (unsigned long long)g.files, left,
                   (unsigned long long)g.temps_removed);
    }
    tc_cache_close(c);
    return rc;
}

int cli_verify(int argc, char **argv)
{
    args a;
    int rc = parse_cache_args(argc, argv, &a, cli_usage_verify, TAKES_JSON | TAKES_REMOVE_BAD,
                              "verify takes --cache-dir, --remove-bad and --json");
    if (rc)
        return rc;
    tc_cache *c = cli_open_cache(a.cache_dir);
    if (!c)
        return EXIT_FAIL;
    uint64_t checked = 0, bad = 0;
    tc_error err;
    if (tc_cache_verify(c, a.remove_bad, &checked, &bad, &err) != TC_OK) {
        fprintf(stderr, "%s: error: %s\n", cli_prog, err.message);
        tc_cache_close(c);
        return EXIT_FAIL;
    }
    if (a.json)
        printf("{\"checked\": %llu, \"bad\": %llu, \"removed\": %llu}\n",
               (unsigned long long)checked, (unsigned long long)bad,
               (unsigned long long)(a.remove_bad ? bad : 0));
    else
        printf("%llu records checked, %llu bad%s\n", (unsigned long long)checked,
               (unsigned long long)bad, bad && a.remove_bad ? " (removed)" : "");
    tc_cache_close(c);
    return bad ? EXIT_FAIL : EXIT_OK;
}

int cli_clear(int argc, char **argv)
{
    args a;
    int rc = parse_cache_args(argc, argv, &a, cli_usage_clear, 0, "clear takes only --cache-dir");
    if (rc)
        return rc;
    tc_cache *c = cli_open_cache(a.cache_dir);
    if (!c)
        return EXIT_FAIL;
    tc_error err;
    if (tc_cache_clear(c, &err) != TC_OK) {
        fprintf(stderr, "%s: error: %s\n", cli_prog, err.message);
        rc = EXIT_FAIL;
    } else {
        printf("cleared %s\n", tc_cache_dir(c));
    }
    tc_cache_close(c);
    return rc;
}
