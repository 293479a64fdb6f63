/* ptxas_args: the ptxas command-line reader of `taskcache ptxas` (see
 * ptxas_args.h for the rule it follows). */
#define _POSIX_C_SOURCE 200809L
#include "cli/ptxas_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"

/* What a word of the command line can be. */
enum opt_id {
    O_ARCH, O_OUTPUT, O_MACHINE, O_OPT_LEVEL, O_MAXRREG, O_FMAD, O_REG_ALLOC, O_EXPENSIVE,
    O_OPTIONS_FILE,                                                                 /* valued */
    O_VALUED_END,
    O_LINEINFO = O_VALUED_END, O_DEBUG, O_SUPPRESS_DEBUG, O_NO_BB_MERGE, O_RET_END, /* code */
    O_COMPILE_ONLY,                                                                 /* output */
    O_VERBOSE, O_WARN_SPILLS, O_WARN_LMEM, O_HELP,                                  /* report */
    O_VERSION,                                                                      /* passed */
    O_COUNT
};

/* Every option taken, in ptxas's two spellings, tried in this order
 * ("-maxrregcount" before "-m", whose value may be attached). Options that
 * only change what is printed (-v, --warn-on-*) are kept out of the key:
 * the report is made from the metadata every record carries. */
static const struct opt {
    const char *shrt, *lng;
    enum opt_id id;
} opts[] = {
    {"-arch", "--gpu-name", O_ARCH},
    {"-o", "--output-file", O_OUTPUT},
    {"-maxrregcount", "--maxrregcount", O_MAXRREG},
    {"-m", "--machine", O_MACHINE},
    {"-O", "--opt-level", O_OPT_LEVEL},
    {"-fmad", "--fmad", O_FMAD},
    {"-regAllocOptLevel", "--regAllocOptLevel", O_REG_ALLOC},   /* Triton 3.9 (not in -h) */
    {"-allow-expensive-optimizations", "--allow-expensive-optimizations", O_EXPENSIVE},
    {"-optf", "--options-file", O_OPTIONS_FILE},
    {"-lineinfo", "--generate-line-info", O_LINEINFO},
    {"-g", "--device-debug", O_DEBUG},
    {"-suppress-debug-info", "--suppress-debug-info", O_SUPPRESS_DEBUG}, /* Triton */
    {"-no-bb-merge", "--dont-merge-basicblocks", O_NO_BB_MERGE},        /* clang -g */
    {"-ret-end", "--return-at-end", O_RET_END},                         /* clang -g */
    {"-v", "--verbose", O_VERBOSE},
    {"-warn-spills", "--warn-on-spills", O_WARN_SPILLS},
    {"-warn-lmem-usage", "--warn-on-local-memory-usage", O_WARN_LMEM},
    {"-h", "--help", O_HELP},
    {"-c", "--compile-only", O_COMPILE_ONLY},
    {"-V", "--version", O_VERSION},
};

/* Options files may name options files; ptxas follows them, and so do
 * we, this deep (a file that names itself goes to ptxas, which says so). */
#define MAX_FILE_DEPTH 4

typedef struct parse {
    px_args *a;
    px_read_fn read;
    void *ctx;
    const char *value[O_VALUED_END]; /* each valued option's value, once given */
    int flag[O_COUNT];
    size_t inputs;
    int depth;                       /* of options files being read */
} parse;

static void pass(parse *p, const char *why, const char *word)
{
    if (p->a->pass)
        return; /* the first reason is the one to tell */
    snprintf(p->a->reason, sizeof p->a->reason, why, word);
    p->a->pass = p->a->reason;
}

static char *own(parse *p, const char *s, size_t n)
{
    char **grown = realloc(p->a->owned, (p->a->nowned + 1) * sizeof *grown);
    char *copy = malloc(n + 1);
    if (grown)
        p->a->owned = grown;
    if (!grown || !copy) {
        free(copy);
        p->a->oom = 1;
        pass(p, "%s", "out of memory");
        return NULL;
    }
    memcpy(copy, s, n);
    copy[n] = '\0';
    p->a->owned[p->a->nowned++] = copy;
    return copy;
}

static void parse_words(parse *p, int argc, char *const *argv, int depth);

/* Splits an options file as ptxas does: white space separates words,
 * double quotes group (and vanish). A backslash, a NUL or an open quote
 * is a form whose reading was not checked against ptxas: the command
 * goes there. */
static void parse_options_file(parse *p, const char *path, int depth)
{
    size_t len = 0;
    char *text = p->read(p->ctx, path, &len);
    if (!text) {
        pass(p, "options file '%s' cannot be read (ptxas says why)", path);
        return;
    }
    char **words = NULL;
    size_t nwords = 0;
    char *word = malloc(len + 1);
    int quoted = 0, in_word = 0;
    size_t w = 0;
    if (!word) {
        p->a->oom = 1;
        pass(p, "%s", "out of memory");
    }
    for (size_t i = 0; word && i <= len && !p->a->pass; i++) {
        char c = i < len ? text[i] : ' ';
        if (c == '\\' || c == '\0' || c == '\f' || c == '\v') {
            /* ptxas does not split words at \f or \v as C's isspace does */
            pass(p, "options file '%s' holds a backslash, a NUL byte, a form feed or a "
                    "vertical tab", path);
        } else if (c == '"') {
            quoted = !quoted;
            in_word = 1;
        } else if (!quoted && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
            if (in_word) {
                char *s = own(p, word, w);
                char **grown = s ? realloc(words, (nwords + 1) * sizeof *words) : NULL;
                if (s && !grown) {
                    p->a->oom = 1;
                    pass(p, "%s", "out of memory");
                }
                if (grown) {
                    words = grown;
                    words[nwords++] = s;
                }
            }
            in_word = 0;
            w = 0;
        } else {
            word[w++] = c;
            in_word = 1;
        }
    }
    if (quoted)
        pass(p, "options file '%s' has an unclosed quote", path);
    free(word);
    free(text);
    if (!p->a->pass)
        parse_words(p, (int)nwords, words, depth + 1);
    free(words);
}

/* A valued option met: its value, checked where ptxas's reading is known. */
static void take_value(parse *p, const struct opt *o, const char *word, const char *v)
{
    if (!*v) {
        pass(p, "option '%s' without a value", word);
        return;
    }
    if (o->id == O_OPTIONS_FILE) {
        /* "-optf a,b": both files, in order */
        const char *s = v;
        while (!p->a->pass) {
            size_t n = strcspn(s, ",");
            char *path = own(p, s, n);
            if (path)
                parse_options_file(p, path, p->depth);
            if (!s[n])
                break;
            s += n + 1;
        }
        return;
    }
    if (p->value[o->id] && strcmp(p->value[o->id], v)) {
        /* ptxas takes the last value and warns: its warning is its own */
        pass(p, "option '%s' given twice with different values", word);
        return;
    }
    p->value[o->id] = v;
}

/* Matches word against one option; 1 when it is that option (taken). */
static int match(parse *p, int argc, char *const *argv, int *i, const struct opt *o)
{
    const char *word = argv[*i];
    int valued = o->id < O_VALUED_END;
    if (!valued) {
        if (strcmp(word, o->shrt) && strcmp(word, o->lng))
            return 0;
        p->flag[o->id] = 1;
        return 1;
    }
    /* "-O3" and "-m64" carry their value; "-O 3" does not mean -O3 to ptxas
     * (3 becomes an input), so a bare -O is left to it */
    int attached = o->id == O_OPT_LEVEL || o->id == O_MACHINE;
    if (o->id == O_OPT_LEVEL && !strcmp(word, "-O")) {
        pass(p, "option '%s' without an attached level", word);
        return 1;
    }
    const char *v = cli_value_of(argc, (char **)argv, i, o->shrt, attached);
    if (!v)
        v = cli_value_of(argc, (char **)argv, i, o->lng, 0);
    if (!v)
        return 0;
    take_value(p, o, word, v);
    return 1;
}

static void parse_words(parse *p, int argc, char *const *argv, int depth)
{
    if (depth > MAX_FILE_DEPTH) {
        pass(p, "%s", "options files nested too deep");
        return;
    }
    for (int i = 0; i < argc && !p->a->pass; i++) {
        const char *word = argv[i];
        if (word[0] != '-' || !word[1]) {
            if (word[0] == '-' || p->inputs++)
                pass(p, "%s", "not exactly one input file");
            else
                p->a->input = word;
            continue;
        }
        size_t k = 0;
        p->depth = depth; /* a file named here is read one deeper */
        for (; k < sizeof opts / sizeof opts[0]; k++)
            if (match(p, argc, argv, &i, &opts[k]))
                break;
        if (k == sizeof opts / sizeof opts[0])
            pass(p, "option '%s' is not one taskcache caches", word);
    }
}

static void add_copt(px_args *a, const char *fmt, const char *value)
{
    char buf[128];
    snprintf(buf, sizeof buf, fmt, value);
    char **grown = realloc(a->copts, (a->ncopts + 1) * sizeof *grown);
    char *s = strdup(buf);
    if (grown)
        a->copts = grown;
    if (!grown || !s) {
        free(s);
        a->oom = 1;
        return;
    }
    a->copts[a->ncopts++] = s;
}

static int all_digits(const char *s)
{
    if (!*s || strlen(s) > 8)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

/* The values, checked; the code options in one fixed order, so that the
 * same options given in another order make the same key. */
static void finish(parse *p)
{
    px_args *a = p->a;
    const char *const *v = p->value;
    if (p->flag[O_VERSION])
        pass(p, "%s", "--version: ptxas answers it");
    if (p->flag[O_HELP])
        pass(p, "%s", "--help: ptxas's own");
    if (!v[O_ARCH])
        pass(p, "%s", "no -arch (ptxas's default target)");
    else if (strncmp(v[O_ARCH], "sm_", 3))
        pass(p, "target '%s' is virtual: ptxas only checks the syntax, as fast as a cache "
                "lookup", v[O_ARCH]);
    if (v[O_MACHINE] && strcmp(v[O_MACHINE], "64"))
        pass(p, "-m%s", v[O_MACHINE]);
    if (v[O_OPT_LEVEL] && !(strlen(v[O_OPT_LEVEL]) == 1 && v[O_OPT_LEVEL][0] >= '0' &&
                            v[O_OPT_LEVEL][0] <= '3'))
        pass(p, "optimization level '%s'", v[O_OPT_LEVEL]);
    if (v[O_MAXRREG] && !all_digits(v[O_MAXRREG]))
        pass(p, "-maxrregcount '%s'", v[O_MAXRREG]);
    if (v[O_FMAD] && strcmp(v[O_FMAD], "true") && strcmp(v[O_FMAD], "false"))
        pass(p, "--fmad '%s'", v[O_FMAD]);
    if (v[O_REG_ALLOC] && !all_digits(v[O_REG_ALLOC]))
        pass(p, "--regAllocOptLevel '%s'", v[O_REG_ALLOC]);
    if (v[O_EXPENSIVE] && strcmp(v[O_EXPENSIVE], "true") && strcmp(v[O_EXPENSIVE], "false"))
        pass(p, "--allow-expensive-optimizations '%s'", v[O_EXPENSIVE]);
    if (!a->input)
        pass(p, "%s", "no input file");
    a->arch = v[O_ARCH];
    a->output = v[O_OUTPUT];
    a->compile_only = p->flag[O_COMPILE_ONLY];
    a->verbose = p->flag[O_VERBOSE];
    a->warn_spills = p->flag[O_WARN_SPILLS];
    a->warn_lmem = p->flag[O_WARN_LMEM];
    a->help = p->flag[O_HELP];
    if (a->pass)
        return;
    if (v[O_OPT_LEVEL])
        add_copt(a, "-O%s", v[O_OPT_LEVEL]);
    if (v[O_MAXRREG])
        add_copt(a, "--maxrregcount=%s", v[O_MAXRREG]);
    if (v[O_FMAD])
        add_copt(a, "--fmad=%s", v[O_FMAD]);
    if (v[O_REG_ALLOC])
        add_copt(a, "--regAllocOptLevel=%s", v[O_REG_ALLOC]);
    if (v[O_EXPENSIVE])
        add_copt(a, "--allow-expensive-optimizations=%s", v[O_EXPENSIVE]);
    static const struct {
        enum opt_id id;
        const char *opt;
    } code_flags[] = {{O_LINEINFO, "-lineinfo"},
                      {O_DEBUG, "-g"},
                      {O_SUPPRESS_DEBUG, "-suppress-debug-info"},
                      {O_NO_BB_MERGE, "--dont-merge-basicblocks"},
                      {O_RET_END, "--return-at-end"}};
    for (size_t k = 0; k < sizeof code_flags / sizeof code_flags[0]; k++)
        if (p->flag[code_flags[k].id])
            add_copt(a, "%s", code_flags[k].opt);
    if (a->oom)
        pass(p, "%s", "out of memory");
}

void px_parse(int argc, char *const *argv, px_read_fn read, void *ctx, px_args *out)
{
    memset(out, 0, sizeof *out);
    parse p;
    memset(&p, 0, sizeof p);
    p.a = out;
    p.read = read;
    p.ctx = ctx;
    parse_words(&p, argc, argv, 0);
    finish(&p);
}

void px_free(px_args *a)
{
    for (size_t i = 0; i < a->ncopts; i++)
        free(a->copts[i]);
    free(a->copts);
    for (size_t i = 0; i < a->nowned; i++)
        free(a->owned[i]);
    free(a->owned);
    memset(a, 0, sizeof *a);
}
