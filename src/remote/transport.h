/* transport: what the remote (remote.c) and the transports that speak to
 * servers (http.c, redis.c) share: a parsed remote spec, what an
 * operation came to, the interface every transport implements, and the
 * clock of their deadlines. Below both: remote.c opens a transport through
 * tc_http_open or tc_redis_open and calls it through its ops; the
 * transports call nothing of remote.c. */
#ifndef TC_REMOTE_TRANSPORT_H
#define TC_REMOTE_TRANSPORT_H

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

/* Seconds on the monotonic clock: the deadlines of the transports and of
 * the remote's queue. */
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

#endif
