/* trace: a build's events, the slowest compiles in words, and the trace
 * file Perfetto opens (see trace.h for the format). */
#define _GNU_SOURCE
#include "pipeline/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/fs.h"

void tc_trace_init(tc_trace *t)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
}

void tc_trace_free(tc_trace *t)
{
    free(t->events);
    pthread_mutex_destroy(&t->lock);
    memset(t, 0, sizeof *t);
}

void tc_trace_add(tc_trace *t, const char *what, const char *name, size_t len, double t0,
                  double t1)
{
    tc_trace_event e;
    e.what = what;
    e.t0 = t0;
    e.t1 = t1;
    e.tid = (long)syscall(SYS_gettid); /* gettid() itself came with glibc 2.30 */
    if (len >= sizeof e.name) { /* cut before a UTF-8 continuation byte, not inside */
        len = sizeof e.name - 1;
        while (len && ((unsigned char)name[len] & 0xC0) == 0x80)
            len--;
    }
    memcpy(e.name, name, len);
    e.name[len] = '\0';
    pthread_mutex_lock(&t->lock);
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        tc_trace_event *grown = realloc(t->events, cap * sizeof *grown);
        if (grown) {
            t->events = grown;
            t->cap = cap;
        }
    }
    if (t->n < t->cap)
        t->events[t->n++] = e;
    pthread_mutex_unlock(&t->lock);
}

/* The host's codegen time of the task that a compile event compiled (the
 * codegen event of the same name), 0 for none: for a host's task the two
 * together are what it cost (Warp's NVRTC runs in its codegen). */
static double codegen_seconds(const tc_trace *t, const tc_trace_event *compile)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->events[i].what, "codegen") == 0 &&
            strcmp(t->events[i].name, compile->name) == 0)
            return t->events[i].t1 - t->events[i].t0;
    return 0;
}

void tc_trace_slowest(const tc_trace *t, size_t most, tc_sb *out)
{
    size_t n = t->n ? t->n : 1;
    double *cost = malloc(n * sizeof *cost), *gen = malloc(n * sizeof *gen);
    if (!cost || !gen) { /* no words rather than no build */
        free(cost);
        free(gen);
        return;
    }
    for (size_t i = 0; i < t->n; i++) {
        const tc_trace_event *e = &t->events[i];
        int compile = strcmp(e->what, "compile") == 0;
        gen[i] = compile ? codegen_seconds(t, e) : 0;
        cost[i] = compile ? e->t1 - e->t0 + gen[i] : -1;
    }
    /* a few passes: most is small, a build has hundreds of compiles */
    for (size_t k = 0; k < most; k++) {
        size_t best = t->n;
        for (size_t i = 0; i < t->n; i++)
            if (cost[i] >= 0 && (best == t->n || cost[i] > cost[best]))
                best = i;
        if (best == t->n)
            break;
        tc_sb_printf(out, "%s%s %.3f s", k ? "; " : "", t->events[best].name, cost[best]);
        if (gen[best] > 0)
            tc_sb_printf(out, " (codegen %.3f)", gen[best]);
        cost[best] = -1;
    }
    free(cost);
    free(gen);
}

int tc_trace_write(const tc_trace *t, const char *path, const char *build)
{
    tc_sb text = TC_SB_INIT;
    long pid = (long)getpid();
    for (size_t i = 0; i < t->n; i++) {
        const tc_trace_event *e = &t->events[i];
        tc_sb_puts(&text, ",\n{\"name\": ");
        tc_sb_json_string(&text, e->name, strlen(e->name));
        tc_sb_printf(&text, ", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.0f, \"dur\": %.0f, "
                            "\"pid\": %ld, \"tid\": %ld, \"args\": {\"build\": ",
                     e->what, e->t0 * 1e6, (e->t1 - e->t0) * 1e6, pid, e->tid);
        tc_sb_json_string(&text, build, strlen(build));
        tc_sb_puts(&text, "}}");
    }
    if (text.oom) {
        tc_sb_free(&text);
        errno = ENOMEM;
        return -1;
    }
    int rc = -1;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    struct stat st;
    if (fd >= 0 && flock(fd, LOCK_EX) == 0 && fstat(fd, &st) == 0) {
        /* the first events of a file open the array; others follow a comma */
        const char *head = st.st_size == 0 ? "[\n" : ",\n";
        const char *body = text.len ? text.data + 2 : "";
        size_t blen = text.len ? text.len - 2 : 0;
        rc = blen == 0 || (tc_write_all(fd, head, 2) == 0 && tc_write_all(fd, body, blen) == 0)
                 ? 0
                 : -1;
    }
    int saved = errno;
    if (fd >= 0)
        close(fd); /* releases the lock */
    tc_sb_free(&text);
    errno = saved;
    return rc;
}
