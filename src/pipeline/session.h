/* session: the state of one public call that builds or looks up (tc_build,
 * tc_explain, tc_build_tasks, tc_lookup_group) and the services every
 * pipeline shares: the toolchain and the key context, the call's counters,
 * its scratch directory, compiling, linking, and reading and writing
 * records. Internal.
 *
 * A call begins a session, prepares its toolchain, runs its pipeline
 * (module.c + split.c, or tasks.c, or group.c) and finishes it, which
 * hands back the result. */
#ifndef TC_PIPELINE_SESSION_H
#define TC_PIPELINE_SESSION_H

#include <pthread.h>

#include "api/handles.h"
#include "compile/ptxas.h"
#include "key/key.h"
#include "link/link.h"
#include "store/stats.h"
#include "pipeline/trace.h"
#include "toolchain/toolchain.h"

/* What the session is for: it decides what the statistics count. */
typedef enum tc_call {
    TC_CALL_BUILD,    /* tc_build, tc_build_tasks: counted as a build */
    TC_CALL_EXPLAIN,  /* tc_explain: compiles and counts nothing */
    TC_CALL_LOOKUP    /* tc_lookup_group: counts its hits, not as a build */
} tc_call;

typedef struct tc_session {
    tc_call call;
    tc_cache *cache;           /* NULL: no cache */
    tc_store *store;           /* the cache's store, or NULL */
    const tc_options *o;
    const char *name;          /* of the input, for messages */
    tc_result *r;
    double t0;
    /* the toolchain (tc_session_prepare) */
    char ptxas[TC_PATH_MAX];   /* "" when not found (in-process builds) */
    int in_process;            /* compile with nvPTXCompiler */
    char compiler_id[TC_DIGEST_HEX_LEN + 1];
    char compiler_version[160];
    char compiler_desc[TC_PATH_MAX + 256]; /* what compiles, in words (tc_result_compiler) */
    tc_linker linker;          /* kind 0 when none was found: linker_error says why */
    char linker_error[512];
    tc_unit_code unit_code;    /* whole-program or relocatable: the options' choice, where
                                  whole-program units can be linked (libnvJitLink) */
    const char *ewp_threads;   /* the compiler option that compiles a whole-program unit's
                                  functions on threads of their own, or NULL (see
                                  choose_options in session.c) */
    const char *whole_threads; /* the same for a module compiled whole, or NULL (a text
                                  may get none: tc_session_threads) */
    const char *ewp_quiet;     /* the compiler option that silences ptxas -ewp's stack
                                  size warning, or NULL (see choose_options) */
    tc_keyctx kc;
    /* what the call did, added to the cache's statistics when it finishes */
    tc_counters delta;
    pthread_mutex_t delta_lock;
    unsigned progress_done, progress_total; /* tc_session_progress_*, under progress_lock,
                                               which serializes the host's calls */
    pthread_mutex_t progress_lock;
    tc_trace trace;            /* where the call's time went (trace.h) */
    char *scratch;             /* private temporary directory, made on first use */
    int scratch_lock;          /* held while it exists (util/scratch.h) */
} tc_session;

/* One compile unit, whichever pipeline made its text (a group of a split
 * module's kernels, or a host's task): its key, and its object with the
 * metadata that go with it, from its record (payload.h) or from the
 * compiler. */
typedef struct tc_unit {
    tc_digest key;
    char hex[TC_DIGEST_HEX_LEN + 1];
    int hit;                   /* its record came from the cache */
    int compiled;              /* compiled by this call */
    int waited;                /* another process compiled it while this one waited */
    int exit_code;             /* of the compiler; -1 when it did not run */
    int spawn_failed;          /* errno, when the compiler could not run */
    int write_failed;          /* errno, when its scratch file could not be written */
    tc_sb object;              /* relocatable object */
    tc_sb log;                 /* the compiler's output, or the log its record kept */
    tc_entry_info *entries;    /* its kernels, in name order */
    size_t nentries;
    tc_sb meta;                /* the host's metadata (tasks) */
    int have_meta;
} tc_unit;

/* The i-th of a call's units (split.c's, tasks.c's): how the session's
 * services that take many units reach them. */
typedef tc_unit *(*tc_unit_at_fn)(void *ctx, size_t i);

/* Drops what a record or a compile put into u, keeping its key. */
void tc_unit_clear(tc_unit *u);
/* Frees all of u's memory. */
void tc_unit_free(tc_unit *u);

/* Starts a session: a fresh result, the cache held until the end. 0, or
 * -1 out of memory. */
int tc_session_begin(tc_session *s, tc_call call, tc_cache *cache, const tc_options *opts,
                     const char *name);
/* Tells the options' progress function (tc_options_set_progress) that
 * total compiles start; then, from any thread, that one more is done. */
void tc_session_progress_begin(tc_session *s, size_t total);
void tc_session_progress_step(tc_session *s);

/* Finds the toolchain (the linker only if the call links: links) and
 * fills the key context. */
tc_status tc_session_prepare(tc_session *s, int links);
/* Compiles with ptxas processes from now on, and keys as ptxas (a session
 * that found ptxas: s->ptxas not ""). */
tc_status tc_session_use_ptxas(tc_session *s);
/* Ends the session with status st: drops the image of a failed call, adds
 * the cache's warning, records the statistics, keeps the cache within its
 * limit, frees the session; returns the result. */
tc_result *tc_session_finish(tc_session *s, tc_status st);

/* Writes "NAME: error: ..." into the diagnostics and returns code. */
tc_status tc_session_fail(tc_session *s, tc_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Makes the scratch directory when the build's tools need files (ptxas
 * processes, nvlink), not when they work in memory (the in-process
 * compiler, nvJitLink): 0 when it was needed and cannot be made (with a
 * diagnostic), else 1. */
int tc_session_files_ready(tc_session *s);
/* Adds n to one of the call's counters; compile workers call it too. */
void tc_session_count(tc_session *s, int counter, uint64_t n);

/* The compiler option that gives a compile of this kind and text threads
 * of the compiler's own, or NULL (see choose_options in session.c). */
const char *tc_session_threads(const tc_session *s, tc_out_kind kind, const char *text,
                               size_t len);
/* The compile options of a unit of that kind and text beyond the
 * session's own, as they go into the unit's key (tc_key_unit's mode). */
const char *tc_session_unit_mode(const tc_session *s, tc_out_kind kind, const char *text,
                                 size_t len, char *buf, size_t n);

/* Compiles text (written at ptx_path first for ptxas) with the chosen
 * backend; fills output, log (both empty on entry) and exit code. 0, or
 * -1 (errno) when the compiler could not run. label names what it
 * compiles in the build's trace (its kernels, a task). */
int tc_session_compile(tc_session *s, tc_out_kind kind, const char *label, const char *text,
                       size_t len, const char *ptx_path, tc_sb *output, tc_sb *log,
                       int *exit_code);

/* Records an event of the build (trace.h): what ("codegen", "link"), its
 * name, when it started (tc_now()); it ends now. */
void tc_session_event(tc_session *s, const char *what, const char *name, double t0);
/* Links the objects of n units, in order, into the result's image;
 * unit(ctx, i) gives the i-th. Failures become diagnostics. */
tc_status tc_session_link(tc_session *s, tc_unit_at_fn unit, void *ctx, size_t n);
/* The same in steps: a link the caller feeds with tc_link_add (link.h),
 * then finishes here, which puts the image in the result (and frees lj).
 * start: NULL out of memory. */
tc_link_job *tc_session_link_start(tc_session *s);
tc_status tc_session_link_finish(tc_session *s, tc_link_job *lj);

/* The one record reader: reads the record of kind/key and hands its
 * payload to decode(ctx, ...). 1 hit, 0 miss. first_look: the call's
 * first look at the record, which counts a record that fails its
 * checksum or does not decode as bad, and asks the remote tier on a local
 * miss; a look again (after taking a compile lease, or while another
 * process of this machine compiles it) is local: that process publishes
 * here, and the remote was asked already. After a failed decode,
 * undo(ctx) clears what decode set. The payload (malloc'd, len bytes and
 * a NUL) is decode's to keep: it sets *payload to NULL when it does (an
 * image moved to the front of it saves a copy of megabytes); the reader
 * frees what it leaves. */
typedef int (*tc_record_decode_fn)(void *ctx, char **payload, size_t len);
int tc_session_read_record(tc_session *s, uint32_t kind, const tc_digest *key, int first_look,
                           tc_record_decode_fn decode, void (*undo)(void *ctx), void *ctx);
/* Looks the records of kind/unit(ctx, i)->key that this machine lacks up in the
 * remote tier together, several at a time (tc_store_prefetch), so that the
 * reads that follow find them here instead of asking one after another.
 * NULL without a store or remote, or with nothing to ask; else state[i]
 * (store.h's TC_PREFETCH_*) for the caller to free: TC_PREFETCH_ASKED
 * means the remote has no such record, so a read need not ask again. */
uint8_t *tc_session_prefetch(tc_session *s, uint32_t kind, tc_unit_at_fn unit, void *ctx,
                             size_t n);
/* Stores a record and counts it, written or not. */
void tc_session_write_record(tc_session *s, uint32_t kind, const tc_digest *key,
                             const tc_sb *payload);

/* Seconds on a monotonic clock. */
double tc_now(void);

#endif
