/* progress: a build's progress on the terminal. A cold build of a large
 * module compiles for seconds or minutes; one line on standard error, kept
 * up to date, says how many of its compiles are done and for how long it
 * has run. Only where standard error is a terminal (a log or a pipe gets
 * nothing, as before), only once the build has run for a second (a
 * cached build never shows it), and erased when the build ends, before
 * its messages. */
#ifndef TC_CLI_PROGRESS_H
#define TC_CLI_PROGRESS_H

#include "taskcache.h"

typedef struct cli_progress cli_progress;

/* Shows the progress of the builds made with opts, for the input name,
 * unless quiet or standard error is no terminal. NULL when nothing is
 * shown (cli_progress_stop takes it all the same). */
cli_progress *cli_progress_start(tc_options *opts, const char *name, int quiet);
/* Stops showing it and erases the line; the build has returned. */
void cli_progress_stop(cli_progress *p);

#endif
