/* options: tc_options, the settings of a build (see taskcache.h). */
#define _GNU_SOURCE
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/handles.h"
#include "compile/nvptx.h"
#include "util/pool.h"

/* A placeholder for "out of memory" among env_choice's results. */
static char env_nomem[1];
#define ENV_NOMEM env_nomem

/* The index in choices of $var's value; -1 when unset, or when the value
 * is none of them: then *bad holds a copy of it (ENV_NOMEM when that
 * cannot be made). */
static int env_choice(const char *var, const char *const *choices, char **bad)
{
    const char *v = getenv(var);
    if (!v)
        return -1;
    for (int i = 0; choices[i]; i++)
        if (!strcmp(v, choices[i]))
            return i;
    *bad = strdup(v);
    if (!*bad)
        *bad = ENV_NOMEM;
    return -1;
}

tc_options *tc_options_new(void)
{
    tc_options *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    o->jobs = tc_pool_cpus(INT_MAX);
    o->module_tier = o->unit_tier = o->split = 1;
    /* a value taskcache does not know (a misspelling, an empty one) is
     * kept, and every build refuses it (tc_options_check): silently
     * choosing another compiler would be worse */
    static const char *const compilers[] = {"auto", "ptxas", "inprocess", NULL};
    static const char *const unit_codes[] = {"relocatable", "whole-program", "auto", NULL};
    int c = env_choice("TASKCACHE_COMPILER", compilers, &o->bad_compiler_env);
    int u = env_choice("TASKCACHE_UNIT_CODE", unit_codes, &o->bad_unit_code_env);
    o->compiler = c < 0 ? TC_COMPILER_AUTO : (tc_compiler)c;
    o->unit_code = u < 0 ? TC_UNIT_CODE_AUTO : (tc_unit_code)u;
    const char *trace = getenv("TASKCACHE_TRACE");
    if (trace && *trace && !(o->trace = strdup(trace))) {
        tc_options_free(o);
        return NULL;
    }
    if (o->bad_compiler_env == ENV_NOMEM || o->bad_unit_code_env == ENV_NOMEM) {
        tc_options_free(o);
        return NULL;
    }
    return o;
}

tc_status tc_options_set_trace(tc_options *o, const char *path)
{
    char *copy = path && *path ? strdup(path) : NULL;
    if (path && *path && !copy)
        return TC_ERR_NOMEM;
    free(o->trace);
    o->trace = copy;
    return TC_OK;
}

tc_status tc_options_check(const tc_options *o, tc_error *err)
{
    tc_clear_error(err);
    if (o->bad_compiler_env)
        return tc_set_error(err, TC_ERR_INVALID,
                            "TASKCACHE_COMPILER is '%s': expected ptxas, inprocess or auto "
                            "(or leave it unset)", o->bad_compiler_env);
    if (o->bad_unit_code_env)
        return tc_set_error(err, TC_ERR_INVALID,
                            "TASKCACHE_UNIT_CODE is '%s': expected whole-program, relocatable "
                            "or auto (or leave it unset)", o->bad_unit_code_env);
    return TC_OK;
}

void tc_options_free(tc_options *o)
{
    if (!o)
        return;
    for (size_t i = 0; i < o->ncopts; i++)
        free(o->copts[i]);
    free(o->copts);
    free(o->ptxas);
    free(o->trace);
    if (o->bad_compiler_env != ENV_NOMEM)
        free(o->bad_compiler_env);
    if (o->bad_unit_code_env != ENV_NOMEM)
        free(o->bad_unit_code_env);
    free(o);
}

tc_status tc_options_set_arch(tc_options *o, const char *arch, tc_error *err)
{
    tc_clear_error(err);
    /* sm_<digits>[a|f]: also keeps the target safe as a directory name */
    size_t n = arch ? strlen(arch) : 0;
    int ok = n >= 4 && n < sizeof o->arch && !strncmp(arch, "sm_", 3);
    size_t i = 3;
    while (ok && i < n && isdigit((unsigned char)arch[i]))
        i++;
    if (ok && (i == 3 || (i < n && !(i + 1 == n && (arch[i] == 'a' || arch[i] == 'f')))))
        ok = 0;
    if (!ok)
        return tc_set_error(err, TC_ERR_INVALID,
                         "invalid target '%s': expected sm_XX with an optional a or f suffix "
                         "(e.g. sm_90, sm_90a)", arch ? arch : "(null)");
    memcpy(o->arch, arch, n + 1);
    return TC_OK;
}

/* Options that taskcache sets itself, or that would change which kernels
 * are built. Both spellings of each. */
static const char *const refused[] = {
    "-c", "--compile-only", "-o", "--output-file", "-arch", "--gpu-name", "-e", "--entry",
    "-h", "--help", "-ias", "--input-as-string", "-version-ls", "--list-version", "-optf",
    "--options-file", "-v", "--verbose", "-V", "--version", "-astoolspatch",
    "--compile-as-tools-patch",
};

tc_status tc_options_add_compiler_option(tc_options *o, const char *opt, tc_error *err)
{
    tc_clear_error(err);
    if (!opt || opt[0] != '-' || !opt[1])
        return tc_set_error(err, TC_ERR_INVALID, "compiler option '%s' does not start with '-'",
                         opt ? opt : "(null)");
    size_t name_len = strcspn(opt, "=");
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (strlen(refused[i]) == name_len && !strncmp(opt, refused[i], name_len))
            return tc_set_error(err, TC_ERR_INVALID,
                             "compiler option '%s' is set by taskcache itself and cannot be "
                             "given", opt);
    /* --split-compile=0 asks for a thread per CPU of the machine (ptxas
     * --help). Relocatable code compiled on threads differs from code
     * compiled on one, while any count from two gives the same code
     * (CUDA 13.0, ptxas -c on the real-world corpus). So where the
     * machine has a single CPU the option means what 1 means, and is kept
     * as that: the key must not let a cache shared with larger machines
     * hand this one their code, nor the reverse. */
    if ((!strcmp(opt, "--split-compile=0") || !strcmp(opt, "-split-compile=0")) &&
        sysconf(_SC_NPROCESSORS_ONLN) < 2)
        opt = "--split-compile=1";
    char **p = realloc(o->copts, (o->ncopts + 1) * sizeof *p);
    if (!p)
        return tc_set_error(err, TC_ERR_NOMEM, "out of memory");
    o->copts = p;
    if (!(o->copts[o->ncopts] = strdup(opt)))
        return tc_set_error(err, TC_ERR_NOMEM, "out of memory");
    o->ncopts++;
    return TC_OK;
}

int tc_options_have(const tc_options *o, const char *const *names)
{
    for (size_t i = 0; i < o->ncopts; i++)
        for (const char *const *n = names; *n; n++) {
            size_t len = strlen(*n);
            if (len && (*n)[len - 1] == '*' ? !strncmp(o->copts[i], *n, len - 1)
                                            : !strcmp(o->copts[i], *n))
                return 1;
        }
    return 0;
}

tc_status tc_options_set_jobs(tc_options *o, int jobs)
{
    if (jobs < 1)
        return TC_ERR_INVALID;
    o->jobs = jobs;
    return TC_OK;
}

tc_status tc_options_set_ptxas(tc_options *o, const char *path)
{
    char *p = path ? strdup(path) : NULL;
    if (path && !p)
        return TC_ERR_NOMEM;
    free(o->ptxas);
    o->ptxas = p;
    return TC_OK;
}

tc_status tc_options_set_tier(tc_options *o, tc_tier tier, int enabled)
{
    if (tier == TC_TIER_MODULE)
        o->module_tier = !!enabled;
    else if (tier == TC_TIER_UNIT)
        o->unit_tier = !!enabled;
    else
        return TC_ERR_INVALID;
    return TC_OK;
}

tc_status tc_options_set_compiler(tc_options *o, tc_compiler c)
{
    if (c != TC_COMPILER_AUTO && c != TC_COMPILER_PTXAS && c != TC_COMPILER_INPROCESS)
        return TC_ERR_INVALID;
    o->compiler = c;
    if (o->bad_compiler_env != ENV_NOMEM) /* the host's choice replaces the variable's */
        free(o->bad_compiler_env);
    o->bad_compiler_env = NULL;
    return TC_OK;
}

int tc_have_inprocess_compiler(void) { return tc_nvptx_available(); }

tc_status tc_options_set_unit_code(tc_options *o, tc_unit_code code)
{
    if (code != TC_UNIT_CODE_RELOCATABLE && code != TC_UNIT_CODE_WHOLE_PROGRAM &&
        code != TC_UNIT_CODE_AUTO)
        return TC_ERR_INVALID;
    o->unit_code = code;
    if (o->bad_unit_code_env != ENV_NOMEM)
        free(o->bad_unit_code_env);
    o->bad_unit_code_env = NULL;
    return TC_OK;
}

tc_status tc_options_set_output(tc_options *o, tc_output output)
{
    if (output != TC_OUTPUT_IMAGE && output != TC_OUTPUT_OBJECT)
        return TC_ERR_INVALID;
    o->output = output;
    return TC_OK;
}

tc_status tc_options_set_exact_whole(tc_options *o, int on)
{
    o->exact_whole = on != 0;
    return TC_OK;
}

tc_status tc_options_set_inprocess_threads(tc_options *o, int on)
{
    o->inprocess_threads = on != 0;
    return TC_OK;
}

tc_status tc_options_set_inprocess_crashed(tc_options *o, int crashed)
{
    o->inprocess_crashed = crashed != 0;
    return TC_OK;
}

tc_status tc_options_set_cancel(tc_options *o, const volatile sig_atomic_t *flag)
{
    o->cancel = flag;
    return TC_OK;
}

tc_status tc_options_set_progress(tc_options *o, tc_progress_fn fn, void *user)
{
    o->progress = fn;
    o->progress_user = user;
    return TC_OK;
}

tc_status tc_options_set_split(tc_options *o, int enabled)
{
    o->split = !!enabled;
    return TC_OK;
}

tc_status tc_options_set_unit_cost(tc_options *o, unsigned cost)
{
    o->unit_cost = cost;
    return TC_OK;
}
