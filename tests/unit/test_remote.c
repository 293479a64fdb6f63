/* test_remote: the remote tier without a server. Specs as users write them
 * (and the messages a bad one gets), Redis Cluster slots and redirections,
 * and the remote's promises over a fake transport: uploads never block a
 * build and are flushed by a deadline, a server that is down costs one
 * attempt per process, transient failures are retried, and the store
 * serves a remote record only when it verifies, keeping it locally byte
 * for byte. The real servers are tests/e2e/test_remote.py's. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "remote/remote.h"
#include "store/config.h"
#include "store/stats.h"
#include "store/store.h"
#include "util/fs.h"
#ifdef TC_HAVE_HIREDIS
#include "remote/cluster.h"
#endif

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- specs ------------------------------------------------------------------------ */

static tc_remote_spec spec;
static char why[600];

static int parse(const char *text) { return tc_config_parse_remote(text, &spec, why, sizeof why); }

static void test_specs_people_write(void)
{
    CHECK(parse("redis://cache.lan") == 0);
    CHECK(spec.kind == TC_REMOTE_REDIS && !spec.tls && spec.nhosts == 1);
    CHECK_STR(spec.hosts[0].name, "cache.lan");
    CHECK(spec.hosts[0].port == 6379 && spec.db == 0);
    CHECK(spec.connect_timeout_ms == 500 && spec.timeout_ms == 10000 && spec.retries == 2);
    CHECK(spec.max_record == (uint64_t)64 << 20 && spec.ttl_s == 0 && !spec.read_only);

    CHECK(parse("rediss://:s%40cret@10.0.0.7:7000,10.0.0.8:7001/3|ttl=7d|read-only") == 0);
    CHECK(spec.tls && spec.nhosts == 2 && spec.hosts[1].port == 7001 && spec.db == 3);
    CHECK_STR(spec.password, "s@cret");
    CHECK_STR(spec.user, "");
    CHECK(spec.ttl_s == 7 * 86400 && spec.read_only);
    /* what users are shown never holds the password */
    CHECK_STR(spec.description, "rediss://10.0.0.7:7000,10.0.0.8:7001/3 (read-only)");

    CHECK(parse("https://ci:pw@cache.example.com/taskcache/|layout=bazel|timeout=2.5s|"
                "connect-timeout=300ms|max-record=8M|retries=0|bearer-token-file=/run/tok") == 0);
    CHECK(spec.kind == TC_REMOTE_HTTP && spec.tls && spec.layout == TC_LAYOUT_BAZEL);
    CHECK_STR(spec.base_url, "https://cache.example.com:443/taskcache");
    CHECK_STR(spec.user, "ci");
    CHECK_STR(spec.password, "pw");
    CHECK(spec.timeout_ms == 2500 && spec.connect_timeout_ms == 300 && spec.retries == 0);
    CHECK(spec.max_record == 8 << 20);
    CHECK_STR(spec.bearer_file, "/run/tok");
    CHECK(!strstr(spec.description, "pw"));

    CHECK(parse("redis://ci@cache|password-file=/run/secrets/redis") == 0);
    CHECK_STR(spec.user, "ci");
    CHECK_STR(spec.password_file, "/run/secrets/redis");

    CHECK(parse("http://[::1]:8080") == 0);
    CHECK_STR(spec.hosts[0].name, "::1");
    CHECK_STR(spec.base_url, "http://[::1]:8080");

    CHECK(parse("none") == 0 && spec.kind == 0);
    CHECK(parse("off") == 0 && spec.kind == 0);
}

/* Each mistake gets words that name it, and never repeats a password. */
static void test_bad_specs_say_what_is_wrong(void)
{
    static const struct {
        const char *spec, *words;
    } bad[] = {
        {"cache.lan:6379", "not a URL"},
        {"memcached://cache", "unknown scheme 'memcached'"},
        {"redis://", "host name is missing"},
        {"redis://cache:0", "port is a number from 1 to 65535"},
        {"redis://cache:65536", "port is a number from 1 to 65535"},
        {"redis://cache:", "not followed by a port"},
        {"redis://cache/db0", "database number"},
        {"redis://ca che", "character no host name has"},
        {"redis://[::1", "lacks its ']'"},
        {"redis://cache|ttl=1.5s", "whole seconds"},
        {"redis://cache|ttl", "needs a value"},
        {"redis://cache|read-only=yes", "takes no value"},
        {"redis://cache|layout=bazel", "other kind of server"},
        {"http://cache|ttl=7d", "other kind of server"},
        {"http://a,b", "one host"},
        {"http://cache/x?y=1", "no query"},
        {"redis://cache|tiemout=5s", "unknown attribute 'tiemout'"},
        {"redis://cache|timeout=0", "from 1ms to 1d"},
        {"redis://cache|timeout=fast", "from 1ms to 1d"},
        {"redis://cache|retries=10", "from 0 to 9"},
        {"redis://cache|max-record=lots", "a size such as 64M"},
        {"http://cache|layout=flat", "subdirs or bazel"},
        {"redis://:hunter2%zz@cache", "%XX"},
        {"https://s3.example/bucket|aws-sigv4=aws:amz:eu-west-1:s3", "access key and secret"},
        {"https://k:s@s3.example/b|aws-sigv4=aws amz", "PROVIDER:"},
        {"redis://default:hunter2|x@cache.lan", "as %2F, %7C and %40"},
        {"https://ci:2024/hunter2@cache.lan/tc", "as %2F, %7C and %40"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(parse(bad[i].spec) == -1);
        CHECK_CONTAINS(why, bad[i].words);
        CHECK_CONTAINS(why, "bad remote spec: ");
        CHECK(!strstr(why, "hunter2"));
        CHECK(spec.kind == 0); /* nothing half-parsed is left to use */
    }
}

static void test_durations_and_config_lines(void)
{
    long long ms;
    CHECK(tc_config_parse_duration("250ms", &ms) == 0 && ms == 250);
    CHECK(tc_config_parse_duration("3", &ms) == 0 && ms == 3000);
    CHECK(tc_config_parse_duration("2h", &ms) == 0 && ms == 7200000);
    CHECK(tc_config_parse_duration("-1s", &ms) == -1);
    CHECK(tc_config_parse_duration("5 s", &ms) == -1);
    /* strtod reads these; a duration is a decimal number (fuzz_remote found
     * "nAn" converted to long long: undefined behaviour) */
    CHECK(tc_config_parse_duration("nAn", &ms) == -1);
    CHECK(tc_config_parse_duration("inf", &ms) == -1);
    CHECK(tc_config_parse_duration("infinitys", &ms) == -1);
    CHECK(tc_config_parse_duration(".5s", &ms) == 0 && ms == 500);
    static const char conf[] = "max_size = 2G\n# a comment\n\nremote = redis://a:1|ttl=1d  # team cache\n"
                               "shared = true\n";
    tc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    tc_config_parse(conf, sizeof conf - 1, &cfg);
    CHECK_STR(cfg.remote, "redis://a:1|ttl=1d");
    CHECK(cfg.remote_line == 4 && cfg.shared && cfg.max_size == (uint64_t)2 << 30);
    /* a value is the rest of the line: "10 G" was read as 10 bytes, and
     * every build then evicted the whole cache (a review) */
    static const char spaced[] = "max_size=10 G\r\nshared\t=\tyes \nremote=\n";
    memset(&cfg, 0, sizeof cfg);
    tc_config_parse(spaced, sizeof spaced - 1, &cfg);
    CHECK(cfg.max_size == (uint64_t)10 << 30 && cfg.shared && cfg.remote_line == 3);
    CHECK_STR(cfg.remote, "");
    static const char bad[] = "max_size = 10 Gigs\nmax_size_x = 1\n = 5\nmax_size 7\n";
    memset(&cfg, 0, sizeof cfg);
    cfg.max_size = 123;
    tc_config_parse(bad, sizeof bad - 1, &cfg);
    CHECK(cfg.max_size == 123); /* nothing here is a size: the default stands */
}

/* ---- Redis Cluster ---------------------------------------------------------------- */

#ifdef TC_HAVE_HIREDIS
static void test_cluster_slots_and_redirects(void)
{
    /* the values of the Redis Cluster specification */
    CHECK(tc_cluster_slot("123456789", 9) == 0x31C3 % 16384);
    CHECK(tc_cluster_slot("{user1000}.following", 20) == tc_cluster_slot("user1000", 8));
    CHECK(tc_cluster_slot("foo{}{bar}", 10) != tc_cluster_slot("bar", 3)); /* empty tag: whole key */
    tc_redirect r;
    CHECK(tc_cluster_parse_redirect("MOVED 3999 127.0.0.1:6381", 25, &r) == 1);
    CHECK(!r.ask && r.slot == 3999 && r.node.port == 6381);
    CHECK_STR(r.node.name, "127.0.0.1");
    CHECK(tc_cluster_parse_redirect("ASK 12 ::1:7002", 15, &r) == 1);
    CHECK(r.ask && r.slot == 12 && r.node.port == 7002);
    CHECK_STR(r.node.name, "::1");
    CHECK(tc_cluster_parse_redirect("MOVED 5 :7000", 13, &r) == 1 && !r.node.name[0]);
    CHECK(tc_cluster_parse_redirect("MOVED 16384 a:1", 15, &r) == 0);
    CHECK(tc_cluster_parse_redirect("MOVED 1 a:0", 11, &r) == 0);
    CHECK(tc_cluster_parse_redirect("MOVED 1 a b:1", 13, &r) == 0);
    CHECK(tc_cluster_parse_redirect("ERR wrong", 9, &r) == 0);
    char v[16];
    static const char info[] = "# Memory\r\nused_memory_rss:9\r\nused_memory:1234\r\n";
    CHECK(tc_redis_info_field(info, sizeof info - 1, "used_memory", v, sizeof v) == 0);
    CHECK_STR(v, "1234");
    CHECK(tc_redis_info_field(info, sizeof info - 1, "memory", v, sizeof v) == -1);
}
#endif

/* ---- a fake server ------------------------------------------------------------------ */

#define FAKE_MAX 64
static struct fake_server {
    pthread_mutex_t lock;
    char names[FAKE_MAX][160];
    tc_sb values[FAKE_MAX];
    int n;
    int gets, puts;
    tc_remote_outcome fail_get, fail_put; /* forced outcome, TC_REMOTE_OK for none */
    int fail_times;                       /* of the forced outcome; -1 every time */
    int put_delay_ms, get_delay_ms;
    int opened;             /* transports opened */
    int in_get, most_in_get; /* lookups running at once, and the most seen */
    int wait_for_cancel;    /* a lookup waits (up to 5 s) for its cancel flag, as on a
                               server that never answers */
} fake = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void fake_reset(void)
{
    pthread_mutex_lock(&fake.lock);
    for (int i = 0; i < fake.n; i++)
        tc_sb_free(&fake.values[i]);
    fake.n = fake.gets = fake.puts = 0;
    fake.fail_get = fake.fail_put = TC_REMOTE_OK;
    fake.fail_times = 0;
    fake.put_delay_ms = fake.get_delay_ms = 0;
    fake.opened = fake.in_get = fake.most_in_get = 0;
    fake.wait_for_cancel = 0;
    pthread_mutex_unlock(&fake.lock);
}

static int fake_find(const char *name)
{
    for (int i = 0; i < fake.n; i++)
        if (!strcmp(fake.names[i], name))
            return i;
    return -1;
}

/* Under lock: the forced outcome of this call, if any. */
static tc_remote_outcome forced(tc_remote_outcome o)
{
    if (o == TC_REMOTE_OK || fake.fail_times == 0)
        return TC_REMOTE_OK;
    if (fake.fail_times > 0)
        fake.fail_times--;
    return o;
}

static tc_remote_outcome fake_get(tc_transport *t, const char *name, uint64_t max, tc_sb *out,
                                  char *w, size_t n)
{
    (void)max;
    pthread_mutex_lock(&fake.lock);
    int delay = fake.get_delay_ms;
    if (fake.wait_for_cancel) {
        fake.gets++;
        pthread_mutex_unlock(&fake.lock);
        for (int ms = 0; ms < 5000 && !tc_transport_cancelled(t); ms += 10) {
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
        }
        snprintf(w, n, "the fake waited for a cancel");
        return tc_transport_cancelled(t) ? TC_REMOTE_CANCELLED : TC_REMOTE_DOWN;
    }
    if (++fake.in_get > fake.most_in_get)
        fake.most_in_get = fake.in_get;
    pthread_mutex_unlock(&fake.lock);
    if (delay) {
        struct timespec ts = {delay / 1000, (delay % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&fake.lock);
    fake.in_get--;
    fake.gets++;
    tc_remote_outcome o = forced(fake.fail_get);
    int i = fake_find(name);
    if (o == TC_REMOTE_OK && i < 0)
        o = TC_REMOTE_MISSING;
    if (o == TC_REMOTE_OK)
        tc_sb_append(out, fake.values[i].data, fake.values[i].len);
    pthread_mutex_unlock(&fake.lock);
    snprintf(w, n, "the fake says %d", (int)o);
    return o;
}

static tc_remote_outcome fake_put(tc_transport *t, const char *name, const void *data,
                                  size_t len, char *w, size_t n)
{
    (void)t;
    pthread_mutex_lock(&fake.lock);
    int delay = fake.put_delay_ms;
    pthread_mutex_unlock(&fake.lock);
    if (delay) {
        struct timespec ts = {delay / 1000, (delay % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&fake.lock);
    fake.puts++;
    tc_remote_outcome o = forced(fake.fail_put);
    if (o == TC_REMOTE_OK) {
        int i = fake_find(name);
        if (i < 0 && fake.n < FAKE_MAX) {
            i = fake.n++;
            snprintf(fake.names[i], sizeof fake.names[i], "%s", name);
        }
        if (i >= 0) {
            tc_sb_reset(&fake.values[i]);
            tc_sb_append(&fake.values[i], data, len);
        }
    }
    pthread_mutex_unlock(&fake.lock);
    snprintf(w, n, "the fake refuses (%d)", (int)o);
    return o;
}

static tc_remote_outcome fake_remove(tc_transport *t, const char *name, char *w, size_t n)
{
    (void)t;
    (void)name;
    (void)w;
    (void)n;
    return TC_REMOTE_OK;
}

static tc_remote_outcome fake_info(tc_transport *t, char *server, size_t len, int64_t *bytes,
                                   int64_t *records, char *w, size_t n)
{
    (void)t;
    (void)w;
    (void)n;
    snprintf(server, len, "fake");
    *bytes = 1;
    *records = fake.n;
    return TC_REMOTE_OK;
}

static void fake_free(tc_transport *t) { free(t); }

static const tc_transport_ops fake_ops = {fake_get, fake_put, fake_remove, fake_info, fake_free};

static tc_transport *fake_open(const tc_remote_spec *s, void *ctx, char *w, size_t n)
{
    (void)s;
    (void)ctx;
    (void)w;
    (void)n;
    tc_transport *t = calloc(1, sizeof *t);
    t->ops = &fake_ops;
    pthread_mutex_lock(&fake.lock);
    fake.opened++;
    pthread_mutex_unlock(&fake.lock);
    return t;
}

static tc_remote *fake_remote(const char *attrs)
{
    char text[256];
    snprintf(text, sizeof text, "redis://fake%s", attrs);
    CHECK(parse(text) == 0);
    fake_reset();
    return tc_remote_new(&spec);
}

static char *dup_bytes(const char *s) { return strdup(s); }

/* ---- the remote's promises ------------------------------------------------------------- */

static void test_uploads_flush_and_count(void)
{
    tc_remote *r = fake_remote("");
    CHECK(tc_remote_put(r, "sm_90/u/aa", dup_bytes("one"), 3) == 0);
    CHECK(tc_remote_put(r, "sm_90/u/bb", dup_bytes("two!"), 4) == 0);
    char w[400];
    CHECK(tc_remote_flush(r, 5, w, sizeof w) == 0);
    tc_sb got = TC_SB_INIT;
    CHECK(tc_remote_get(r, "sm_90/u/bb", 100, &got, NULL, NULL) == TC_REMOTE_OK);
    CHECK(got.len == 4 && !memcmp(got.data, "two!", 4));
    CHECK(tc_remote_get(r, "sm_90/u/cc", 100, &got, NULL, NULL) == TC_REMOTE_MISSING &&
          got.len == 0);
    tc_remote_writes c;
    tc_remote_take_writes(r, &c);
    CHECK(c.written == 2 && c.bytes == 7 && c.failed == 0);
    tc_remote_take_writes(r, &c);
    CHECK(c.written == 0); /* taken once */
    tc_sb_free(&got);
    tc_remote_close(r, &c);
    CHECK(c.written == 0 && c.failed == 0);
}

/* A server that is not there: one attempt, then every lookup and upload
 * of the process is skipped at once, and the warning comes once. */
static void test_a_server_down_is_asked_once(void)
{
    tc_remote *r = fake_remote("");
    fake.fail_get = TC_REMOTE_DOWN;
    fake.fail_times = -1;
    tc_sb got = TC_SB_INIT;
    CHECK(tc_remote_get(r, "sm_90/u/aa", 100, &got, NULL, NULL) == TC_REMOTE_DOWN);
    for (int i = 0; i < 50; i++)
        CHECK(tc_remote_get(r, "sm_90/u/aa", 100, &got, NULL, NULL) == TC_REMOTE_OFF);
    CHECK(fake.gets == 1); /* down is not retried: that would multiply a timeout */
    char w[700];
    CHECK(tc_remote_take_warning(r, w, sizeof w) == 1);
    CHECK_CONTAINS(w, "remote redis://fake:6379: lookup failed: the fake says");
    CHECK_CONTAINS(w, "not used again by this process");
    CHECK(tc_remote_take_warning(r, w, sizeof w) == 0);
    CHECK(tc_remote_put(r, "sm_90/u/aa", dup_bytes("x"), 1) == -1);
    CHECK(fake.puts == 0);
    /* its failed uploads are counted, and not warned about twice */
    CHECK(tc_remote_flush(r, 1, w, sizeof w) == 0);
    tc_remote_writes c;
    tc_remote_close(r, &c);
    CHECK(c.failed == 1 && c.written == 0);
    tc_sb_free(&got);
}

/* An error answer (a 503, a restarting server) is retried; one that
 * persists costs a few attempts, and after three failures in a row the
 * process stops asking in that direction only. */
static void test_failures_are_retried_then_given_up(void)
{
    tc_remote *r = fake_remote("|retries=2");
    fake.fail_get = TC_REMOTE_FAILED;
    fake.fail_times = 2;
    tc_sb got = TC_SB_INIT;
    CHECK(tc_remote_get(r, "sm_90/u/aa", 100, &got, NULL, NULL) == TC_REMOTE_MISSING);
    CHECK(fake.gets == 3);
    fake.fail_times = -1;
    for (int i = 0; i < 3; i++)
        CHECK(tc_remote_get(r, "sm_90/u/aa", 100, &got, NULL, NULL) == TC_REMOTE_FAILED);
    CHECK(fake.gets == 3 + 3 * 3);
    CHECK(tc_remote_get(r, "sm_90/u/aa", 100, &got, NULL, NULL) == TC_REMOTE_OFF);
    /* uploads still go */
    CHECK(tc_remote_put(r, "sm_90/u/aa", dup_bytes("x"), 1) == 0);
    char w[700];
    CHECK(tc_remote_flush(r, 5, w, sizeof w) == 0);
    CHECK(fake.puts == 1);
    /* a server refusing every upload (full): reported by the flush, with why */
    fake.fail_put = TC_REMOTE_FAILED;
    for (int i = 0; i < 5; i++)
        CHECK(tc_remote_put(r, "sm_90/u/bb", dup_bytes("y"), 1) == 0);
    CHECK(tc_remote_flush(r, 5, w, sizeof w) == -1);
    CHECK_CONTAINS(w, "5 record(s) could not be written to remote redis://fake:6379");
    CHECK_CONTAINS(w, "the fake refuses");
    CHECK(fake.puts == 1 + 3 * 3); /* three uploads tried, with retries; two dropped */
    tc_remote_writes c;
    tc_remote_close(r, &c);
    CHECK(c.written == 1 && c.failed == 5);
    tc_sb_free(&got);
}

/* Uploads never wait for the network; the queue is bounded; a close
 * waits for the flush timeout and no longer, even with an upload stuck
 * on its thread. */
static volatile sig_atomic_t cancel_flag;

static void *raise_cancel_soon(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 100 * 1000000L};
    nanosleep(&ts, NULL);
    cancel_flag = 1;
    return NULL;
}

/* A raised cancel flag ends a lookup that waits on the server (a Ctrl-C
 * during a lookup of a stalled server waited out its timeout, 10 s by
 * default), is not retried, and says nothing of the server: the next
 * lookup asks it again, and no warning is given. */
static void test_a_cancel_ends_a_lookup(void)
{
    tc_remote *r = fake_remote("|retries=2");
    fake.wait_for_cancel = 1;
    cancel_flag = 0;
    pthread_t raiser;
    CHECK(pthread_create(&raiser, NULL, raise_cancel_soon, NULL) == 0);
    tc_sb got = TC_SB_INIT;
    double t0 = tc_remote_now();
    CHECK(tc_remote_get(r, "sm_90/u/aa", 100, &got, &cancel_flag, NULL) == TC_REMOTE_CANCELLED);
    CHECK(tc_remote_now() - t0 < 4); /* the fake would wait 5 s without the flag */
    pthread_join(raiser, NULL);
    CHECK(fake.gets == 1);
    /* raised before the lookup: the server is not asked at all */
    CHECK(tc_remote_get(r, "sm_90/u/aa", 100, &got, &cancel_flag, NULL) == TC_REMOTE_CANCELLED);
    CHECK(fake.gets == 1);
    fake.wait_for_cancel = 0;
    cancel_flag = 0;
    CHECK(tc_remote_get(r, "sm_90/u/aa", 100, &got, &cancel_flag, NULL) == TC_REMOTE_MISSING);
    CHECK(fake.gets == 2);
    char w[700];
    CHECK(tc_remote_take_warning(r, w, sizeof w) == 0);
    tc_sb_free(&got);
    tc_remote_close(r, NULL);
}

static void test_flush_deadline_and_a_stuck_upload(void)
{
    tc_remote *r = fake_remote("|flush-timeout=200ms");
    fake.put_delay_ms = 1500;
    double t0 = now();
    for (int i = 0; i < 20; i++)
        CHECK(tc_remote_put(r, "sm_90/u/aa", dup_bytes("x"), 1) == 0);
    CHECK(now() - t0 < 0.1);
    char w[700];
    CHECK(tc_remote_flush(r, 0.05, w, sizeof w) == -1);
    CHECK_CONTAINS(w, "still being written");
    t0 = now();
    tc_remote_writes c;
    tc_remote_close(r, &c); /* the writer is inside its first upload: left to finish alone */
    double took = now() - t0;
    CHECK(took >= 0.1 && took < 0.8); /* 200 ms from the flush's start */
    CHECK(c.written == 0 && c.failed == 20);
    /* the orphaned writer frees what it holds once its upload returns (ASan
     * would report it otherwise) */
    struct timespec ts = {1, 600000000L};
    nanosleep(&ts, NULL);
}

static void test_read_only_and_too_large(void)
{
    tc_remote *r = fake_remote("|read-only");
    CHECK(tc_remote_put(r, "sm_90/u/aa", dup_bytes("x"), 1) == -1);
    tc_remote_writes c;
    tc_remote_take_writes(r, &c);
    CHECK(c.failed == 0 && fake.puts == 0); /* read-only is a choice, not a failure */
    tc_remote_close(r, NULL);
    r = fake_remote("|max-record=1K");
    char *big = calloc(1, 2048);
    CHECK(tc_remote_put(r, "sm_90/m/aa", big, 2048) == -1);
    char w[700];
    CHECK(tc_remote_flush(r, 1, w, sizeof w) == -1);
    CHECK_CONTAINS(w, "larger than the remote's max-record");
    tc_remote_close(r, &c);
    CHECK(c.failed == 1);
}

/* A child forked from a process using the remote does not use it (its
 * connections and writer belong to the parent). */
static void test_a_forked_child_does_not_use_it(void)
{
    tc_remote *r = fake_remote("");
    CHECK(tc_remote_put(r, "sm_90/u/aa", dup_bytes("x"), 1) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        tc_sb got = TC_SB_INIT;
        int ok = tc_remote_get(r, "sm_90/u/aa", 100, &got, NULL, NULL) == TC_REMOTE_OFF &&
                 tc_remote_put(r, "sm_90/u/bb", dup_bytes("y"), 1) == -1;
        tc_remote_close(r, NULL);
        _exit(ok ? 0 : 1);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    tc_remote_close(r, NULL);
    CHECK(fake.puts == 1);
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LEAKS_CHECKED_AT_EXIT 1
#endif
#endif

static void *slow_lookup(void *arg)
{
    tc_sb got = TC_SB_INIT;
    (void)tc_remote_get(arg, "sm_90/u/aa", 100, &got, NULL, NULL);
    tc_sb_free(&got);
    return NULL;
}

/* A child forked while a thread of its parent is inside a lookup (holding
 * the remote's locks, which no thread of the child will release) answers
 * at once, and exits (flushing at exit) without waiting for them. */
static void test_a_child_forked_during_a_lookup(void)
{
    tc_remote *r = fake_remote("");
    fake.get_delay_ms = 800;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, slow_lookup, r) == 0);
    struct timespec ts = {0, 150000000L};
    nanosleep(&ts, NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(5); /* a hang ends the child by SIGALRM, which the parent sees */
        double t0 = now();
        tc_sb got = TC_SB_INIT;
        char w[100];
        tc_remote_writes c;
        int ok = tc_remote_get(r, "sm_90/u/aa", 100, &got, NULL, NULL) == TC_REMOTE_OFF &&
                 tc_remote_put(r, "sm_90/u/bb", dup_bytes("y"), 1) == -1 &&
                 tc_remote_take_warning(r, w, sizeof w) == 0;
        tc_remote_take_writes(r, &c);
        ok = ok && c.written == 0 && now() - t0 < 0.5;
#ifdef LEAKS_CHECKED_AT_EXIT
        _exit(ok ? 0 : 1); /* LeakSanitizer cannot see the stacks of the parent's threads */
#else
        exit(ok ? 0 : 1); /* exit, not _exit: the exit flush runs */
#endif
    }
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    pthread_join(th, NULL);
    CHECK(fake.gets == 1);
    tc_remote_close(r, NULL);
}

/* A flush that timed out, then a close (what taskcache build does at
 * exit): flush-timeout in all, not twice. */
static void test_flush_then_close_waits_once(void)
{
    tc_remote *r = fake_remote("|flush-timeout=300ms");
    fake.put_delay_ms = 1500;
    CHECK(tc_remote_put(r, "sm_90/u/aa", dup_bytes("x"), 1) == 0);
    double t0 = now();
    char w[700];
    CHECK(tc_remote_flush(r, -1, w, sizeof w) == -1);
    tc_remote_close(r, NULL);
    double took = now() - t0;
    CHECK(took >= 0.25 && took < 0.5);
    struct timespec ts = {1, 600000000L}; /* the orphaned writer finishes and frees */
    nanosleep(&ts, NULL);
}

/* ---- the store with a remote ------------------------------------------------------------ */

static char *make_dir(void)
{
    char *d = tc_make_temp_dir("taskcache-test-remote");
    CHECK(d != NULL);
    return d;
}

/* Two machines' stores sharing one (fake) remote: a uploads, b reads. */
typedef struct machines {
    char *dir_a, *dir_b;
    tc_store *a, *b;
} machines;

static void machines_open(machines *m)
{
    m->dir_a = make_dir();
    m->dir_b = make_dir();
    m->a = tc_store_open(m->dir_a);
    m->b = tc_store_open(m->dir_b);
    fake_reset();
    CHECK(tc_store_set_remote(m->a, "redis://fake|flush-timeout=5s", why, sizeof why) == 0);
    CHECK(tc_store_set_remote(m->b, "redis://fake", why, sizeof why) == 0);
}

static void machines_close(machines *m)
{
    tc_store_close(m->a);
    tc_store_close(m->b);
    tc_remove_tree(m->dir_a);
    tc_remove_tree(m->dir_b);
    free(m->dir_a);
    free(m->dir_b);
}

static void test_the_store_verifies_and_keeps_remote_records(void)
{
    machines m;
    machines_open(&m);
    tc_store *a = m.a, *b = m.b;
    CHECK_STR(tc_store_remote(b), "redis://fake:6379");
    tc_digest k1, k2;
    tc_digest_of("one", 3, &k1);
    tc_digest_of("two", 3, &k2);
    CHECK(tc_store_put(a, "sm_90", TC_REC_UNIT, &k1, "payload one", 11) > 0);
    CHECK(tc_store_put(a, "sm_90", TC_REC_UNIT, &k2, "payload two", 11) > 0);
    CHECK(tc_store_flush(a, 5, why, sizeof why) == 0);
    CHECK(fake.n == 2);

    /* machine b: a local miss served by the remote, and kept */
    char *p = NULL;
    size_t n = 0;
    int bad = 0;
    CHECK(tc_store_get(b, "sm_90", TC_REC_UNIT, &k1, 1, NULL, &p, &n, &bad) == 1);
    CHECK(n == 11 && !memcmp(p, "payload one", 11) && !bad);
    free(p);
    int gets = fake.gets;
    CHECK(tc_store_get(b, "sm_90", TC_REC_UNIT, &k1, 1, NULL, &p, &n, &bad) == 1);
    free(p);
    CHECK(fake.gets == gets); /* the second look is local */
    char hex[65], path[4096], *local = NULL;
    size_t local_len;
    tc_digest_hex(&k1, hex);
    snprintf(path, sizeof path, "%s/v1/sm_90/u/%.2s/%s", m.dir_b, hex, hex + 2);
    CHECK(tc_read_file(path, 1, &local, &local_len) == 0);
    char name[128];
    snprintf(name, sizeof name, "sm_90/u/%s", hex);
    int i1 = fake_find(name);
    CHECK(i1 >= 0 && local && local_len == fake.values[i1].len &&
          !memcmp(local, fake.values[i1].data, local_len)); /* byte for byte */
    free(local);

    /* a record swapped for another's bytes (right name, wrong content), and
     * one cut short: each a miss, counted as bad, never served */
    char hex2[65], name2[128];
    tc_digest_hex(&k2, hex2);
    snprintf(name2, sizeof name2, "sm_90/u/%s", hex2);
    int i2 = fake_find(name2);
    CHECK(i2 >= 0);
    tc_sb swapped = TC_SB_INIT;
    tc_sb_append(&swapped, fake.values[i1].data, fake.values[i1].len);
    tc_sb_reset(&fake.values[i2]);
    tc_sb_append(&fake.values[i2], swapped.data, swapped.len);
    tc_sb_free(&swapped);
    p = NULL;
    CHECK(tc_store_get(b, "sm_90", TC_REC_UNIT, &k2, 1, NULL, &p, &n, &bad) == 0 && !p);
    fake.values[i2].len = 40;
    CHECK(tc_store_get(b, "sm_90", TC_REC_UNIT, &k2, 1, NULL, &p, &n, &bad) == 0 && !p);
    CHECK(!bad); /* bad local records only */
    tc_counters c;
    memset(&c, 0, sizeof c);
    tc_store_take_counts(b, &c);
    CHECK(c.v[TC_C_REMOTE_HITS] == 1 && c.v[TC_C_REMOTE_MISSES] == 2);
    CHECK(c.v[TC_C_REMOTE_BAD] == 2 && c.v[TC_C_REMOTE_ERRORS] == 0);
    CHECK(c.v[TC_C_REMOTE_READ_BYTES] > 40);

    /* verify checks the local records only: a bad local one is not
     * "repaired" from the remote behind its back */
    uint64_t checked = 0, nbad = 0;
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (f) {
        fseek(f, 100, SEEK_SET);
        fputc('!', f);
        fclose(f);
    }
    CHECK(tc_store_verify(b, 0, &checked, &nbad) == 0);
    CHECK(checked == 1 && nbad == 1);
    machines_close(&m);
}

/* A machine with an empty cache asks for its missing records several at
 * a time, each lookup on a connection of its own (TC_REMOTE_READERS at
 * most, kept for the next); local records are not asked; a record the
 * remote lacks is reported asked, so that nobody asks again. */
static void test_prefetch_overlaps_lookups(void)
{
    machines m;
    machines_open(&m);
    tc_store *a = m.a, *b = m.b;
    enum { N = 24 };
    tc_digest keys[N];
    for (int i = 0; i < N; i++) {
        char k[16];
        snprintf(k, sizeof k, "key %d", i);
        tc_digest_of(k, strlen(k), &keys[i]);
        if (i < N - 2) /* the last two: on no server */
            CHECK(tc_store_put(a, "sm_90", TC_REC_UNIT, &keys[i], k, strlen(k)) > 0);
    }
    CHECK(tc_store_flush(a, 5, why, sizeof why) == 0);
    CHECK(tc_store_put(b, "sm_90", TC_REC_UNIT, &keys[0], "key 0", 5) > 0); /* b has one */
    CHECK(tc_store_flush(b, 5, why, sizeof why) == 0);
    fake.get_delay_ms = 50;
    fake.gets = fake.opened = fake.most_in_get = 0;
    uint8_t state[N];
    CHECK(tc_store_prefetch(b, "sm_90", TC_REC_UNIT, keys, N, NULL, state) == N - 1);
    CHECK(state[0] == TC_PREFETCH_LOCAL);
    for (int i = 1; i < N - 2; i++)
        CHECK(state[i] == TC_PREFETCH_FETCHED);
    CHECK(state[N - 2] == TC_PREFETCH_ASKED && state[N - 1] == TC_PREFETCH_ASKED);
    CHECK(fake.gets == N - 1);
    CHECK(fake.most_in_get > 1 && fake.most_in_get <= TC_REMOTE_READERS);
    CHECK(fake.opened > 1 && fake.opened <= TC_REMOTE_READERS);
    /* what was fetched is local now, verified */
    char *p = NULL;
    size_t n = 0;
    int bad = 0;
    int gets = fake.gets;
    CHECK(tc_store_get(b, "sm_90", TC_REC_UNIT, &keys[5], 1, NULL, &p, &n, &bad) == 1);
    CHECK(n == 5 && !memcmp(p, "key 5", 5) && fake.gets == gets);
    free(p);
    tc_counters c;
    memset(&c, 0, sizeof c);
    tc_store_take_counts(b, &c);
    CHECK(c.v[TC_C_REMOTE_HITS] == N - 3 && c.v[TC_C_REMOTE_MISSES] == 2);
    machines_close(&m);
}

/* A configured remote with a mistake: the store works without it, and
 * says where the mistake is (file and line). */
static void test_a_bad_remote_in_the_config_file(void)
{
    char *dir = make_dir();
    char conf[4096];
    snprintf(conf, sizeof conf, "%s/taskcache.conf", dir);
    CHECK(tc_write_file(conf, "max_size = 1G\nremote = redis://cache|tiemout=1s\n", 46) == 0);
    unsetenv("TASKCACHE_REMOTE");
    tc_store *st = tc_store_open(dir);
    CHECK(tc_store_remote(st) == NULL);
    char want[4200];
    snprintf(want, sizeof want, "%s/taskcache.conf:2: bad remote spec: unknown attribute 'tiemout'",
             dir);
    CHECK_CONTAINS(tc_store_remote_problem(st), want);
    tc_store_close(st);
    /* the environment comes first */
    setenv("TASKCACHE_REMOTE", "http://other:8080", 1);
    st = tc_store_open(dir);
    CHECK_STR(tc_store_remote(st), "http://other:8080");
    CHECK(tc_store_remote_problem(st) == NULL);
    tc_store_close(st);
    unsetenv("TASKCACHE_REMOTE");
    tc_remove_tree(dir);
    free(dir);
}

int main(void)
{
    test_specs_people_write();
    test_bad_specs_say_what_is_wrong();
    test_durations_and_config_lines();
#ifdef TC_HAVE_HIREDIS
    test_cluster_slots_and_redirects();
#endif
    tc_remote_set_transport_factory(fake_open, NULL);
    test_uploads_flush_and_count();
    test_a_server_down_is_asked_once();
    test_failures_are_retried_then_given_up();
    test_a_cancel_ends_a_lookup();
    test_flush_deadline_and_a_stuck_upload();
    test_read_only_and_too_large();
    test_a_forked_child_does_not_use_it();
    test_a_child_forked_during_a_lookup();
    test_flush_then_close_waits_once();
    test_the_store_verifies_and_keeps_remote_records();
    test_prefetch_overlaps_lookups();
    test_a_bad_remote_in_the_config_file();
    tc_remote_set_transport_factory(NULL, NULL);
    for (int i = 0; i < FAKE_MAX; i++)
        tc_sb_free(&fake.values[i]);
    return check_report("test_remote");
}
