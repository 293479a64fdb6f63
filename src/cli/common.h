/* common: what the commands of the taskcache tool share (see main.c):
 * the program's name, exit codes, the parsed arguments, usage errors,
 * option values, JSON strings, opening the cache. */
#ifndef TC_CLI_COMMON_H
#define TC_CLI_COMMON_H

#include <stddef.h>

#include "taskcache.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

extern const char *const cli_prog;

typedef struct args {
    const char *input;
    const char *output;
    const char *cache_dir;
    const char *remote;    /* --remote SPEC */
    const char *compiler;  /* --compiler NAME, NULL when not given */
    int no_cache, verbose, quiet, json, zero, full_keys;
    int ptxas_verbose;     /* -Xptxas -v: print ptxas's report of the build */
    const char *max_size;
    const char *older_than;
    int remove_bad;
    tc_options *opts;
} args;

/* Prints on standard error the lines of ptxas's report named by `what`
 * (TC_PTXAS_*; tc_result_ptxas_report): the build's, or the records'. */
void cli_print_ptxas_report(const tc_result *r, unsigned what);

/* Prints "taskcache: <fmt with arg>" and where to find help; EXIT_USAGE. */
int cli_usage_error(const char *fmt, const char *arg);
/* Whether the environment's choices of compiler and unit code
 * (TASKCACHE_COMPILER, TASKCACHE_UNIT_CODE) name ones taskcache knows, as
 * every build will judge them (tc_options_check): EXIT_OK, or EXIT_USAGE
 * after printing "<who>: error: why" (who: "taskcache ptxas", say). */
int cli_check_environment(const char *who);
/* Accepts "--name VALUE", "--name=VALUE" and, for short forms, "-nVALUE".
 * Returns the value or NULL if argv[*i] is not this option. */
const char *cli_value_of(int argc, char **argv, int *i, const char *name, int attached);
/* Prints s as a JSON string. */
void cli_json_string(const char *s);
/* Opens the cache (NULL dir: the default one), or prints why not. */
tc_cache *cli_open_cache(const char *dir);
/* Reads a whole file ("-": standard input) into a malloc'd buffer with a
 * NUL after its *len bytes. NULL with errno set when it cannot; prints
 * nothing (`taskcache ptxas` hands such a file to NVIDIA's ptxas, whose
 * message the caller expects). */
char *cli_read_file(const char *path, size_t *len);

/* Ctrl-C and SIGTERM cancel the builds made with opts (the library's
 * cancel flag): no compile starts after it and the build's temporary
 * files are removed. cli_interrupted() then returns the signal, and
 * cli_die_of_interrupt() ends the process by it, as the shell expects. */
void cli_catch_interrupts(tc_options *opts);
int cli_interrupted(void);
void cli_die_of_interrupt(void);

/* Closes cache (NULL allowed). Once interrupted, the process is about to
 * die of it: uploads still queued get a second, not the remote's
 * flush-timeout, which a stalled server takes in full, and the handle is
 * left to the exit. */
void cli_close_cache(tc_cache *cache);

#endif
