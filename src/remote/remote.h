/* remote: remote storage servers behind the local store, for a team, a CI
 * fleet or a cluster sharing one cache (README.md, "A cache for a team").
 *
 * This stage moves opaque bytes under names; it knows nothing of records.
 * The store (src/store/store.c) decides what to look up and verifies every
 * record it is handed with the one record reader, exactly as a local file:
 * a server is trusted with availability, never with correctness.
 *
 * A tc_remote holds two connections, made on first use and never before:
 * one for lookups, taken by the threads that miss locally one at a time,
 * and one for uploads, owned by a writer thread that drains a bounded
 * queue. A build never waits for an upload; the queue is flushed, up to a
 * deadline, by tc_remote_flush, tc_remote_close and an atexit handler. A
 * server that cannot be reached, or that stalls past a timeout, is not
 * asked again by this process: one slow connect, not one per record.
 *
 * Names are "<target>/<kind letter>/<64 hex>" (the local layout's); each
 * transport maps them onto the layout its servers serve. */
#ifndef TC_REMOTE_REMOTE_H
#define TC_REMOTE_REMOTE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "util/strbuf.h"

typedef enum tc_remote_kind { TC_REMOTE_HTTP = 1, TC_REMOTE_REDIS = 2 } tc_remote_kind;

/* Where an HTTP server keeps a record. subdirs: <url>/v1/<target>/<kind>/<2
 * hex>/<62 hex>, the local layout (nginx or Apache WebDAV with
 * create_full_put_path, any server that stores what is PUT). bazel:
 * <url>/ac/<64 hex> (bazel-remote and other Bazel HTTP caches; the 64 hex
 * are a SHA-256 of the name, since a Bazel cache has one namespace). */
typedef enum tc_remote_layout { TC_LAYOUT_SUBDIRS = 0, TC_LAYOUT_BAZEL = 1 } tc_remote_layout;

#define TC_REMOTE_MAX_HOSTS 16
/* Lookups at once, each on its own connection (tc_remote_get). */
#define TC_REMOTE_READERS 8
#define TC_REMOTE_HOST_MAX 256

typedef struct tc_remote_host {
    char name[TC_REMOTE_HOST_MAX]; /* a name or an address; IPv6 without brackets */
    int port;
} tc_remote_host;

/* A parsed remote spec (store/config.h, tc_config_parse_remote). */
typedef struct tc_remote_spec {
    tc_remote_kind kind;
    int tls;                          /* https://, rediss:// */
    char base_url[2048];              /* http: scheme://host:port/path, no credentials, no
                                         trailing '/' */
    tc_remote_host hosts[TC_REMOTE_MAX_HOSTS]; /* redis: the nodes to start from */
    int nhosts;
    int db;                           /* redis: the database of redis://host/N */
    char user[256], password[256];    /* from the URL, percent-decoded */
    char bearer_file[1024];           /* http: a file holding a bearer token */
    char password_file[1024];         /* a file whose first line is the password (read
                                         by the store: it replaces the URL's) */
    char aws_sigv4[128];              /* http: sign requests with AWS SigV4 (S3 and its
                                         kin: "aws:amz:REGION:s3"), key:secret from the URL */
    char ca[1024];                    /* TLS: a CA bundle file or a directory of CAs */
    int read_only;                    /* look records up, never upload */
    long connect_timeout_ms, timeout_ms, flush_timeout_ms;
    int retries;                      /* attempts after the first, for transient failures */
    long long ttl_s;                  /* redis: expiry, refreshed on every hit; 0 none */
    uint64_t max_record;              /* records larger than this are not uploaded */
    tc_remote_layout layout;
    char description[4400];           /* the URL without credentials, and "read-only":
                                         room for every host a spec may name */
} tc_remote_spec;

/* What an operation on a server came to. */
typedef enum tc_remote_outcome {
    TC_REMOTE_OK = 0,
    TC_REMOTE_MISSING,   /* the server has no such name */
    TC_REMOTE_FAILED,    /* the server answered with an error another attempt may
                            mend (5xx, 408, 429) or a transfer broke off */
    TC_REMOTE_REFUSED,   /* the server refused the request for good (4xx: credentials,
                            method, size): asking again gets the same answer */
    TC_REMOTE_DOWN,      /* no usable answer: cannot connect, timed out, connection lost */
    TC_REMOTE_OFF,       /* not asked: this process found the server down (or failing
                            every time), or inherited the remote across fork() */
    TC_REMOTE_CANCELLED  /* given up because the caller's cancel flag was raised (a
                            Ctrl-C): no finding about the server */
} tc_remote_outcome;

typedef struct tc_remote tc_remote;

/* A remote for spec (copied). No I/O: nothing connects until a lookup or
 * an upload needs it. NULL only when out of memory. */
tc_remote *tc_remote_new(const tc_remote_spec *spec);

/* Waits for the upload queue, drops what the deadline leaves, and frees
 * the remote; its last write counts go to *final (may be NULL). An upload
 * still in flight at the deadline is left to finish on its own thread,
 * which frees what it uses. */
typedef struct tc_remote_writes {
    uint64_t written, bytes;        /* records the server took */
    uint64_t failed;                /* refused, failed, too large, dropped at a full queue or
                                       at the deadline */
} tc_remote_writes;
void tc_remote_close(tc_remote *r, tc_remote_writes *final);

const tc_remote_spec *tc_remote_spec_of(const tc_remote *r);

/* Looks name up, reading at most max bytes. Returns the outcome, with the
 * bytes in *out when TC_REMOTE_OK; *seconds (may be NULL) receives the
 * time the lookup took. A remote that was found down, or that a forked
 * child inherited, answers TC_REMOTE_OFF at once without I/O. Once *cancel
 * (may be NULL) is raised, the lookup ends within about a second, the
 * server's timeout notwithstanding, with TC_REMOTE_CANCELLED. Thread-safe:
 * up to TC_REMOTE_READERS lookups run at once, each on a connection of its
 * own (kept for the next). */
tc_remote_outcome tc_remote_get(tc_remote *r, const char *name, uint64_t max, tc_sb *out,
                                const volatile sig_atomic_t *cancel, double *seconds);

/* Queues data (len bytes, malloc'd; the remote takes it, whatever the
 * result) for upload under name. 0 queued; -1 not (read-only, down, too
 * large, queue full: the last three are counted as failed writes).
 * Never blocks on the network. */
int tc_remote_put(tc_remote *r, const char *name, char *data, size_t len);

/* Waits until every queued upload is done, at most timeout_s seconds (<0:
 * the spec's flush timeout). Returns 0 when none failed since the last
 * call, -1 otherwise with why filled (how many, and the first reason);
 * what the timeout leaves stays queued. */
int tc_remote_flush(tc_remote *r, double timeout_s, char *why, size_t whylen);

/* Moves the write counts since the last call into *w. */
void tc_remote_take_writes(tc_remote *r, tc_remote_writes *w);

/* The first problem this process met with the server, once: 1 with the
 * words in buf the first time it is asked after the problem, else 0. So
 * a process warns once, not once per record. */
int tc_remote_take_warning(tc_remote *r, char *buf, size_t n);

/* `taskcache remote check`: reach the server, write a test record, read it
 * back, remove it, and ask what the server holds. */
typedef struct tc_remote_check_result {
    int reachable, writable, read_back, read_only;
    double connect_s, write_s, read_s;
    int64_t server_bytes, server_records;   /* -1: unknown */
    char server[256];                       /* what answered */
    char why[512];                          /* the first step that failed, and why */
} tc_remote_check_result;
void tc_remote_check(tc_remote *r, tc_remote_check_result *out);

/* ---- transports (http.c, redis.c) --------------------------------------------------- */

/* One connection to a server (or, for a Redis Cluster, to its nodes), used
 * by one thread at a time. why receives the words of a failure. */
typedef struct tc_transport tc_transport;
typedef struct tc_transport_ops {
    tc_remote_outcome (*get)(tc_transport *t, const char *name, uint64_t max, tc_sb *out,
                             char *why, size_t n);
    tc_remote_outcome (*put)(tc_transport *t, const char *name, const void *data, size_t len,
                             char *why, size_t n);
    tc_remote_outcome (*remove)(tc_transport *t, const char *name, char *why, size_t n);
    /* what the server is, and how much it holds (-1 unknown) */
    tc_remote_outcome (*server_info)(tc_transport *t, char *server, size_t server_len,
                                     int64_t *bytes, int64_t *records, char *why, size_t n);
    void (*free)(tc_transport *t);
} tc_transport_ops;
struct tc_transport {
    const tc_transport_ops *ops;
    /* Set by the remote around a lookup (NULL otherwise): once raised, the
     * transport gives up what it waits for and answers TC_REMOTE_CANCELLED. */
    const volatile sig_atomic_t *cancel;
};

/* Whether t's caller has cancelled what t is doing. */
static inline int tc_transport_cancelled(const tc_transport *t)
{
    return t->cancel && *t->cancel;
}

/* Seconds on the monotonic clock: the transports' deadlines. */
double tc_remote_now(void);
/* How long a request may take, in seconds: the spec's timeout plus a
 * second per 256 KiB it moved so far, so that a large record on a slow
 * link is no stall, while a server that sends a byte now and then still
 * runs out of time. */
static inline double tc_remote_allowance(double timeout_s, uint64_t moved)
{
    return timeout_s + (double)(moved >> 18);
}

/* Transports for spec; NULL with why filled when one cannot be made (not
 * for a server that does not answer: that is found on first use). */
tc_transport *tc_http_open(const tc_remote_spec *spec, char *why, size_t n);
tc_transport *tc_redis_open(const tc_remote_spec *spec, char *why, size_t n);

/* For tests: makes tc_remote_new's transports with open(spec, ctx) instead
 * of the real ones (NULL: the real ones again). */
void tc_remote_set_transport_factory(tc_transport *(*open)(const tc_remote_spec *spec,
                                                           void *ctx, char *why, size_t n),
                                     void *ctx);

#endif
