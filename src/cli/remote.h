/* remote: `taskcache remote check` and the --remote option of the commands
 * that build (remote.c). */
#ifndef TC_CLI_REMOTE_H
#define TC_CLI_REMOTE_H

#include "taskcache.h"

extern const char cli_usage_remote[];

/* `taskcache remote ...`: the arguments after "remote"; the exit status. */
int cli_remote(int argc, char **argv);

/* Puts the remote of --remote SPEC (NULL: none given) behind cache. The
 * exit status: EXIT_USAGE, having said what is wrong, for a bad spec. */
int cli_use_remote(tc_cache *cache, const char *spec);

/* Waits for the uploads a command queued (their flush timeout) and warns,
 * once, when some could not be written; a Ctrl-C ends the wait (the
 * caller then dies of it, cli_close_cache giving the uploads a second).
 * NULL is allowed. */
void cli_flush_remote(tc_cache *cache);

#endif
