/* common: helpers the commands share (see common.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/common.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const cli_prog = "taskcache";

void cli_print_ptxas_report(const tc_result *r, unsigned what)
{
    size_t n = what ? tc_result_ptxas_report(r, what, NULL, 0) : 0;
    char *text = n ? malloc(n + 1) : NULL;
    if (text && tc_result_ptxas_report(r, what, text, n + 1) == n)
        fputs(text, stderr);
    free(text);
}

int cli_usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "%s: ", cli_prog);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'taskcache help' for more information.\n");
    return EXIT_USAGE;
}

int cli_check_environment(const char *who)
{
    tc_error bad;
    tc_options *o = tc_options_new();
    tc_status st = o ? tc_options_check(o, &bad) : TC_OK;
    tc_options_free(o);
    if (st == TC_OK)
        return EXIT_OK;
    fprintf(stderr, "%s: error: %s\n", who, bad.message);
    return EXIT_USAGE;
}

const char *cli_value_of(int argc, char **argv, int *i, const char *name, int attached)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] == '\0') {
        if (*i + 1 >= argc)
            return "";
        return argv[++*i];
    }
    return attached ? a + n : NULL;
}

void cli_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

tc_cache *cli_open_cache(const char *dir)
{
    tc_cache *c = NULL;
    tc_error err;
    if (tc_cache_open(dir, &c, &err) != TC_OK) {
        fprintf(stderr, "%s: error: %s\n", cli_prog, err.message);
        return NULL;
    }
    return c;
}

char *cli_read_file(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f)
        return NULL;
    /* a regular file is read into a buffer of its exact size: a 1 GB input
     * costs 1 GB, not the 2 GB of a doubling buffer */
    struct stat st;
    size_t cap = 1 << 16, n = 0;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        cap = (size_t)st.st_size + 1;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            char *p = realloc(buf, cap * 2);
            if (!p) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = p;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    int bad = ferror(f);
    int saved = bad ? errno : ENOMEM;
    if (f != stdin)
        fclose(f);
    if (!buf || bad) {
        free(buf);
        errno = saved;
        return NULL;
    }
    if (n == cap) { /* room for the terminator */
        char *p = realloc(buf, cap + 1);
        if (!p) {
            free(buf);
            errno = ENOMEM;
            return NULL;
        }
        buf = p;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig) { interrupted = sig; }

/* A second Ctrl-C kills at once (SA_RESETHAND). */
void cli_catch_interrupts(tc_options *opts)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    tc_options_set_cancel(opts, &interrupted);
}

int cli_interrupted(void) { return interrupted; }

/* What a Ctrl-C leaves uploads to a remote, in seconds */
#define INTERRUPTED_FLUSH_S 1.0

void cli_close_cache(tc_cache *cache)
{
    if (cache && interrupted) {
        (void)tc_cache_flush(cache, INTERRUPTED_FLUSH_S, NULL);
        return;
    }
    tc_cache_close(cache);
}

void cli_die_of_interrupt(void)
{
    int sig = interrupted;
    fprintf(stderr, "%s: interrupted\n", cli_prog);
    signal(sig, SIG_DFL);
    raise(sig);
}
