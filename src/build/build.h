/* build.h: state shared by the stages of one build (build.c drives,
 * split.c does the split path). Internal. */
#ifndef TC_BUILD_BUILD_H
#define TC_BUILD_BUILD_H

#include "../key/key.h"
#include "../compile/ptxas.h"
#include "../key/toolchain.h"
#include "../link/link.h"
#include "../ptx/slice.h"
#include "../store/stats.h"
#include "internal.h"

typedef struct tc_unit {
    uint32_t first, count;  /* entries [first, first+count) in name order */
    int is_md;              /* the module-data object */
    tc_out_kind kind;       /* how it compiles: TC_OUT_EWP or TC_OUT_OBJECT */
    uint64_t cost;          /* text bytes: schedules the largest first */
    tc_digest key;
    char hex[TC_DIGEST_HEX_LEN + 1];
    tc_text map;            /* line map back to the input (text freed) */
    char *path;             /* scratch .ptx of a miss */
    int hit;
    tc_sb object;           /* relocatable object */
    tc_sb log;              /* ptxas output (compiled) or stored (hit) */
    tc_entry_info *meta;    /* hit: the entries stored in the record */
    size_t nmeta;
    int exit_code;
    int spawn_failed;
    int compiled;           /* compiled by this build */
    int waited;             /* another process compiled it while we waited */
    double deferred_since;  /* when its lease was first found held */
} tc_unit;

typedef struct tc_build_ctx {
    tc_cache *cache;
    const tc_options *o;
    const char *src;
    size_t len;             /* of the PTX text: up to the first NUL */
    size_t input_len;       /* of the input, which the module key covers */
    const char *name;
    int explain;
    int lookup;             /* tc_lookup_group: counts no build */
    tc_result *r;
    tc_store *store;        /* NULL: no cache */
    char ptxas[TC_PATH_MAX];   /* "" when not found (in-process builds) */
    int in_process;            /* compile with nvPTXCompiler */
    char compiler_id[TC_DIGEST_HEX_LEN + 1];
    char compiler_version[160];
    tc_linker linker;
    char linker_error[512];
    tc_unit_code unit_code;    /* the options' unit code, or relocatable when whole-program
                                  units cannot be linked here (no libnvJitLink) */
    tc_keyctx kc;
    char plan[32];
    tc_digest module_key;
    tc_counters delta;      /* statistics of this build */
    pthread_mutex_t delta_lock;
    char *scratch;
    tc_ptx_module m;
    int parsed;
    tc_slicer *slicer;
    tc_unit *units;
    size_t nunits;
    double t0;
} tc_build_ctx;

/* Starts a build: a fresh context with an empty result. 0 or -1 (memory). */
int tc_build_begin(tc_build_ctx *b, tc_cache *cache, const tc_options *opts, const char *name,
                   int explain);
/* Finds the toolchain and fills the key context. */
tc_status tc_build_prepare(tc_build_ctx *b);
/* Ends a build with status st: drops the image of a failed build, adds the
 * cache warning, flushes statistics, frees the context; returns the result. */
tc_result *tc_build_finish(tc_build_ctx *b, tc_status st);
tc_status tc_build_split(tc_build_ctx *b);
/* Links objs in order into the result's image; failures become
 * diagnostics. */
tc_status tc_build_link(tc_build_ctx *b, const tc_blob *objs, size_t n);
/* Compiles text (written at ptx_path for ptxas) with the chosen backend;
 * fills output/log/exit code. Returns 0, or -1 (errno) when the compiler
 * could not run. */
int tc_build_compile(tc_build_ctx *b, tc_out_kind kind, const char *text, size_t len,
                     const char *ptx_path, tc_sb *output, tc_sb *log, int *exit_code);
void tc_build_units_free(tc_build_ctx *b);
void tc_build_ctx_free(tc_build_ctx *b);
tc_status tc_build_fail(tc_build_ctx *b, tc_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void tc_build_store_module(tc_build_ctx *b, const tc_sb *warnings);
void tc_build_count_put(tc_build_ctx *b, long long written);
/* Reads the record kind/key and hands its payload to decode(ctx, ...). 1
 * hit, 0 miss. A record that fails its checksum or does not decode counts
 * as bad when count_bad (a build counts only its first look at a record);
 * after a failed decode, undo(ctx) clears what decode set. Compile workers
 * call it too. */
typedef int (*tc_record_decode_fn)(void *ctx, const char *payload, size_t len);
int tc_build_read_record(tc_build_ctx *b, uint32_t kind, const tc_digest *key, int count_bad,
                         tc_record_decode_fn decode, void (*undo)(void *ctx), void *ctx);
/* Fills the entries' resource reports from a ptxas -v log. 0 or -1 (out of
 * memory). */
int tc_build_resources_from_log(tc_entry_info *entries, size_t n, const char *log, size_t len);
double tc_build_now(void);

#endif
