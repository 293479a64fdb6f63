/* recover: building again with ptxas processes after a crash (recover.h). */
#define _GNU_SOURCE
#include "cli/recover.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern char **environ;

#define RECOVERED "TASKCACHE_RECOVERED"

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
#define NFATAL (sizeof fatal_signals / sizeof *fatal_signals)

/* Everything the handler needs is made before it can run: it may only
 * call what is safe in a signal handler (write, execve, raise). */
static struct {
    char **argv;  /* the command again, NULL-terminated */
    char **envp;  /* the environment, `mark` last */
    char mark[sizeof RECOVERED "=NN"];
    int erase_line;
    int rewind_stdin; /* standard input is a copy of what this run read */
    struct sigaction before[NFATAL];
    volatile sig_atomic_t armed;
} again;

static void on_crash(int sig)
{
    if (again.armed) {
        again.armed = 0;
        char *digits = again.mark + sizeof RECOVERED; /* past "NAME=" */
        digits[0] = (char)('0' + sig / 10 % 10);
        digits[1] = (char)('0' + sig % 10);
        if (again.erase_line)
            (void)!write(STDERR_FILENO, "\r\033[K", 4);
        if (again.rewind_stdin)
            (void)lseek(STDIN_FILENO, 0, SEEK_SET);
        execve("/proc/self/exe", again.argv, again.envp);
    }
    /* not armed, or no exec: SA_RESETHAND restored the default action, so
     * the process ends of the signal as it would have without us */
    raise(sig);
}

int cli_recovered_from(void)
{
    const char *v = getenv(RECOVERED);
    int sig = v ? atoi(v) : 0;
    if (v)
        unsetenv(RECOVERED);
    return sig > 0 ? sig : 0;
}

/* Makes standard input a file that holds text, for the second run to
 * read from its start (a pipe, read once, would give it nothing). */
static int keep_stdin(const void *text, size_t len)
{
    int fd = memfd_create("taskcache-stdin", 0); /* not close-on-exec: the exec keeps it */
    if (fd < 0)
        return -1;
    const char *p = text;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    int rc = dup2(fd, STDIN_FILENO) < 0 ? -1 : 0;
    close(fd);
    return rc;
}

int cli_recover_begin(int argc, char **argv, const void *stdin_text, size_t stdin_len,
                      int erase_line)
{
    if (stdin_text && keep_stdin(stdin_text, stdin_len) != 0)
        return -1;
    again.rewind_stdin = stdin_text != NULL;
    size_t nenv = 0;
    while (environ[nenv])
        nenv++;
    again.argv = calloc((size_t)argc + 1, sizeof *again.argv);
    again.envp = calloc(nenv + 2, sizeof *again.envp);
    if (!again.argv || !again.envp) {
        cli_recover_end();
        return -1;
    }
    memcpy(again.argv, argv, (size_t)argc * sizeof *argv);
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++)
        if (strncmp(environ[i], RECOVERED "=", sizeof RECOVERED))
            again.envp[k++] = environ[i];
    memcpy(again.mark, RECOVERED "=00", sizeof again.mark);
    again.envp[k] = again.mark;
    again.erase_line = erase_line && isatty(STDERR_FILENO);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_crash;
    sigemptyset(&sa.sa_mask);
    /* NODEFER: the signal is not left blocked across the exec, where the
     * second run would inherit the mask */
    sa.sa_flags = (int)(SA_RESETHAND | SA_NODEFER);
    for (size_t i = 0; i < NFATAL; i++)
        sigaction(fatal_signals[i], &sa, &again.before[i]);
    again.armed = 1;
    return 0;
}

void cli_recover_end(void)
{
    if (again.armed) {
        again.armed = 0;
        for (size_t i = 0; i < NFATAL; i++)
            sigaction(fatal_signals[i], &again.before[i], NULL);
    }
    free(again.argv);
    free(again.envp);
    again.argv = NULL;
    again.envp = NULL;
}
