/* pool: the worker pool (see pool.h). Items wait in a ring: workers take
 * them from its head, and an item that must wait goes back at its tail.
 * A worker with nothing to take waits until an item finishes or comes
 * back, since either can change what is left to do. */
#include "pipeline/pool.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct pool {
    const tc_pool_work *w;
    size_t *ring;          /* w->n slots */
    size_t head, queued;   /* the queue is ring[head .. head+queued) mod n */
    size_t done;
    pthread_mutex_t lock;
    pthread_cond_t changed;
} pool;

static int stopped(const pool *p) { return p->w->stop && p->w->stop(p->w->ctx); }

static void *worker(void *arg)
{
    pool *p = arg;
    size_t n = p->w->n;
    pthread_mutex_lock(&p->lock);
    while (p->done < n && !stopped(p)) {
        if (!p->queued) {
            /* every item left is running on another thread */
            pthread_cond_wait(&p->changed, &p->lock);
            continue;
        }
        size_t item = p->ring[p->head];
        p->head = (p->head + 1) % n;
        p->queued--;
        pthread_mutex_unlock(&p->lock);
        tc_pool_step step = p->w->run(p->w->ctx, item);
        pthread_mutex_lock(&p->lock);
        if (step == TC_POOL_LATER)
            p->ring[(p->head + p->queued++) % n] = item;
        else
            p->done++;
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
    if (!(p.ring = malloc(w->n * sizeof *p.ring)))
        return -1;
    for (size_t i = 0; i < w->n; i++)
        p.ring[i] = w->items[i];
    p.queued = w->n;
    pthread_mutex_init(&p.lock, NULL);
    pthread_cond_init(&p.changed, NULL);
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
