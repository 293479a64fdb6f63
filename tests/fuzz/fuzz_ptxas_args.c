/* libFuzzer target: the ptxas command-line reader of `taskcache ptxas`
 * (src/cli/ptxas_args.c). The input is a command line and an options
 * file: words separated by NUL bytes, then, after a blank word (two NULs),
 * the text every options file reads as. Checks: the reader ends cleanly on
 * anything; a command it takes has one input, an sm_ target and only the
 * code options it knows; and it is a fixed point: the command written back
 * in canonical form (one spelling, one order) is taken again with the very
 * same code options. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ptxas_args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct file {
    const char *text;
    size_t len;
} file;

static char *read_file(void *ctx, const char *path, size_t *len)
{
    const file *f = ctx;
    if (!strcmp(path, "missing"))
        return NULL; /* a file that cannot be read */
    char *copy = malloc(f->len ? f->len : 1);
    if (copy && f->len)
        memcpy(copy, f->text, f->len);
    *len = f->len;
    return copy;
}

static const char *const known[] = {"-O0", "-O1", "-O2", "-O3", "--fmad=true", "--fmad=false",
                                    "--allow-expensive-optimizations=true",
                                    "--allow-expensive-optimizations=false",
                                    "-lineinfo", "-g", "-suppress-debug-info",
                                    "--dont-merge-basicblocks", "--return-at-end"};

static int is_known(const char *opt)
{
    const char *d = !strncmp(opt, "--maxrregcount=", 15)       ? opt + 15
                    : !strncmp(opt, "--regAllocOptLevel=", 19) ? opt + 19
                                                               : NULL;
    if (d) {
        if (!*d)
            return 0;
        for (; *d; d++)
            if (*d < '0' || *d > '9')
                return 0;
        return 1;
    }
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(opt, known[i]))
            return 1;
    return 0;
}

/* The command a taken command stands for, in one spelling and order. */
static int canonical(const px_args *a, char **words)
{
    int n = 0;
    words[n++] = (char *)"--gpu-name";
    words[n++] = (char *)a->arch;
    for (size_t i = 0; i < a->ncopts; i++)
        words[n++] = a->copts[i];
    if (a->output) {
        words[n++] = (char *)"-o";
        words[n++] = (char *)a->output;
    }
    if (a->compile_only)
        words[n++] = (char *)"--compile-only";
    if (a->verbose)
        words[n++] = (char *)"-v";
    if (a->warn_spills)
        words[n++] = (char *)"--warn-on-spills";
    if (a->warn_lmem)
        words[n++] = (char *)"--warn-on-local-memory-usage";
    words[n++] = (char *)a->input;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *text = malloc(size + 1);
    char **argv = malloc((size + 1) * sizeof *argv);
    if (!text || !argv) {
        free(text);
        free(argv);
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    /* words up to an empty one; the rest is the options files' text */
    int argc = 0;
    size_t i = 0;
    while (i < size && text[i]) {
        argv[argc++] = text + i;
        i += strlen(text + i) + 1;
    }
    file f = {i + 1 < size ? text + i + 1 : "", i + 1 < size ? size - i - 1 : 0};

    px_args a;
    px_parse(argc, argv, read_file, &f, &a);
    if (!a.pass) {
        if (!a.input || !a.arch || strncmp(a.arch, "sm_", 3) || a.ncopts > 8)
            abort();
        for (size_t k = 0; k < a.ncopts; k++)
            if (!is_known(a.copts[k]))
                abort();
        char *words[32];
        int n = canonical(&a, words);
        px_args b;
        px_parse(n, words, read_file, &f, &b);
        if (b.pass || b.ncopts != a.ncopts || strcmp(b.arch, a.arch) ||
            strcmp(b.input, a.input) || (!a.output) != (!b.output) ||
            (a.output && strcmp(a.output, b.output)) || b.verbose != a.verbose ||
            b.warn_spills != a.warn_spills || b.warn_lmem != a.warn_lmem ||
            b.compile_only != a.compile_only)
            abort();
        for (size_t k = 0; k < a.ncopts; k++)
            if (strcmp(a.copts[k], b.copts[k]))
                abort();
        px_free(&b);
    }
    px_free(&a);
    free(argv);
    free(text);
    return 0;
}
