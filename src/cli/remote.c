/* remote: `taskcache remote check`, and the --remote option the building
 * commands share (see remote.h). Public header only. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "cli/remote.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/common.h"

const char cli_usage_remote[] =
    "usage: taskcache remote check [--cache-dir DIR] [--remote SPEC] [--json]\n"
    "\n"
    "Checks the remote storage behind the cache: reaches the server, writes a test\n"
    "record, reads it back, removes it, and says what the server holds when it\n"
    "can tell. Exit status 0 when every step passed, 1 when one failed.\n"
    "\n"
    "The remote is --remote SPEC, else $TASKCACHE_REMOTE, else 'remote = SPEC' in\n"
    "DIR/taskcache.conf. A spec is a URL and optional |attributes:\n"
    "\n"
    "  redis://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][/DB]\n"
    "                        Redis, or any node(s) of a Redis Cluster (rediss:// for TLS)\n"
    "  http://HOST[:PORT][/PATH], https://...\n"
    "                        a WebDAV server (nginx, Apache) or another HTTP cache\n"
    "  |read-only            look records up, never upload (developers read, CI writes)\n"
    "  |connect-timeout=500ms  |timeout=10s  |flush-timeout=10s  (uploads at exit)\n"
    "  |retries=2            attempts after the first, for transient failures (5xx,\n"
    "                        408, 429); a refusal (other 4xx) is not sent again\n"
    "  |ttl=7d               Redis: expiry, refreshed on every hit (default: none)\n"
    "  |max-record=64M       larger records are not uploaded (default 64M for Redis)\n"
    "  |layout=subdirs|bazel HTTP: <url>/v1/<target>/<kind>/<2 hex>/<62 hex> (default),\n"
    "                        or <url>/ac/<64 hex> for bazel-remote\n"
    "  |bearer-token-file=PATH  HTTP: send the token in PATH (user:password@ for basic)\n"
    "  |password-file=PATH  the password (Redis AUTH, HTTP basic) from PATH's first line,\n"
    "                        not from the URL, which every process and ps can read\n"
    "  |aws-sigv4=aws:amz:REGION:s3  S3 and compatible stores: requests signed with the\n"
    "                        KEY:SECRET@ of an https:// URL\n"
    "  |ca=PATH              TLS: a CA bundle file or a directory of CAs\n"
    "  none                  no remote\n"
    "\n"
    "Example: taskcache remote check --remote 'redis://cache.lan:6379|ttl=30d'\n";

int cli_use_remote(tc_cache *cache, const char *spec)
{
    tc_error err;
    if (!spec)
        return EXIT_OK;
    tc_status st = tc_cache_set_remote(cache, spec, &err);
    if (st == TC_ERR_IO) { /* a file it names is missing: a cache problem, not a usage error */
        fprintf(stderr, "%s: warning: --remote: %s; no remote storage is used\n", cli_prog,
                err.message);
        return EXIT_OK;
    }
    if (st != TC_OK)
        return cli_usage_error("--remote: %s", err.message);
    return EXIT_OK;
}

/* The one flush a command ends with, on a thread of its own, so that the
 * command's thread can see a Ctrl-C while it waits. Static: an interrupted
 * wait leaves it to the thread, and the process ends before the thread
 * does. */
static struct {
    tc_cache *cache;
    tc_status st;
    tc_error err;
    int done;
    pthread_mutex_t lock;
    pthread_cond_t cond;
} flush = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void *flush_thread(void *arg)
{
    (void)arg;
    tc_status st = tc_cache_flush(flush.cache, -1, &flush.err);
    pthread_mutex_lock(&flush.lock);
    flush.st = st;
    flush.done = 1;
    pthread_cond_signal(&flush.cond);
    pthread_mutex_unlock(&flush.lock);
    return NULL;
}

void cli_flush_remote(tc_cache *cache)
{
    if (!cache)
        return;
    flush.cache = cache;
    flush.done = 0;
    pthread_t t;
    if (pthread_create(&t, NULL, flush_thread, NULL) != 0) {
        flush_thread(NULL); /* no thread: waited for here */
    } else {
        /* uploads may take the remote's flush-timeout; a Ctrl-C ends the
         * wait at once (the signal does not wake the wait: it is looked
         * at every 50 ms), and what is still queued then gets the second
         * an interrupted build gives it (cli_close_cache) */
        pthread_mutex_lock(&flush.lock);
        while (!flush.done && !cli_interrupted()) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += 50 * 1000000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&flush.cond, &flush.lock, &until);
        }
        int done = flush.done;
        pthread_mutex_unlock(&flush.lock);
        if (!done) {
            pthread_detach(t); /* the flush stays the thread's */
            return;
        }
        pthread_join(t, NULL);
    }
    if (flush.st != TC_OK)
        fprintf(stderr, "%s: warning: %s\n", cli_prog, flush.err.message);
}

static void print_amount(int64_t bytes, int64_t records)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    if (bytes >= 0) {
        double v = (double)bytes;
        int u = 0;
        while (v >= 1024 && u < 4) {
            v /= 1024;
            u++;
        }
        printf("%.1f %s", v, units[u]);
    } else {
        printf("unknown size");
    }
    if (records >= 0)
        printf(" in %lld keys", (long long)records);
    putchar('\n');
}

static void print_check_text(const tc_cache *c, const tc_remote_report *r)
{
    printf("%-14s %s\n", "remote", tc_cache_remote(c));
    if (r->reachable)
        printf("%-14s %s\n", "server", r->server);
    printf("%-14s %s", "reachable", r->reachable ? "yes" : "no");
    if (r->reachable)
        printf(" (connected and answered in %.2f ms)", r->connect_seconds * 1e3);
    putchar('\n');
    if (r->read_only) {
        printf("%-14s %s\n", "writable", "not tried: read-only");
        printf("%-14s %s", "lookup", r->read_back ? "yes" : "no");
        if (r->read_back)
            printf(" (%.2f ms)", r->read_seconds * 1e3);
        putchar('\n');
    } else if (r->reachable) {
        printf("%-14s %s", "writable", r->writable ? "yes" : "no");
        if (r->writable)
            printf(" (a test record written in %.2f ms)", r->write_seconds * 1e3);
        putchar('\n');
        if (r->writable) {
            printf("%-14s %s", "round trip", r->read_back ? "yes" : "no");
            if (r->read_back)
                printf(" (read back intact in %.2f ms)", r->read_seconds * 1e3);
            putchar('\n');
        }
    }
    if (r->reachable) {
        printf("%-14s ", "server holds");
        print_amount(r->server_bytes, r->server_records);
    }
    if (r->message[0])
        printf("%-14s %s\n", "problem", r->message);
}

static void print_check_json(const tc_cache *c, const tc_remote_report *r)
{
    printf("{\"remote\": ");
    cli_json_string(tc_cache_remote(c));
    printf(", \"server\": ");
    cli_json_string(r->server);
    printf(", \"reachable\": %s, \"writable\": %s, \"read_back\": %s, \"read_only\": %s, "
           "\"connect_seconds\": %.6f, \"write_seconds\": %.6f, \"read_seconds\": %.6f, "
           "\"server_bytes\": %lld, \"server_records\": %lld, \"problem\": ",
           r->reachable ? "true" : "false", r->writable ? "true" : "false",
           r->read_back ? "true" : "false", r->read_only ? "true" : "false", r->connect_seconds,
           r->write_seconds, r->read_seconds, (long long)r->server_bytes,
           (long long)r->server_records);
    cli_json_string(r->message);
    printf("}\n");
}

int cli_remote(int argc, char **argv)
{
    if (argc < 1 || strcmp(argv[0], "check"))
        return cli_usage_error("%s", argc < 1 ? "remote needs a subcommand: remote check"
                                              : "the remote command has one subcommand: check");
    const char *dir = NULL, *spec = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(cli_usage_remote, stdout);
            return EXIT_OK;
        } else if ((v = cli_value_of(argc, argv, &i, "--cache-dir", 0))) {
            if (!*v)
                return cli_usage_error("%s needs a directory", "--cache-dir");
            dir = v;
        } else if ((v = cli_value_of(argc, argv, &i, "--remote", 0))) {
            spec = v;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else {
            return cli_usage_error("unknown argument '%s' (taskcache help remote)", argv[i]);
        }
    }
    tc_cache *c = cli_open_cache(dir);
    if (!c)
        return EXIT_FAIL;
    int rc = cli_use_remote(c, spec);
    tc_remote_report r;
    tc_error err;
    if (rc == EXIT_OK && tc_cache_remote_problem(c)) {
        fprintf(stderr, "%s: error: %s\n", cli_prog, tc_cache_remote_problem(c));
        rc = EXIT_FAIL;
    } else if (rc == EXIT_OK && tc_cache_check_remote(c, &r, &err) != TC_OK) {
        fprintf(stderr, "%s: error: %s\n", cli_prog, err.message);
        rc = EXIT_FAIL;
    } else if (rc == EXIT_OK) {
        if (json)
            print_check_json(c, &r);
        else
            print_check_text(c, &r);
        rc = r.reachable && r.read_back && (r.writable || r.read_only) ? EXIT_OK : EXIT_FAIL;
    }
    tc_cache_close(c);
    return rc;
}
