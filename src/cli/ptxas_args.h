/* ptxas_args: reads a ptxas command line, as nvcc, clang (--ptxas-path),
 * Triton (TRITON_PTXAS_PATH) and XLA write it, into what `taskcache
 * ptxas` needs to build the same cubin through the cache, or says why the
 * command must go to NVIDIA's ptxas instead.
 *
 * The rule that keeps `taskcache ptxas` a faithful stand-in: a command is
 * taken only when every word of it is understood exactly as ptxas
 * understands it (ptxas 13.0, checked by hand: short names take one dash
 * and long names two, "-arch=V" and "-arch V" both work, "-O3" and "-O=3"
 * work but "-O 3" makes 3 an input file, options files split on white
 * space with double quotes grouping). Anything else, including forms
 * ptxas would accept but this reader does not know, goes to ptxas
 * unchanged: slower, never different. Pure: the only input besides argv
 * is what the caller's reader returns for an options file. */
#ifndef TC_CLI_PTXAS_ARGS_H
#define TC_CLI_PTXAS_ARGS_H

#include <stddef.h>

typedef struct px_args {
    const char *input;     /* the PTX file */
    const char *output;    /* -o FILE; NULL: none given (ptxas then writes elf.o) */
    const char *arch;      /* -arch / --gpu-name as given ("sm_90a") */
    int verbose;           /* -v: print the resource report */
    int warn_spills;       /* --warn-on-spills */
    int warn_lmem;         /* --warn-on-local-memory-usage */
    int compile_only;      /* -c: a relocatable object of the whole module */
    int help;              /* -h / --help (a hand-over: pass is set) */
    char **copts;          /* options that shape the code, for the compiler and every
                              key, in one order whatever order they came in */
    size_t ncopts;
    /* Non-NULL: the command goes to NVIDIA's ptxas as it is, and this says
     * why (for the log). Set for --version too: ptxas answers it. */
    const char *pass;
    char reason[160];      /* where pass points when it names a word */
    /* what the above point into besides argv: words of options files */
    char **owned;
    size_t nowned;
    int oom;               /* out of memory: treat as pass */
} px_args;

/* Reads an options file: a malloc'd buffer of *len bytes (not necessarily
 * NUL-terminated), or NULL when it cannot be read. */
typedef char *(*px_read_fn)(void *ctx, const char *path, size_t *len);

/* Reads argv[0..argc) (the arguments after the program's name). Always
 * fills *out (free it with px_free); out->pass is set when the command is
 * not one to take. */
void px_parse(int argc, char *const *argv, px_read_fn read, void *ctx, px_args *out);
void px_free(px_args *a);

#endif
