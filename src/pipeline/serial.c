/* serial: one codegen call at a time per host, across every build of the
 * process (see serial.h). The registry is process-wide state, so a fork
 * must leave it usable in the child: one mutex and one condition guard all
 * of it, and pthread_atfork hands the child a registry in which only the
 * forking thread may hold a host (the other threads do not exist there). */
#include "pipeline/serial.h"

#include <pthread.h>
#include <stdlib.h>

struct tc_serial {
    tc_codegen_fn fn;
    void *user;
    size_t refs;       /* builds using the entry */
    int busy;          /* a codegen call runs */
    pthread_t owner;   /* the thread running it */
    tc_serial *next;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reg_idle = PTHREAD_COND_INITIALIZER;
static tc_serial *reg;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void before_fork(void) { pthread_mutex_lock(&reg_lock); }

static void after_fork_parent(void) { pthread_mutex_unlock(&reg_lock); }

static void after_fork_child(void)
{
    for (tc_serial *s = reg; s; s = s->next)
        if (s->busy && !pthread_equal(s->owner, pthread_self()))
            s->busy = 0;
    /* waiters of the parent are not in the child: a fresh condition */
    pthread_cond_init(&reg_idle, NULL);
    pthread_mutex_unlock(&reg_lock);
}

static void register_fork_handlers(void)
{
    (void)pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

tc_serial *tc_serial_acquire(tc_codegen_fn fn, void *user)
{
    pthread_once(&fork_once, register_fork_handlers);
    pthread_mutex_lock(&reg_lock);
    tc_serial *s = reg;
    while (s && !(s->fn == fn && s->user == user))
        s = s->next;
    if (!s && (s = calloc(1, sizeof *s)) != NULL) {
        s->fn = fn;
        s->user = user;
        s->next = reg;
        reg = s;
    }
    if (s)
        s->refs++;
    pthread_mutex_unlock(&reg_lock);
    return s;
}

void tc_serial_release(tc_serial *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&reg_lock);
    if (--s->refs == 0) {
        tc_serial **p = &reg;
        while (*p != s)
            p = &(*p)->next;
        *p = s->next;
        free(s);
    }
    pthread_mutex_unlock(&reg_lock);
}

void tc_serial_lock(tc_serial *s)
{
    pthread_mutex_lock(&reg_lock);
    while (s->busy)
        pthread_cond_wait(&reg_idle, &reg_lock);
    s->busy = 1;
    s->owner = pthread_self();
    pthread_mutex_unlock(&reg_lock);
}

void tc_serial_unlock(tc_serial *s)
{
    pthread_mutex_lock(&reg_lock);
    s->busy = 0;
    pthread_cond_broadcast(&reg_idle);
    pthread_mutex_unlock(&reg_lock);
}
