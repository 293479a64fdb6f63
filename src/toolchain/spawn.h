/* spawn: runs a tool of the toolchain (ptxas, nvlink, a --version probe)
 * without a shell (posix_spawn) and waits for it.
 * Output goes to a file or is captured in memory. Only the child's own pid
 * is waited for, so a host process's other children are never reaped. */
#ifndef TC_TOOLCHAIN_SPAWN_H
#define TC_TOOLCHAIN_SPAWN_H

#include <stddef.h>

#include "util/strbuf.h"

/* argv[0] is the program path (no $PATH search). Standard output and
 * standard error both go to log_path when it is non-NULL, else into
 * `capture` (if non-NULL) or nowhere. *exit_code is the exit status, or
 * 128 + signal. Returns 0 when the program ran, -1 when it could not be
 * started (errno set). */
int tc_spawn(char *const argv[], const char *log_path, tc_sb *capture, int *exit_code);

/* How a process that failed ended, for messages: "failed (exit code 1)",
 * or "was killed by signal 6, Aborted" for an exit code of 128 + a signal. */
void tc_describe_exit(int exit_code, char *out, size_t cap);
/* The signal that killed the program of an exit code of tc_spawn (128 +
 * the signal), or 0 when it exited. */
int tc_exit_signal(int exit_code);

#endif
