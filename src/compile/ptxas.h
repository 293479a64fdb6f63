/* ptxas: the compile backend that runs NVIDIA's ptxas as a process, plus
 * the readers of what it prints: the -v report per kernel and diagnostics,
 * mapped back to the lines of the original input. */
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

/* One kernel of a -v log: its figures and its lines, in ptxas's form
 * whichever compiler wrote them (each line ends in a newline). */
typedef struct tc_ptxas_kernel {
    char *name;
    tc_ptxas_res res;   /* its own resources (-1 unknown; smem 0 when not said) */
    tc_sb head;         /* lines printed before compiling that concern it: the
                           register limit ptxas overrides for it */
    tc_sb body;         /* from "Compiling entry function" to the "Function
                           properties" of the functions it calls; the first
                           kernel's also has what precedes it in the report
                           (-c: the functions compiled on their own). Neither
                           has the module's "N bytes gmem" line, diagnostics or
                           numbered advice. */
} tc_ptxas_kernel;

typedef struct tc_ptxas_report {
    tc_ptxas_kernel *kernels;   /* in the order of the log */
    size_t n, cap;
} tc_ptxas_report;

/* The integer just before `needle` in the n bytes of a -v line ("24
 * registers" -> 24), or -1. */
int32_t tc_ptxas_number_before(const char *line, size_t n, const char *needle);

/* Reads the kernels of a -v log. 0 (free *out with tc_ptxas_report_free),
 * or -1 out of memory (nothing to free). */
int tc_ptxas_parse_report(const char *log, size_t len, tc_ptxas_report *out);
void tc_ptxas_report_free(tc_ptxas_report *r);

/* Turns ptxas's error and warning lines into "input:LINE: error: msg"
 * lines, mapping line numbers through `map` (NULL: the compiled text is the
 * input itself). Of the informational lines only ptxas's numbered advice
 * is kept ("input: info: (C7511) ..."); -v's report is not. Returns the
 * number of errors found. */
size_t tc_ptxas_diagnostics(const char *log, size_t len, const tc_text *map,
                            const char *input_name, tc_sb *out);

#endif
