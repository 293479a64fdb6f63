/* handles: what stands behind the public handles of taskcache.h (options,
 * the cache, results and their entries), for the files of the library that
 * fill or read them. Internal.
 *
 * How internal functions report, everywhere in src/:
 * - what a caller of the public API must be told returns a tc_status and
 *   puts the words in the result's diagnostics (pipeline: tc_session_fail)
 *   or in a tc_error (tc_set_error);
 * - any other operation returns int: 0 when it did its work, -1 when not,
 *   with errno set where the cause is the system's (out of memory: ENOMEM);
 * - a lookup returns 1 found, 0 not found; a cache that cannot be read is
 *   "not found", never an error (a cache problem never fails a build);
 * - a few calls with more outcomes return an enum that names them
 *   (tc_lease) or a count that is -1 on failure (tc_store_put).
 * Messages go into tc_sb buffers or tc_error; the library never prints. */
#ifndef TC_API_HANDLES_H
#define TC_API_HANDLES_H

#include <signal.h>

#include "ptx/module.h"
#include "store/store.h"
#include "taskcache.h"
#include "util/strbuf.h"

struct tc_options {
    char arch[32];
    char **copts;          /* compiler options, in the order given */
    size_t ncopts;
    int jobs;
    char *ptxas;
    int module_tier, unit_tier, split;
    unsigned unit_cost;
    tc_compiler compiler;
    tc_unit_code unit_code;
    char *bad_compiler_env;  /* $TASKCACHE_COMPILER when it names no compiler, until
                                tc_options_set_compiler (tc_options_check) */
    char *bad_unit_code_env; /* the same for $TASKCACHE_UNIT_CODE */
    char *trace;             /* tc_options_set_trace, else $TASKCACHE_TRACE, or NULL */
    tc_output output;
    int exact_whole;       /* tc_options_set_exact_whole */
    int inprocess_threads; /* tc_options_set_inprocess_threads */
    int inprocess_crashed; /* tc_options_set_inprocess_crashed */
    const volatile sig_atomic_t *cancel;   /* tc_options_set_cancel */
    tc_progress_fn progress;               /* tc_options_set_progress */
    void *progress_user;
    int driver_load;       /* not public: the build stands in for a driver load (`taskcache
                              run`) and counts as one in the statistics */
};

/* The options' cancel flag is raised. */
static inline int tc_options_cancelled(const tc_options *o)
{
    return o->cancel && *o->cancel;
}

/* Whether the compiler options hold one of names (a NULL-terminated
 * list): an option equal to a name, or starting with it where the name
 * ends in '*' (-sanitize* is -sanitize=memcheck too). */
int tc_options_have(const tc_options *o, const char *const *names);

struct tc_cache {
    char *dir;
    tc_store *store;
    int refs;              /* the owner's handle + one per call in flight (atomic) */
};

/* Every call that uses a cache beyond its own return holds it, so that
 * tc_cache_close from another thread, or from a codegen callback, frees it
 * only after the last such call returns. NULL is allowed. */
void tc_cache_hold(tc_cache *c);
void tc_cache_release(tc_cache *c);
/* Adds n to one of the cache's counters (TC_C_* of store/stats.h) outside
 * any build: what `taskcache run` passed on to the driver. */
void tc_cache_count(tc_cache *c, int counter, uint64_t n);

struct tc_result {
    tc_status status;
    tc_sb diag;
    char *image;
    size_t image_len;
    char *whole_reason;
    char *compiler;        /* tc_result_compiler, or NULL */
    char *slowest;         /* tc_result_slowest, or NULL */
    tc_report report;
    tc_entry_info *entries;
    size_t nentries;
    tc_task_info *tasks;   /* tc_build_tasks / tc_lookup_group; strings owned */
    size_t ntasks;
    char arch[32];         /* the target the build was for ("sm_90"), "" when unknown */
};

/* result.c */
tc_result *tc_result_new(void);
/* Drops the image, entries, whole reason, diagnostics and report (what a
 * module record fills), keeping the result for another attempt. */
void tc_result_clear(tc_result *r);

/* status.c: fill *err (which may be NULL) and return the code */
tc_status tc_set_error(tc_error *err, tc_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void tc_clear_error(tc_error *err);

/* entry.c: the per-kernel metadata of results and records. An entry owns
 * its name, parameter array and key strings. */
/* Fills e from a parsed entry definition (name, parameters, directives);
 * resources are set to unknown (-1), its -v lines to NULL, and its rank to
 * ptxas's order where no function's address is taken: the reverse of the
 * order of definition. 0, or -1 out of memory. */
int tc_entry_from_stmt(const tc_ptx_module *m, const tc_ptx_stmt *st, tc_entry_info *e);
void tc_entry_clear(tc_entry_info *e);
/* Clears entries[0..n) and frees the array. NULL is allowed. */
void tc_entries_free(tc_entry_info *entries, size_t n);
/* Serializes one entry (keys included; its -v lines when known) as a
 * record field payload. */
void tc_entry_encode(const tc_entry_info *e, tc_sb *out);
/* Decodes what tc_entry_encode wrote, with or without -v lines (without:
 * verbose NULL). 0, or -1 when malformed. */
int tc_entry_decode(const void *p, size_t n, tc_entry_info *e);
/* Sets a key string field (unit_key / slice_key) to hex, owning it. */
int tc_entry_set_key(const char **field, const char *hex);
/* Fills the entries' resources and -v lines (verbose, verbose_head) from a
 * compiler's -v log; those the log does not name keep theirs. ranked: the
 * log is the whole module's, so its order of kernels is ptxas's
 * (verbose_rank); otherwise (a unit's) the ranks stay as
 * tc_entry_from_stmt made them. 0, or -1 out of memory. */
int tc_entries_take_report(tc_entry_info *entries, size_t n, const char *log, size_t len,
                           int ranked);
/* tc_entries_take_report of a unit's log. */
int tc_entries_take_resources(tc_entry_info *entries, size_t n, const char *log, size_t len);

#endif
