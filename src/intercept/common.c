/* common: what both halves of the interceptor need (interpose.c and
 * front.c in the preloaded library, jit.c in the builder it loads): the
 * mode the environment asks for, the log, and telling PTX from the binary
 * images the driver also takes. Each library carries its own copy; the
 * builder takes the mode the preloaded part read (tc_jit_bind), so that a
 * program that changes the environment later cannot set them apart. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "intercept/intercept.h"

/* TASKCACHE_INTERCEPT: "0" (or off, no) every call goes to the driver as
 * if we were not there; "measure" the driver compiles, and the log says how
 * long it took (to compare with taskcache); else taskcache builds. Read
 * once.
 *
 * CUDA_DISABLE_PTX_JIT=1 tells the driver to compile no PTX (it is how a
 * program checks that its fatbins hold machine code for the GPU): a load of
 * PTX then fails. Building that PTX would hide the failure the variable is
 * set to see, so every call goes to the driver, as with "0"; and a program
 * that sets it once running gets the driver for every load from then on
 * (the builder asks before each). */
static int mode = -1;

int tc_intercept_driver_jit_disabled(void)
{
    const char *v = getenv("CUDA_DISABLE_PTX_JIT");
    return v && strtol(v, NULL, 10) != 0;
}

int tc_intercept_mode(void)
{
    if (mode < 0) { /* benign race: every thread computes the same */
        const char *e = getenv("TASKCACHE_INTERCEPT");
        int off = e && (!strcmp(e, "0") || !strcmp(e, "off") || !strcmp(e, "no"));
        if (!off && tc_intercept_driver_jit_disabled()) {
            off = 1;
            tc_intercept_note("CUDA_DISABLE_PTX_JIT is set: every PTX goes to the driver, "
                              "which compiles none");
        }
        mode = off                           ? TC_INTERCEPT_OFF
               : e && !strcmp(e, "measure") ? TC_INTERCEPT_MEASURE
                                            : TC_INTERCEPT_BUILD;
    }
    return mode;
}

void tc_intercept_set_mode(int m) { mode = m; }

int tc_intercept_enabled(void) { return tc_intercept_mode() != TC_INTERCEPT_OFF; }

int tc_intercept_measure(void) { return tc_intercept_mode() == TC_INTERCEPT_MEASURE; }

int tc_intercept_trace(void)
{
    const char *t = getenv("TASKCACHE_INTERCEPT_TRACE");
    return t && *t && strcmp(t, "0") != 0;
}

/* One line in $TASKCACHE_LOG, opened for each line so that forks and
 * threads need no shared state. */
void tc_intercept_note(const char *fmt, ...)
{
    const char *path = getenv("TASKCACHE_LOG");
    if (!path || !*path)
        return;
    char line[1024], when[32] = "";
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (localtime_r(&ts.tv_sec, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    /* the time a line is written: a call's end, to line up with the program's own clock */
    int n = snprintf(line, sizeof line, "taskcache[%ld] %s.%03ld: ", (long)getpid(), when,
                     ts.tv_nsec / 1000000);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    /* standard error (taskcache run -v) is written through the program's
     * own descriptor: opened again, its offset would be a second one, and
     * the program's next write into a file it redirects to would cover
     * the line */
    int to_stderr = !strcmp(path, "/dev/stderr") || !strcmp(path, "/dev/fd/2");
    int fd = to_stderr ? 2 : open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    ssize_t w = write(fd, line, (size_t)n);
    (void)w; /* a log that cannot be written is no reason to fail a load */
    if (!to_stderr)
        close(fd);
}

/* Length of the PTX text at p, or 0 when p holds something else the driver
 * takes (a cubin, a fatbin): PTX is text that, past comments and white
 * space, starts with .version. Binary images are told by their first bytes
 * before anything reads further. */
size_t tc_ptx_length(const void *image)
{
    const unsigned char *p = image;
    if (!p || p[0] == 0x7f /* ELF */ || p[0] >= 0x80)
        return 0;
    if (p[0] == 0x50 && p[1] == 0xED) /* fatbin: 0xBA55ED50, little-endian */
        return 0;
    const unsigned char *s = p;
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\f' || *s == '\v')
            s++;
        if (s[0] == '/' && s[1] == '/') {
            while (*s && *s != '\n')
                s++;
        } else if (s[0] == '/' && s[1] == '*') {
            const char *end = strstr((const char *)s + 2, "*/");
            if (!end)
                return 0;
            s = (const unsigned char *)end + 2;
        } else {
            break;
        }
    }
    if (strncmp((const char *)s, ".version", 8) != 0)
        return 0;
    return strlen((const char *)p);
}

void tc_trace_load(const char *call, size_t ptx_len)
{
    if (tc_intercept_trace())
        tc_intercept_note("trace: %s(%s)", call, ptx_len ? "PTX" : "not PTX");
}

void tc_trace_link_create(int v, unsigned n, CUresult rc)
{
    if (tc_intercept_trace())
        tc_intercept_note("trace: cuLinkCreate%s(%u options): %d", v ? "_v2" : "", n, rc);
}

void tc_trace_link_add_data(int v, CUjitInputType type, size_t size)
{
    if (tc_intercept_trace())
        tc_intercept_note("trace: cuLinkAddData%s(type %d, %zu bytes)", v ? "_v2" : "",
                          (int)type, size);
}
