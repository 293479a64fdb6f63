/* maintain: the commands that look after a cache (maintain.c): stats, gc,
 * verify, clear. Each takes the arguments after its name and returns the
 * exit status. */
#ifndef TC_CLI_MAINTAIN_H
#define TC_CLI_MAINTAIN_H

extern const char cli_usage_stats[], cli_usage_gc[], cli_usage_verify[], cli_usage_clear[];

int cli_stats(int argc, char **argv);
int cli_gc(int argc, char **argv);
int cli_verify(int argc, char **argv);
int cli_clear(int argc, char **argv);

#endif
