/* pool: the one worker pool. It runs a list of items (units to compile,
 * tasks to generate and compile, chunks of a file to hash) on up to -j
 * threads, in the order given; an item that must wait for another process
 * goes back to the end of the queue and is tried again after a pause, and
 * work that is cancelled stops handing out items. Internal. */
#ifndef TC_UTIL_POOL_H
#define TC_UTIL_POOL_H

#include <stddef.h>

typedef enum tc_pool_step {
    TC_POOL_DONE,   /* the item is finished, whatever its outcome */
    TC_POOL_LATER   /* it waits for another process: try it again after a pause */
} tc_pool_step;

typedef struct tc_pool_work {
    const size_t *items;   /* the items, in the order to start them */
    size_t n;
    int jobs;              /* threads at most; the calling thread works when there is one */
    tc_pool_step (*run)(void *ctx, size_t item);
    int (*stop)(void *ctx);    /* optional: once nonzero, no further item starts */
    void *ctx;
} tc_pool_work;

/* Runs the items and returns when every one is done, or, once stop says
 * so, when those already started are. Without memory or threads it runs
 * them on the calling thread. 0, or -1 out of memory (nothing ran). */
int tc_pool_run(const tc_pool_work *w);
/* Runs items 0..n-1, each of which finishes when run (TC_POOL_DONE; no
 * waiting, no stop), on up to jobs threads; one item runs on the calling
 * thread with no pool set up. 0, or -1 out of memory (nothing ran). */
int tc_pool_run_range(size_t n, int jobs, tc_pool_step (*run)(void *ctx, size_t item), void *ctx);
/* The CPUs online, at least 1 and at most at_most: the jobs for work that
 * has no -j of its own (hashing a file, a record's frames). */
int tc_pool_cpus(int at_most);

#endif
