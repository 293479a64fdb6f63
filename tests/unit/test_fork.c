/* test_fork: a process that forks while taskcache works on other threads
 * (Python's multiprocessing forks by default on Linux) leaves the child
 * able to use taskcache: no process-wide state of the library is left
 * waiting for a thread the child does not have. A hang in the child is
 * turned into a failure by alarm(). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "fake_nvjitlink.h"
#include "link/link.h"
#include "taskcache.h"
#include "util/fs.h"

/* Waits for a child that must exit 0 within its alarm. */
static void check_child(pid_t pid, const char *what)
{
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "%s: the child %s %d\n", what,
                WIFSIGNALED(status) ? "was killed by signal" : "exited with",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        CHECK(0);
    }
}

/* ---- the linker's prewarm thread ---------------------------------------------- */

static void test_fork_during_prewarm(void)
{
    /* the stand-in's first use takes 500 ms: the fork lands inside it */
    tc_linker l;
    fake_nvjitlink(&l, "500");
    tc_linker_prewarm(&l, "sm_90");
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        tc_linker_prewarm_wait();   /* what every build does before it returns */
        tc_linker_prewarm(&l, "sm_90");
        tc_linker_prewarm_wait();
        _exit(0);
    }
    check_child(pid, "fork during the linker's prewarm");
    tc_linker_prewarm_wait();
}

/* ---- a serialized host's turn, held by another thread ---------------------------- */

typedef struct held {
    pthread_mutex_t m;
    pthread_cond_t cv;
    int in_codegen, forked;
    pid_t parent;
} held;

static void codegen(void *user, size_t index, const tc_task *task, tc_codegen *out)
{
    held *h = user;
    if (index == 0 && getpid() == h->parent) {
        /* hold the host's turn across the fork */
        pthread_mutex_lock(&h->m);
        h->in_codegen = 1;
        pthread_cond_broadcast(&h->cv);
        while (!h->forked)
            pthread_cond_wait(&h->cv, &h->m);
        pthread_mutex_unlock(&h->m);
    }
    char ptx[1024];
    snprintf(ptx, sizeof ptx,
             ".version 8.0\n.target sm_90\n.address_size 64\n"
             ".visible .entry %s(.param .u64 out)\n{\n .reg .b32 %%r<3>;\n"
             " .reg .b64 %%rd<3>;\n ld.param.u64 %%rd1, [out];\n mov.u32 %%r1, %zu;\n"
             " st.global.u32 [%%rd1], %%r1;\n ret;\n}\n",
             task->name, index);
    tc_codegen_set_ptx(out, ptx, strlen(ptx));
}

typedef struct build_args {
    tc_cache *cache;
    held *h;
    const char *prefix;
    tc_status st;
} build_args;

static void *build(void *arg)
{
    build_args *a = arg;
    tc_options *o = tc_options_new();
    tc_options_set_arch(o, "sm_90", NULL);
    tc_options_set_jobs(o, 2);
    char names[2][32];
    tc_task tasks[2];
    for (int i = 0; i < 2; i++) {
        snprintf(names[i], sizeof names[i], "%s%d", a->prefix, i);
        tasks[i].name = names[i];
        tasks[i].key = names[i];
        tasks[i].key_size = strlen(names[i]);
    }
    tc_host host = {"fork 1", codegen, a->h, 1, NULL, 0};
    tc_result *r = NULL;
    a->st = tc_build_tasks(a->cache, o, &host, tasks, 2, &r);
    tc_result_free(r);
    tc_options_free(o);
    return NULL;
}

static void test_fork_while_a_serialized_host_runs(void)
{
    char *dir = tc_make_temp_dir("tc-test-fork");
    tc_cache *cache = NULL;
    CHECK(dir && tc_cache_open(dir, &cache, NULL) == TC_OK);
    if (!cache)
        return;
    held h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, getpid()};
    build_args a = {cache, &h, "parent", TC_OK};
    pthread_t t;
    pthread_create(&t, NULL, build, &a);
    pthread_mutex_lock(&h.m);
    while (!h.in_codegen)
        pthread_cond_wait(&h.cv, &h.m);
    pthread_mutex_unlock(&h.m);
    pid_t pid = fork();
    if (pid == 0) {
        /* the same host (codegen, user) and the same cache handle, whose
         * turn and reference the parent's thread holds */
        alarm(120);
        build_args c = {cache, &h, "child", TC_ERR_INVALID};
        build(&c);
        tc_cache_close(cache);
        _exit(c.st == TC_OK ? 0 : 1);
    }
    check_child(pid, "fork while a serialized host's codegen runs");
    pthread_mutex_lock(&h.m);
    h.forked = 1;
    pthread_cond_broadcast(&h.cv);
    pthread_mutex_unlock(&h.m);
    pthread_join(t, NULL);
    CHECK(a.st == TC_OK);
    tc_cache_close(cache);
    tc_remove_tree(dir);
    free(dir);
}

/* AddressSanitizer before LLVM 18 does not hold its allocator's locks
 * across fork(): a child forked while another thread is inside malloc can
 * wait forever in its own first malloc (seen here, clang 14: every thread
 * of the child in SizeClassAllocator64::GetFromAllocator). That is the
 * sanitizer's, not taskcache's; the release build runs these tests. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && defined(__clang_major__) && __clang_major__ < 18
#define FORK_UNSAFE_SANITIZER 1
#endif
#endif

int main(void)
{
#ifdef FORK_UNSAFE_SANITIZER
    puts("test_fork: skipped: AddressSanitizer before LLVM 18 can hang a forked child in "
         "malloc (the release build runs this test)");
    return 77; /* ctest: SKIP_RETURN_CODE */
#endif
    test_fork_during_prewarm();
    test_fork_while_a_serialized_host_runs();
    return check_report("test_fork");
}
