/* ptxas: `taskcache ptxas`, the ptxas command line cached per kernel
 * (ptxas.c), and `taskcache shims`, the directory that puts it where
 * tools look for ptxas (shims.c). */
#ifndef TC_CLI_PTXAS_H
#define TC_CLI_PTXAS_H

#include <stddef.h>

extern const char cli_usage_ptxas[], cli_usage_shims[];

/* Runs a ptxas command line (argv: the arguments after "ptxas"). as_ptxas:
 * invoked under the name ptxas (a shim), where --help is ptxas's. Returns
 * the exit status, or does not return when NVIDIA's ptxas takes over. */
int cli_ptxas(int argc, char **argv, int as_ptxas);

/* NVIDIA's ptxas for `taskcache ptxas`: $TASKCACHE_PTXAS, else
 * $CUDA_HOME/bin/ptxas, else the toolkit's found when taskcache was built,
 * else ptxas on $PATH; whichever is this program itself (a shim) is
 * skipped. 0 and out filled, or -1 with why in out. */
int cli_real_ptxas(char *out, size_t cap);

int cli_shims(int argc, char **argv);

#endif
