/* recover: a build that crashes while the in-process compiler may be
 * running is built again, with ptxas processes.
 *
 * nvPTXCompiler runs on our threads, so when it dies of an input the
 * process dies with it. The CUDA 13.0 library segfaults on some PTX that
 * the ptxas program compiles (a wgmma whose matrix descriptors are the
 * constant 0, tests/e2e/failing_modules.py). A command line can start over:
 * the handler executes this program again with the same arguments and
 * TASKCACHE_RECOVERED=SIGNAL, and that run compiles with ptxas processes
 * and says why. What the crashed run cached stays valid: every record is
 * written whole under a temporary name and renamed, or not at all. */
#ifndef TC_CLI_RECOVER_H
#define TC_CLI_RECOVER_H

#include <stddef.h>

/* The signal a crashed run of this command died of, when this run is its
 * second try (then also the environment no longer names it, so that
 * programs this run starts do not inherit it); 0 otherwise. Call once, as
 * the command starts. */
int cli_recovered_from(void);

/* From here until cli_recover_end, a crash (SIGSEGV, SIGBUS, SIGILL,
 * SIGFPE, SIGABRT) runs argv[0..argc) again as described above instead of
 * ending the process. Call only where the command may choose the compiler
 * (the in-process one was not asked for by name). stdin_text: what this
 * run read from standard input (NULL when it read none), which becomes
 * the standard input of the second run. erase_line: a progress line may
 * stand on standard error, to be erased first. Returns 0, or -1 when it
 * could not arm, which leaves a crash fatal as before. */
int cli_recover_begin(int argc, char **argv, const void *stdin_text, size_t stdin_len,
                      int erase_line);
void cli_recover_end(void);

#endif
