/* run: the `taskcache run` command (run.c). */
#ifndef TC_CLI_RUN_H
#define TC_CLI_RUN_H

extern const char tc_cli_usage_run[];

/* Runs argv (after run's own options) with the interceptor preloaded: does
 * not return when the program starts; else its exit status. */
int tc_cli_run(int argc, char **argv);

#endif
