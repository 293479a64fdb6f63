/* ptxas: the compile backend that runs NVIDIA's ptxas as a process, plus
 * the readers of what it prints: per-function resource usage (-v) and
 * diagnostics, mapped back to the lines of the original input. */
#ifndef TC_COMPILE_PTXAS_H
#define TC_COMPILE_PTXAS_H

#include <stddef.h>
#include <stdint.h>

#include "ptx/slice.h"
#include "util/strbuf.h"

/* What a compile produces. */
typedef enum tc_out_kind {
    TC_OUT_CUBIN = 0,   /* an executable cubin (whole module) */
    TC_OUT_OBJECT = 1,  /* -c: a relocatable object */
    TC_OUT_EWP = 2      /* -ewp: whole-program code generation (calls between
                           the unit's own functions are optimized as in a
                           whole-module build), still linkable: its
                           references to the module data's variables are
                           resolved by the linker */
} tc_out_kind;

/* The ptxas option of an output kind ("" for a cubin). */
const char *tc_out_option(tc_out_kind kind);

typedef struct tc_ptxas_job {
    /* in */
    const char *ptxas;        /* path of the ptxas binary */
    const char *arch;         /* "sm_90" */
    char *const *opts;        /* extra compiler options */
    size_t nopts;
    tc_out_kind kind;
    const char *ptx_path;     /* input file, already written */
    const char *out_path;     /* object or cubin to produce */
    const char *log_path;     /* where ptxas's output goes */
    /* out */
    int exit_code;
    tc_sb output;             /* the object or cubin */
    tc_sb log;                /* everything ptxas printed */
} tc_ptxas_job;

/* Runs ptxas (-v is always passed, for the resource report). Returns 0 when
 * ptxas ran (check exit_code), -1 when it could not be started. */
int tc_ptxas_run(tc_ptxas_job *job);

/* Resource usage of one function, as ptxas -v reports it. */
typedef struct tc_ptxas_res {
    int32_t registers, shared_bytes, stack_bytes, spill_store_bytes, spill_load_bytes;
} tc_ptxas_res;

/* Calls fn for every function whose resources appear in a ptxas -v log. */
void tc_ptxas_parse_resources(const char *log, size_t len,
                              void (*fn)(void *ctx, const char *name, size_t nlen,
                                         const tc_ptxas_res *res),
                              void *ctx);

/* Turns ptxas's error and warning lines into "input:LINE: error: msg"
 * lines, mapping line numbers through `map` (NULL: the compiled text is the
 * input itself). Of the informational lines only ptxas's numbered advice
 * is kept ("input: info: (C7511) ..."); -v's report is not. Returns the
 * number of errors found. */
size_t tc_ptxas_diagnostics(const char *log, size_t len, const tc_text *map,
                            const char *input_name, tc_sb *out);

#endif
