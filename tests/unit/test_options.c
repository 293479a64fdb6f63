/* test_options.c: the compiler options a host gives, as taskcache keeps
 * them (every kept option is part of every cache key).
 *
 * --split-compile=0 means "a thread per CPU". Relocatable code compiled on
 * one thread differs from code compiled on several, so on a machine of one
 * CPU the option is kept as --split-compile=1: a cache shared with larger
 * machines must not hand it their code under its key, nor the reverse.
 * The CPU count comes from this file's sysconf, which the library's calls
 * in this executable reach, so that the one-CPU case runs on any machine. */
#include <stdlib.h>
#include <unistd.h>

#include "api/handles.h"
#include "check.h"
#include "taskcache.h"

extern long __sysconf(int name); /* glibc's, under its other name */

static long online_cpus = 16;

long sysconf(int name)
{
    return name == _SC_NPROCESSORS_ONLN ? online_cpus : __sysconf(name);
}

/* The option as kept, after it is given alone (a copy), or NULL when it is
 * refused. */
static char *kept(const char *opt)
{
    tc_options *o = tc_options_new();
    tc_error err = {0};
    char *out = NULL;
    if (o && tc_options_add_compiler_option(o, opt, &err) == TC_OK && o->ncopts == 1)
        out = strdup(o->copts[0]);
    tc_options_free(o);
    return out;
}

static void check_kept(const char *opt, const char *want)
{
    char *got = kept(opt);
    CHECK_STR(got, want);
    free(got);
}

int main(void)
{
    online_cpus = 16;
    check_kept("--split-compile=0", "--split-compile=0");
    check_kept("-split-compile=0", "-split-compile=0");
    check_kept("--split-compile=1", "--split-compile=1");

    online_cpus = 2; /* two threads give the code of any larger count */
    check_kept("--split-compile=0", "--split-compile=0");

    online_cpus = 1;
    check_kept("--split-compile=0", "--split-compile=1");
    check_kept("-split-compile=0", "--split-compile=1");
    check_kept("--split-compile=4", "--split-compile=4"); /* asked for: kept */
    check_kept("--split-compile=1", "--split-compile=1");
    check_kept("--fmad=false", "--fmad=false");

    printf("test_options: %d checks, %d failed\n", check_count, check_failures);
    return check_failures != 0;
}
