/* remote: remote storage servers behind the local store, for a team, a CI
 * fleet or a cluster sharing one cache (docs/remote.md, "Remote storage").
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
 * transport (transport.h: http.c, redis.c) maps them onto the layout its
 * servers serve. remote.c opens the transports a spec asks for; they
 * call nothing of it. */
#ifndef TC_REMOTE_REMOTE_H
#define TC_REMOTE_REMOTE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "remote/transport.h"
#include "util/strbuf.h"

/* Lookups at once, each on its own connection (tc_remote_get). */
#define TC_REMOTE_READERS 8

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

/* For tests: makes tc_remote_new's transports with open(spec, ctx) instead
 * of the real ones (NULL: the real ones again). */
void tc_remote_set_transport_factory(tc_transport *(*open)(const tc_remote_spec *spec,
                                                           void *ctx, char *why, size_t n),
                                     void *ctx);

#endif
