/* test_prewarm: the link that follows a prewarm takes the handle the
 * prewarm made for its library and target (one nvJitLinkCreate less on the
 * critical path; each costs 14 ms where the CUDA driver sees no GPU), makes
 * its own for another target, and a forked child never uses its parent's.
 * The stand-in libnvJitLink counts its creates. A process prewarms once, so
 * these checks run in one sequence. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "fake_nvjitlink.h"
#include "link/link.h"

static int (*creates)(void);

/* One link of nothing: the stand-in fails it at nvJitLinkComplete, after
 * the handle was made (or taken) and used. */
static void link_once(const tc_linker *l, const char *arch)
{
    tc_sb image = TC_SB_INIT, log = TC_SB_INIT;
    tc_link_job *lj = tc_link_start(l, arch, "/nonexistent");
    CHECK(lj != NULL);
    CHECK(lj && tc_link_finish(lj, &image, &log) != 0);
    CHECK(log.data && strstr(log.data, "fake nvJitLink"));
    tc_sb_free(&image);
    tc_sb_free(&log);
}

int main(void)
{
    tc_linker l;
    fake_nvjitlink(&l, "0");
    tc_linker_prewarm(&l, "sm_90");
    tc_linker_prewarm_wait();
    void *lib = dlopen(TC_FAKE_NVJITLINK, RTLD_NOW | RTLD_NOLOAD);
    CHECK(lib != NULL);
    void *sym = lib ? dlsym(lib, "fake_nvjitlink_creates") : NULL;
    CHECK(sym != NULL);
    if (!sym)
        return check_report("test_prewarm");
    memcpy(&creates, &sym, sizeof sym);
    CHECK(creates() == 1); /* the prewarm's */

    /* a child links with a handle of its own, not the parent's */
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        link_once(&l, "sm_90");
        _exit(creates() == 2 && check_report("test_prewarm child") == 0 ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    link_once(&l, "sm_80"); /* another target: a handle of its own */
    CHECK(creates() == 2);
    link_once(&l, "sm_90"); /* takes the prewarmed handle */
    CHECK(creates() == 2);
    link_once(&l, "sm_90"); /* taken: a new one */
    CHECK(creates() == 3);
    return check_report("test_prewarm");
}
