/* remote: a remote storage server as the store sees it (see remote.h):
 * lookups on one connection in turn, uploads through a bounded queue that
 * a writer thread drains on its own connection, and the rules that keep a
 * bad server from costing more than one timeout per process. */
#define _GNU_SOURCE
#include "remote/remote.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The queue holds at most this many bytes of records not yet uploaded
 * (more than the records of any one build of a large module: a 250-kernel
 * module writes ~2 MB); past it a record is dropped and counted, rather
 * than make a build wait for the network or hold unbounded memory. */
#define QUEUE_MAX_BYTES ((size_t)256 << 20)
#define QUEUE_MAX_RECORDS 8192
/* Failed operations in a row after which this process stops asking: a
 * server that refuses every write (full, read-only, bad credentials) is
 * found in a few records, not paid for in every one. */
#define FAILURES_IN_A_ROW 3
/* Pause before retrying a transient failure; doubles on every retry. */
#define RETRY_PAUSE_MS 20

typedef struct upload {
    struct upload *next;
    char *name;
    char *data;
    size_t len;
} upload;

struct tc_remote {
    tc_remote_spec spec;
    pid_t pid;                  /* the process that made it: a forked child does not use it */
    pthread_mutex_t lock;       /* guards everything below */
    /* Connections for lookups: a thread takes an idle one or opens one,
     * up to TC_REMOTE_READERS, so that lookups of many records overlap
     * (tc_store_prefetch) instead of paying one round trip each. */
    tc_transport *idle[TC_REMOTE_READERS];
    int nidle, nreaders;
    pthread_cond_t changed;     /* queue, writer state */
    int down;                   /* not asked again by this process */
    int reads_off, writes_off;
    int read_failures, write_failures;  /* in a row */
    char warning[600];          /* "remote <description>: " + problem */
    char problem[400];          /* the first problem of the process */
    int warning_taken;
    upload *head, *tail;
    size_t queued_bytes, queued;
    int writer_started, writer_running, writer_busy, closing, orphaned;
    pthread_t writer;
    tc_remote_writes counts;    /* since the last tc_remote_take_writes */
    double unfinished_flush;    /* when a flush that timed out began; 0 after a new put */
    uint64_t unflushed_failures;  /* since the last tc_remote_flush */
    int unflushed_news;         /* some of them for a reason the warning does not give */
    char first_failure[300];
    int registered;             /* in the atexit list */
    struct tc_remote *next_live;
};

/* ---- transports ---------------------------------------------------------------------- */

static tc_transport *(*factory)(const tc_remote_spec *, void *, char *, size_t);
static void *factory_ctx;

void tc_remote_set_transport_factory(tc_transport *(*open)(const tc_remote_spec *spec,
                                                           void *ctx, char *why, size_t n),
                                     void *ctx)
{
    factory = open;
    factory_ctx = ctx;
}

static tc_transport *open_transport(const tc_remote_spec *spec, char *why, size_t n)
{
    if (factory)
        return factory(spec, factory_ctx, why, n);
    if (spec->kind == TC_REMOTE_HTTP) {
#ifdef TC_HAVE_CURL
        return tc_http_open(spec, why, n);
#else
        snprintf(why, n, "this taskcache was built without HTTP remotes (libcurl's headers "
                         "were not found: install libcurl4-openssl-dev and rebuild)");
        return NULL;
#endif
    }
#ifdef TC_HAVE_HIREDIS
    return tc_redis_open(spec, why, n);
#else
    snprintf(why, n, "this taskcache was built without Redis remotes (hiredis was not found: "
                     "install libhiredis-dev and rebuild)");
    return NULL;
#endif
}

/* ---- time and signals ---------------------------------------------------------------- */

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Waits on the remote's condition until the monotonic time `until`. */
static void wait_until(tc_remote *r, double until)
{
    struct timespec ts;
    double whole = (double)(long long)until;
    ts.tv_sec = (time_t)whole;
    ts.tv_nsec = (long)((until - whole) * 1e9);
    pthread_cond_timedwait(&r->changed, &r->lock, &ts);
}

/* A write to a socket the server has closed raises SIGPIPE, which ends a
 * program that does not ignore it (hiredis writes with write(2); so do
 * TLS libraries). Around every call into a transport the signal is
 * blocked for the calling thread, and one the call raised is taken before
 * it is unblocked: the call sees EPIPE, the program sees nothing. */
typedef struct pipe_guard {
    sigset_t old;
    int pending_before;
} pipe_guard;

static void guard_pipe(pipe_guard *g)
{
    sigset_t pipe, pending;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigpending(&pending);
    g->pending_before = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe, &g->old);
}

static void unguard_pipe(pipe_guard *g)
{
    sigset_t pipe, pending;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigpending(&pending);
    if (!g->pending_before && sigismember(&pending, SIGPIPE) == 1) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe, NULL, &zero) < 0 && errno == EINTR) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* ---- the process's live remotes, flushed at exit ------------------------------------- */

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static tc_remote *live;
static pthread_once_t atexit_once = PTHREAD_ONCE_INIT;

/* Uploads still queued when the program exits (a JIT that never closes its
 * cache, the driver interceptor) get their flush timeout too. */
static void flush_at_exit(void)
{
    pthread_mutex_lock(&live_lock);
    for (tc_remote *r = live; r; r = r->next_live)
        if (r->pid == getpid()) {
            char why[8];
            (void)tc_remote_flush(r, -1, why, sizeof why);
        }
    pthread_mutex_unlock(&live_lock);
}

/* A forked child uses none of its parent's remotes (each call checks the
 * pid first), and must not wait for live_lock, which a thread it lacks
 * may have held at the fork: it starts with an empty list. */
static void forget_live_in_child(void)
{
    pthread_mutex_init(&live_lock, NULL);
    live = NULL;
}

static void register_at_exit(void)
{
    atexit(flush_at_exit);
    pthread_atfork(NULL, NULL, forget_live_in_child);
}

static void add_live(tc_remote *r)
{
    pthread_once(&atexit_once, register_at_exit);
    pthread_mutex_lock(&live_lock);
    r->next_live = live;
    live = r;
    r->registered = 1;
    pthread_mutex_unlock(&live_lock);
}

static void remove_live(tc_remote *r)
{
    pthread_mutex_lock(&live_lock);
    for (tc_remote **p = &live; *p; p = &(*p)->next_live)
        if (*p == r) {
            *p = r->next_live;
            break;
        }
    pthread_mutex_unlock(&live_lock);
}

/* ---- state ---------------------------------------------------------------------------- */

tc_remote *tc_remote_new(const tc_remote_spec *spec)
{
    tc_remote *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->spec = *spec;
    r->pid = getpid();
    pthread_mutex_init(&r->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&r->changed, &attr);
    pthread_condattr_destroy(&attr);
    return r;
}

const tc_remote_spec *tc_remote_spec_of(const tc_remote *r) { return &r->spec; }

/* Under lock: keeps the first problem of the process for its one warning. */
static void note_problem(tc_remote *r, const char *what, const char *why)
{
    if (r->problem[0])
        return;
    snprintf(r->problem, sizeof r->problem, "%.40s: %.340s", what, why);
    snprintf(r->warning, sizeof r->warning, "remote %.190s: %.399s", r->spec.description,
             r->problem);
}

/* Under lock: what an operation's outcome means for the rest of the
 * process. A server that is not there or stalls is not asked again; one
 * that fails FAILURES_IN_A_ROW times in a row in one direction is not
 * asked again in that direction. */
static void judge(tc_remote *r, int writing, tc_remote_outcome o, const char *why)
{
    int *row = writing ? &r->write_failures : &r->read_failures;
    if (o == TC_REMOTE_CANCELLED) /* the caller gave up: nothing learnt of the server */
        return;
    if (o == TC_REMOTE_OK || o == TC_REMOTE_MISSING) {
        *row = 0;
        return;
    }
    const char *what = writing ? "upload failed" : "lookup failed";
    if (o == TC_REMOTE_DOWN) {
        r->down = 1;
        char words[400];
        snprintf(words, sizeof words, "%s; not used again by this process", why);
        note_problem(r, what, words);
        pthread_cond_broadcast(&r->changed);
        return;
    }
    note_problem(r, what, why);
    if (++*row >= FAILURES_IN_A_ROW) {
        if (writing)
            r->writes_off = 1;
        else
            r->reads_off = 1;
    }
}

static int usable(tc_remote *r, int writing)
{
    return r->pid == getpid() && !r->down && !(writing ? r->writes_off : r->reads_off);
}

int tc_remote_take_warning(tc_remote *r, char *buf, size_t n)
{
    if (r->pid != getpid()) /* before any lock: see tc_remote_get */
        return 0;
    pthread_mutex_lock(&r->lock);
    int give = r->warning[0] && !r->warning_taken;
    if (give) {
        snprintf(buf, n, "%s", r->warning);
        r->warning_taken = 1;
    }
    pthread_mutex_unlock(&r->lock);
    return give;
}

/* Runs op until it succeeds, finds nothing, or fails in a way a retry
 * cannot mend; transient failures (an error answer: a restarting server, a
 * 503) are retried spec.retries times with a growing pause. A server that
 * is down or stalled is not retried: that would multiply the timeout; nor
 * is a refusal (a 403, a 413): it would be refused again. */
typedef tc_remote_outcome (*attempt_fn)(tc_transport *t, void *ctx, char *why, size_t n);

static tc_remote_outcome with_retries(tc_remote *r, tc_transport *t, attempt_fn op, void *ctx,
                                      char *why, size_t n)
{
    tc_remote_outcome o = TC_REMOTE_DOWN;
    long pause = RETRY_PAUSE_MS;
    for (int attempt = 0; attempt <= r->spec.retries; attempt++, pause *= 2) {
        if (attempt)
            pause_ms(pause);
        if (tc_transport_cancelled(t))
            return TC_REMOTE_CANCELLED;
        pipe_guard g;
        guard_pipe(&g);
        o = op(t, ctx, why, n);
        unguard_pipe(&g);
        if (o != TC_REMOTE_FAILED)
            break;
    }
    return o;
}

/* ---- lookups ------------------------------------------------------------------------- */

typedef struct get_args {
    const char *name;
    uint64_t max;
    tc_sb *out;
} get_args;

static tc_remote_outcome attempt_get(tc_transport *t, void *ctx, char *why, size_t n)
{
    get_args *a = ctx;
    tc_sb_reset(a->out);
    return t->ops->get(t, a->name, a->max, a->out, why, n);
}

tc_remote_outcome tc_remote_get(tc_remote *r, const char *name, uint64_t max, tc_sb *out,
                                const volatile sig_atomic_t *cancel, double *seconds)
{
    double t0 = tc_remote_now();
    char why[400] = "";
    tc_remote_outcome o = TC_REMOTE_OFF;
    tc_sb_reset(out);
    if (seconds)
        *seconds = 0;
    /* A forked child checks before taking any lock: a thread of the parent
     * may have held lock at the fork, and the child has no such thread to
     * release it. pid never changes. */
    if (r->pid != getpid())
        return TC_REMOTE_OFF;
    if (cancel && *cancel)
        return TC_REMOTE_CANCELLED;
    pthread_mutex_lock(&r->lock);
    while (usable(r, 0) && !r->nidle && r->nreaders == TC_REMOTE_READERS)
        pthread_cond_wait(&r->changed, &r->lock);
    /* checked once a connection is ours: another lookup may have found the
     * server down meanwhile */
    int go = usable(r, 0);
    tc_transport *t = NULL;
    if (go) {
        if (r->nidle)
            t = r->idle[--r->nidle];
        else
            r->nreaders++; /* opened below, outside the lock */
    }
    pthread_mutex_unlock(&r->lock);
    if (go) {
        if (!t)
            t = open_transport(&r->spec, why, sizeof why);
        get_args a = {name, max, out};
        o = TC_REMOTE_DOWN;
        if (t) {
            t->cancel = cancel;
            o = with_retries(r, t, attempt_get, &a, why, sizeof why);
            t->cancel = NULL;
        }
        pthread_mutex_lock(&r->lock);
        judge(r, 0, o, why);
        if (t)
            r->idle[r->nidle++] = t;
        else
            r->nreaders--;
        pthread_cond_broadcast(&r->changed);
        pthread_mutex_unlock(&r->lock);
    }
    if (o != TC_REMOTE_OK)
        tc_sb_reset(out);
    if (seconds)
        *seconds = go ? tc_remote_now() - t0 : 0;
    return o;
}

/* ---- uploads --------------------------------------------------------------------------- */

static void free_upload(upload *u)
{
    free(u->name);
    free(u->data);
    free(u);
}

/* Under lock: one record that will not be written; why, or NULL when it
 * is because this process stopped using the remote (which the warning
 * says). */
static void count_failure(tc_remote *r, const char *why)
{
    r->counts.failed++;
    if (!why)
        why = r->problem[0] ? r->problem : "the remote is not used";
    else
        r->unflushed_news = 1;
    if (!r->unflushed_failures++)
        snprintf(r->first_failure, sizeof r->first_failure, "%.299s", why);
}

/* Under lock: drops everything queued (the server is down, or the deadline
 * came). */
static void drop_queue(tc_remote *r, const char *why)
{
    while (r->head) {
        upload *u = r->head;
        r->head = u->next;
        r->queued_bytes -= u->len;
        r->queued--;
        count_failure(r, why);
        free_upload(u);
    }
    r->tail = NULL;
}

typedef struct put_args {
    const upload *u;
} put_args;

static tc_remote_outcome attempt_put(tc_transport *t, void *ctx, char *why, size_t n)
{
    const upload *u = ((put_args *)ctx)->u;
    return t->ops->put(t, u->name, u->data, u->len, why, n);
}

/* Frees what an orphaned remote still holds (tc_remote_close left it to
 * its writer, which was inside an upload at the deadline). */
static void free_remote(tc_remote *r)
{
    pthread_cond_destroy(&r->changed);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

static void *writer_main(void *arg)
{
    tc_remote *r = arg;
    tc_transport *t = NULL;
    char why[400];
    pthread_mutex_lock(&r->lock);
    for (;;) {
        while (!r->head && !r->closing)
            pthread_cond_wait(&r->changed, &r->lock);
        if (!r->head)
            break;
        upload *u = r->head;
        r->head = u->next;
        if (!r->head)
            r->tail = NULL;
        r->queued_bytes -= u->len;
        r->queued--;
        if (!usable(r, 1)) {
            count_failure(r, NULL);
            free_upload(u);
            continue;
        }
        r->writer_busy = 1;
        pthread_mutex_unlock(&r->lock);
        why[0] = '\0';
        if (!t)
            t = open_transport(&r->spec, why, sizeof why);
        put_args a = {u};
        tc_remote_outcome o = t ? with_retries(r, t, attempt_put, &a, why, sizeof why)
                                : TC_REMOTE_DOWN;
        pthread_mutex_lock(&r->lock);
        r->writer_busy = 0;
        if (o == TC_REMOTE_OK) {
            r->counts.written++;
            r->counts.bytes += u->len;
        } else {
            count_failure(r, why);
        }
        judge(r, 1, o, why);
        free_upload(u);
        if (r->orphaned)
            break;
        pthread_cond_broadcast(&r->changed);
    }
    int orphaned = r->orphaned;
    r->writer_running = 0;
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->lock);
    if (t) {
        pipe_guard g;
        guard_pipe(&g);
        t->ops->free(t);
        unguard_pipe(&g);
    }
    if (orphaned) {
        pthread_mutex_lock(&r->lock);
        drop_queue(r, "");
        pthread_mutex_unlock(&r->lock);
        free_remote(r);
    }
    return NULL;
}

/* Under lock: starts the writer thread, with every signal blocked (a
 * program's signal handlers run on its own threads, and SIGPIPE then
 * stays off this one). */
static int start_writer(tc_remote *r)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&r->writer, NULL, writer_main, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -1;
    r->writer_started = r->writer_running = 1;
    if (!r->registered)
        add_live(r);
    return 0;
}

int tc_remote_put(tc_remote *r, const char *name, char *data, size_t len)
{
    upload *u = NULL;
    const char *refused = NULL;
    if (r->pid != getpid()) { /* before any lock: see tc_remote_get */
        free(data);
        return -1;
    }
    pthread_mutex_lock(&r->lock);
    r->unfinished_flush = 0; /* a new record: a flush that gave up before did not wait for it */
    if (r->spec.read_only || r->closing) {
        free(data);
        pthread_mutex_unlock(&r->lock);
        return -1;
    }
    int off = !usable(r, 1);
    if (off)
        refused = "";
    else if (len > r->spec.max_record)
        refused = "a record larger than the remote's max-record is not uploaded";
    else if (r->queued >= QUEUE_MAX_RECORDS ||
             (r->queued && r->queued_bytes + len > QUEUE_MAX_BYTES))
        refused = "the upload queue is full (the server is slower than the builds)";
    else if (!(u = calloc(1, sizeof *u)) || !(u->name = strdup(name)))
        refused = "out of memory";
    else if (!r->writer_running && start_writer(r) != 0)
        refused = "cannot start the upload thread";
    if (refused) {
        count_failure(r, off ? NULL : refused);
        if (u)
            free(u->name);
        free(u);
        free(data);
        pthread_mutex_unlock(&r->lock);
        return -1;
    }
    u->data = data;
    u->len = len;
    if (r->tail)
        r->tail->next = u;
    else
        r->head = u;
    r->tail = u;
    r->queued++;
    r->queued_bytes += len;
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->lock);
    return 0;
}

void tc_remote_take_writes(tc_remote *r, tc_remote_writes *w)
{
    if (r->pid != getpid()) { /* before any lock: see tc_remote_get */
        memset(w, 0, sizeof *w);
        return;
    }
    pthread_mutex_lock(&r->lock);
    *w = r->counts;
    memset(&r->counts, 0, sizeof r->counts);
    pthread_mutex_unlock(&r->lock);
}

/* Under lock: waits until the queue is empty and no upload is in flight,
 * or until `until`. 1 when done. */
static int wait_for_queue(tc_remote *r, double until)
{
    while (r->writer_running && (r->head || r->writer_busy) && tc_remote_now() < until)
        wait_until(r, until);
    return !r->head && !r->writer_busy;
}

int tc_remote_flush(tc_remote *r, double timeout_s, char *why, size_t whylen)
{
    if (r->pid != getpid())
        return 0; /* a forked child has no writer; its parent flushes */
    double began = tc_remote_now();
    double until = began + (timeout_s < 0 ? (double)r->spec.flush_timeout_ms / 1000 : timeout_s);
    pthread_mutex_lock(&r->lock);
    int done = wait_for_queue(r, until);
    int rc = 0;
    /* failures for the reason the process's one warning gave are not
     * reported twice */
    if (r->unflushed_failures && (r->unflushed_news || !r->warning_taken)) {
        snprintf(why, whylen, "%llu record(s) could not be written to remote %.190s: %s",
                 (unsigned long long)r->unflushed_failures, r->spec.description,
                 r->first_failure);
        r->warning_taken = 1;
        rc = -1;
    } else if (!done) {
        snprintf(why, whylen, "%zu record(s) are still being written to remote %.190s",
                 r->queued + (size_t)r->writer_busy, r->spec.description);
        rc = -1;
    }
    if (!done && !r->unfinished_flush)
        r->unfinished_flush = began;
    r->unflushed_failures = 0;
    r->unflushed_news = 0;
    pthread_mutex_unlock(&r->lock);
    return rc;
}

void tc_remote_close(tc_remote *r, tc_remote_writes *final)
{
    if (final)
        memset(final, 0, sizeof *final);
    if (!r)
        return;
    if (r->pid != getpid())
        return; /* a forked child: its locks may be held by threads it lacks; kept */
    if (r->registered)
        remove_live(r);
    if (r->nidle) { /* no lookup runs while the store closes: all are idle */
        pipe_guard g;
        guard_pipe(&g);
        for (int i = 0; i < r->nidle; i++)
            r->idle[i]->ops->free(r->idle[i]);
        unguard_pipe(&g);
        r->nidle = r->nreaders = 0;
    }
    double until = tc_remote_now() + (double)r->spec.flush_timeout_ms / 1000;
    pthread_mutex_lock(&r->lock);
    /* a flush that already waited for these records (the CLI flushes, then
     * closes) counts: from its start, the wait is flush-timeout in all */
    double since_flush = r->unfinished_flush + (double)r->spec.flush_timeout_ms / 1000;
    if (r->unfinished_flush > 0 && since_flush < until)
        until = since_flush;
    r->closing = 1;
    pthread_cond_broadcast(&r->changed);
    (void)wait_for_queue(r, until);
    drop_queue(r, "the flush timeout passed before it was written");
    pthread_t writer = r->writer;
    int started = r->writer_started;
    int orphan = r->writer_running && r->writer_busy;
    if (orphan) {
        count_failure(r, "the flush timeout passed while it was being written");
        r->orphaned = 1; /* from here on the writer owns r, and frees it */
    }
    if (final)
        *final = r->counts;
    pthread_mutex_unlock(&r->lock);
    if (orphan) {
        pthread_detach(writer);
        return;
    }
    if (started)
        pthread_join(writer, NULL);
    free_remote(r);
}

/* ---- remote check ---------------------------------------------------------------------- */

void tc_remote_check(tc_remote *r, tc_remote_check_result *out)
{
    memset(out, 0, sizeof *out);
    out->server_bytes = out->server_records = -1;
    out->read_only = r->spec.read_only;
    char why[400] = "";
    tc_transport *t = open_transport(&r->spec, why, sizeof why);
    if (!t) {
        snprintf(out->why, sizeof out->why, "%s", why);
        return;
    }
    pipe_guard g;
    guard_pipe(&g);
    double t0 = tc_remote_now();
    tc_remote_outcome o = t->ops->server_info(t, out->server, sizeof out->server,
                                              &out->server_bytes, &out->server_records, why,
                                              sizeof why);
    out->connect_s = tc_remote_now() - t0;
    tc_sb back = TC_SB_INIT;
    if (o != TC_REMOTE_OK) {
        snprintf(out->why, sizeof out->why, "cannot reach the server: %s", why);
        goto done;
    }
    out->reachable = 1;
    /* a test record under its own name, so that checks from many machines
     * at once never read each other's */
    char name[128], host[64] = "host";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    for (char *p = host; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            *p = '-';
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    snprintf(name, sizeof name, "check/c/%s-%ld-%ld%09ld", host, (long)getpid(),
             (long)wall.tv_sec, wall.tv_nsec);
    char payload[96];
    int plen = snprintf(payload, sizeof payload, "taskcache remote check %s", name + 8);
    if (r->spec.read_only) {
        /* read-only: a lookup of a name nobody wrote must come back empty */
        t0 = tc_remote_now();
        o = t->ops->get(t, name, sizeof payload, &back, why, sizeof why);
        out->read_s = tc_remote_now() - t0;
        if (o != TC_REMOTE_MISSING)
            snprintf(out->why, sizeof out->why, "a lookup failed: %s",
                     o == TC_REMOTE_OK ? "found a record nobody wrote" : why);
        else
            out->read_back = 1;
        goto done;
    }
    t0 = tc_remote_now();
    o = t->ops->put(t, name, payload, (size_t)plen, why, sizeof why);
    out->write_s = tc_remote_now() - t0;
    if (o != TC_REMOTE_OK) {
        snprintf(out->why, sizeof out->why, "cannot write: %s", why);
        goto done;
    }
    out->writable = 1;
    t0 = tc_remote_now();
    o = t->ops->get(t, name, sizeof payload, &back, why, sizeof why);
    out->read_s = tc_remote_now() - t0;
    if (o == TC_REMOTE_OK && back.len == (size_t)plen && !memcmp(back.data, payload, back.len))
        out->read_back = 1;
    else
        snprintf(out->why, sizeof out->why, "the record written could not be read back: %s",
                 o == TC_REMOTE_OK ? "other bytes came back" : o == TC_REMOTE_MISSING
                                                                   ? "the server has none"
                                                                   : why);
    (void)t->ops->remove(t, name, why, sizeof why); /* a server without DELETE keeps it */
done:
    tc_sb_free(&back);
    t->ops->free(t);
    unguard_pipe(&g);
}
