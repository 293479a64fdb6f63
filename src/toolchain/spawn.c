/* spawn: posix_spawn wrapper used for ptxas, nvlink and --version probes. */
#define _GNU_SOURCE
#include "toolchain/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int tc_spawn(char *const argv[], const char *log_path, tc_sb *capture, int *exit_code)
{
    posix_spawn_file_actions_t fa;
    int pipefd[2] = {-1, -1};
    if (posix_spawn_file_actions_init(&fa) != 0)
        return -1;
    int rc = 0;
    if (log_path) {
        rc |= posix_spawn_file_actions_addopen(&fa, 1, log_path,
                                               O_WRONLY | O_CREAT | O_TRUNC, 0600);
        rc |= posix_spawn_file_actions_adddup2(&fa, 1, 2);
    } else if (capture) {
        if (pipe2(pipefd, O_CLOEXEC) != 0) {
            posix_spawn_file_actions_destroy(&fa);
            return -1;
        }
        rc |= posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
        rc |= posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
    } else {
        rc |= posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        rc |= posix_spawn_file_actions_adddup2(&fa, 1, 2);
    }
    rc |= posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    if (rc == 0)
        rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    if (rc != 0) {
        if (pipefd[0] >= 0)
            close(pipefd[0]);
        errno = rc;
        return -1;
    }
    if (pipefd[0] >= 0) {
        char buf[4096];
        for (;;) {
            ssize_t n = read(pipefd[0], buf, sizeof buf);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            tc_sb_append(capture, buf, (size_t)n);
        }
        close(pipefd[0]);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    if (WIFEXITED(status))
        *exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        *exit_code = 128 + WTERMSIG(status);
    else
        *exit_code = 255;
    return 0;
}

int tc_exit_signal(int exit_code)
{
    int sig = exit_code - 128;
    return sig > 0 && sig < 65 ? sig : 0;
}

void tc_describe_exit(int exit_code, char *out, size_t cap)
{
    int sig = tc_exit_signal(exit_code);
    if (sig)
        snprintf(out, cap, "was killed by signal %d, %s", sig, strsignal(sig));
    else
        snprintf(out, cap, "failed (exit code %d)", exit_code);
}
