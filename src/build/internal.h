/* internal: the definitions behind the public handles of taskcache.h,
 * shared by the files of the build stage. */
#ifndef TC_BUILD_INTERNAL_H
#define TC_BUILD_INTERNAL_H

#include <pthread.h>
#include <signal.h>

#include "../../include/taskcache.h"
#include "../ptx/module.h"
#include "../store/store.h"
#include "../util/strbuf.h"

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
    const volatile sig_atomic_t *cancel;   /* tc_options_set_cancel */
};

/* The options' cancel flag is raised. */
static inline int tc_options_cancelled(const tc_options *o)
{
    return o->cancel && *o->cancel;
}

struct tc_cache {
    char *dir;
    char *memo_dir;        /* <dir>/toolchain */
    tc_store *store;
    int refs;              /* the owner's handle + one per call in flight (atomic) */
};

/* Every call that uses a cache beyond its own return holds it, so that
 * tc_cache_close from another thread, or from a codegen callback, frees it
 * only after the last such call returns. */
void tc_cache_hold(tc_cache *c);
void tc_cache_release(tc_cache *c);

struct tc_result {
    tc_status status;
    tc_sb diag;
    char *image;
    size_t image_len;
    char *whole_reason;
    tc_report report;
    tc_entry_info *entries;
    size_t nentries;
    tc_task_info *tasks;   /* tc_build_tasks / tc_lookup_group; strings owned */
    size_t ntasks;
};

/* entries.c: per-entry metadata */
/* Fills e from a parsed entry definition (name, parameters, directives);
 * resources are set to unknown (-1). Returns 0 or -1 out of memory. */
int tc_entry_from_stmt(const tc_ptx_module *m, const tc_ptx_stmt *st, tc_entry_info *e);
void tc_entry_clear(tc_entry_info *e);
/* Serializes one entry (keys included) as a record field payload. */
void tc_entry_encode(const tc_entry_info *e, tc_sb *out);
/* Decodes what tc_entry_encode wrote. 0, or -1 when malformed. */
int tc_entry_decode(const void *p, size_t n, tc_entry_info *e);
/* Sets a key string field (unit_key / slice_key) to hex, owning it. */
int tc_entry_set_key(const char **field, const char *hex);

/* error helpers: fill *err (which may be NULL) and return the code */
tc_status tc_set_error(tc_error *err, tc_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void tc_clear_error(tc_error *err);

/* result helpers */
tc_result *tc_result_new(void);
void tc_diag(tc_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
