/* progress: a build's progress on the terminal (see progress.h).
 *
 * The library reports each finished compile from its worker threads
 * (tc_options_set_progress); a thread of the tool's own redraws the line
 * four times a second, so that a long compile that finishes nothing for a
 * while (a module compiled whole) still shows its time going on. */
#define _GNU_SOURCE /* pthread_cond_timedwait on CLOCK_MONOTONIC */
#include "cli/progress.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli/common.h"

/* Nothing is shown before the build has run this long: most builds are
 * over by then (a cached one in milliseconds). */
#define SHOW_AFTER_S 1.0
#define REDRAW_MS 250

struct cli_progress {
    tc_options *opts;
    const char *name;
    unsigned done, total;  /* the library's last report (atomic) */
    double start;
    int stopping;          /* under lock */
    int shown;             /* a line is on the terminal (the ticker's own) */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t ticker;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_progress(void *user, unsigned done, unsigned total)
{
    cli_progress *p = user;
    __atomic_store_n(&p->total, total, __ATOMIC_RELAXED);
    __atomic_store_n(&p->done, done, __ATOMIC_RELAXED);
}

static void draw(cli_progress *p)
{
    unsigned total = __atomic_load_n(&p->total, __ATOMIC_RELAXED);
    unsigned done = __atomic_load_n(&p->done, __ATOMIC_RELAXED);
    char line[512];
    int n = total ? snprintf(line, sizeof line, "%s: %s: %u of %u compiled, %.0f s", cli_prog,
                             p->name, done, total, now() - p->start)
                  : snprintf(line, sizeof line, "%s: %s: %.0f s", cli_prog, p->name,
                             now() - p->start);
    /* one line, however narrow the terminal: a wrapped line would not be
     * redrawn in place */
    struct winsize ws;
    if (n > 0 && ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 &&
        n >= ws.ws_col)
        n = ws.ws_col - 1;
    /* \r and erase to the end of the line: the line is rewritten in place */
    fprintf(stderr, "\r\033[K%.*s", n > 0 ? n : 0, line);
    fflush(stderr);
    p->shown = 1;
}

static void *tick(void *arg)
{
    cli_progress *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += REDRAW_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&p->wake, &p->lock, &until);
        if (!p->stopping && now() - p->start >= SHOW_AFTER_S)
            draw(p);
    }
    if (p->shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

cli_progress *cli_progress_start(tc_options *opts, const char *name, int quiet)
{
    const char *term = getenv("TERM");
    if (quiet || !isatty(STDERR_FILENO) || (term && !strcmp(term, "dumb")))
        return NULL;
    cli_progress *p = calloc(1, sizeof *p);
    if (!p)
        return NULL; /* no progress line; the build goes on */
    p->opts = opts;
    const char *slash = strrchr(name, '/');
    p->name = slash ? slash + 1 : name; /* the line stays short */
    p->start = now();
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&p->ticker, NULL, tick, p) != 0) {
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NULL;
    }
    tc_options_set_progress(opts, on_progress, p);
    return p;
}

void cli_progress_stop(cli_progress *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->ticker, NULL);
    tc_options_set_progress(p->opts, NULL, NULL);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
