/* pool: the worker pool (see pool.h). Items wait in a ring: workers take
 * them from its head, and an item that must wait goes back at its tail,
 * due again after a pause that doubles with each try (10 ms to 100 ms):
 * waiting for another process costs a few wake-ups a second, not a core.
 * A worker with nothing due waits until an item finishes or comes back,
 * or the head's pause ends, since any of these can change what is left. */
#include "util/pool.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define FIRST_PAUSE_NS (10 * 1000 * 1000LL)
#define LONGEST_PAUSE_NS (100 * 1000 * 1000LL)

typedef struct slot {
    size_t item;
    int64_t due_ns;        /* CLOCK_MONOTONIC; 0: now */
    int64_t pause_ns;      /* the next pause if it must wait again */
} slot;

typedef struct pool {
    const tc_pool_work *w;
    slot *ring;            /* w->n slots */
    size_t head, queued;   /* the queue is ring[head .. head+queued) mod n */
    size_t done;
    pthread_mutex_t lock;
    pthread_cond_t changed;   /* waits on CLOCK_MONOTONIC */
} pool;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int stopped(const pool *p) { return p->w->stop && p->w->stop(p->w->ctx); }

/* Waits for a change, or until due_ns (0: no deadline). Holds p->lock. */
static void wait_change(pool *p, int64_t due_ns)
{
    if (!due_ns) {
        pthread_cond_wait(&p->changed, &p->lock);
        return;
    }
    struct timespec until = {(time_t)(due_ns / 1000000000), (long)(due_ns % 1000000000)};
    pthread_cond_timedwait(&p->changed, &p->lock, &until);
}

static void *worker(void *arg)
{
    pool *p = arg;
    size_t n = p->w->n;
    pthread_mutex_lock(&p->lock);
    while (p->done < n && !stopped(p)) {
        if (!p->queued) {
            wait_change(p, 0); /* every item left is running on another thread */
            continue;
        }
        slot s = p->ring[p->head];
        if (s.due_ns > now_ns()) {
            wait_change(p, s.due_ns);
            continue;
        }
        p->head = (p->head + 1) % n;
        p->queued--;
        pthread_mutex_unlock(&p->lock);
        tc_pool_step step = p->w->run(p->w->ctx, s.item);
        pthread_mutex_lock(&p->lock);
        if (step == TC_POOL_LATER) {
            s.pause_ns = s.pause_ns ? s.pause_ns : FIRST_PAUSE_NS;
            s.due_ns = now_ns() + s.pause_ns;
            s.pause_ns = s.pause_ns * 2 < LONGEST_PAUSE_NS ? s.pause_ns * 2 : LONGEST_PAUSE_NS;
            p->ring[(p->head + p->queued++) % n] = s;
        } else {
            p->done++;
        }
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int tc_pool_run(const tc_pool_work *w)
{
    if (!w->n)
        return 0;
    pool p = {.w = w};
    if (!(p.ring = calloc(w->n, sizeof *p.ring)))
        return -1;
    for (size_t i = 0; i < w->n; i++)
        p.ring[i].item = w->items[i];
    p.queued = w->n;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&p.changed, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&p.lock, NULL);
    size_t nthreads = (size_t)w->jobs < w->n ? (size_t)w->jobs : w->n;
    pthread_t *threads = nthreads > 1 ? calloc(nthreads, sizeof *threads) : NULL;
    size_t started = 0;
    while (threads && started < nthreads &&
           pthread_create(&threads[started], NULL, worker, &p) == 0)
        started++;
    if (!started)
        worker(&p); /* one job, or no threads to be had: work here */
    for (size_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    free(threads);
    free(p.ring);
    pthread_cond_destroy(&p.changed);
    pthread_mutex_destroy(&p.lock);
    return 0;
}

int tc_pool_run_range(size_t n, int jobs, tc_pool_step (*run)(void *ctx, size_t item), void *ctx)
{
    if (n == 1) { /* a record of one frame, a file of one chunk: no pool to set up */
        (void)run(ctx, 0);
        return 0;
    }
    size_t *items = malloc((n ? n : 1) * sizeof *items);
    if (!items)
        return -1;
    for (size_t i = 0; i < n; i++)
        items[i] = i;
    tc_pool_work w = {items, n, jobs, run, NULL, ctx};
    int rc = tc_pool_run(&w);
    free(items);
    return rc;
}

static long online_cpus;
static pthread_once_t online_once = PTHREAD_ONCE_INIT;

/* glibc reads /sys/devices/system/cpu/online at every call: once per
 * process, not once per record read (a relink reads 50 or more) */
static void count_online(void) { online_cpus = sysconf(_SC_NPROCESSORS_ONLN); }

int tc_pool_cpus(int at_most)
{
    pthread_once(&online_once, count_online);
    long cpus = online_cpus;
    return cpus < 1 ? 1 : cpus > at_most ? at_most : (int)cpus;
}
