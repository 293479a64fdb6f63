/* remote: `taskcache remote check`, and the --remote option the building
 * commands share (see remote.h). Public header only. */
#include "cli/remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (tc_cache_set_remote(cache, spec, &err) != TC_OK)
        return cli_usage_error("--remote: %s", err.message);
    return EXIT_OK;
}

void cli_flush_remote(tc_cache *cache)
{
    tc_error err;
    if (cache && tc_cache_flush(cache, -1, &err) != TC_OK)
        fprintf(stderr, "%s: warning: %s\n", cli_prog, err.message);
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
