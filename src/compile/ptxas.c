/* ptxas: running ptxas and reading its output (see ptxas.h). */
#include "compile/ptxas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toolchain/spawn.h"
#include "util/fs.h"

const char *tc_out_option(tc_out_kind kind)
{
    return kind == TC_OUT_OBJECT ? "--compile-only"
           : kind == TC_OUT_EWP  ? "--extensible-whole-program"
                                 : "";
}

int tc_ptxas_run(tc_ptxas_job *job)
{
    size_t argc = 0;
    char **argv = calloc(job->nopts + 10, sizeof *argv);
    if (!argv)
        return -1;
    char arch[64];
    snprintf(arch, sizeof arch, "-arch=%s", job->arch);
    argv[argc++] = (char *)job->ptxas;
    argv[argc++] = arch;
    if (job->kind != TC_OUT_CUBIN)
        argv[argc++] = (char *)tc_out_option(job->kind);
    argv[argc++] = (char *)"-v";
    for (size_t i = 0; i < job->nopts; i++)
        argv[argc++] = job->opts[i];
    argv[argc++] = (char *)"-o";
    argv[argc++] = (char *)job->out_path;
    argv[argc++] = (char *)job->ptx_path;
    argv[argc] = NULL;
    int rc = tc_spawn(argv, job->log_path, NULL, &job->exit_code);
    free(argv);
    if (rc != 0)
        return -1;
    char *data;
    size_t len;
    if (tc_read_file(job->log_path, 0, &data, &len) == 0) {
        tc_sb_append(&job->log, data, len);
        free(data);
    }
    if (job->exit_code == 0) {
        if (tc_read_file(job->out_path, 0, &data, &len) != 0) {
            tc_sb_printf(&job->log, "ptxas fatal   : produced no output file\n");
            job->exit_code = 1;
        } else {
            tc_sb_append(&job->output, data, len);
            free(data);
        }
    }
    return 0;
}

/* Iterates over lines; returns the length of the line at p (without \n). */
static size_t line_len(const char *p, const char *end)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    return nl ? (size_t)(nl - p) : (size_t)(end - p);
}

static const char *find_in(const char *p, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(p + i, needle, k))
            return p + i;
    return NULL;
}

/* The integer just before `needle` in the line ("24 registers" -> 24). */
static int32_t number_before(const char *line, size_t n, const char *needle)
{
    const char *at = find_in(line, n, needle);
    if (!at)
        return -1;
    const char *d = at;
    while (d > line && d[-1] == ' ')
        d--;
    const char *e = d;
    while (d > line && d[-1] >= '0' && d[-1] <= '9')
        d--;
    if (d == e)
        return -1;
    return (int32_t)strtol(d, NULL, 10);
}

void tc_ptxas_parse_resources(const char *log, size_t len,
                              void (*fn)(void *ctx, const char *name, size_t nlen,
                                         const tc_ptxas_res *res),
                              void *ctx)
{
    const char *p = log, *end = log + len;
    const char *name = NULL;
    size_t nlen = 0;
    tc_ptxas_res res;
    int have = 0;
    while (p < end) {
        size_t n = line_len(p, end);
        const char *at;
        if ((at = find_in(p, n, "Function properties for ")) != NULL) {
            if (have && name)
                fn(ctx, name, nlen, &res);
            name = at + strlen("Function properties for ");
            nlen = (size_t)(p + n - name);
            while (nlen && (name[nlen - 1] == ' ' || name[nlen - 1] == '\r'))
                nlen--;
            res = (tc_ptxas_res){-1, -1, -1, -1, -1};
            have = 1;
        } else if (have && find_in(p, n, "bytes stack frame")) {
            res.stack_bytes = number_before(p, n, "bytes stack frame");
            res.spill_store_bytes = number_before(p, n, "bytes spill stores");
            res.spill_load_bytes = number_before(p, n, "bytes spill loads");
        } else if (have && find_in(p, n, "Used ") && find_in(p, n, " registers")) {
            res.registers = number_before(p, n, "registers");
            int32_t smem = number_before(p, n, "bytes smem");
            res.shared_bytes = smem < 0 ? 0 : smem;
        }
        p += n + (p + n < end);
    }
    if (have && name)
        fn(ctx, name, nlen, &res);
}

/* ptxas's numbered advice ("ptxas info    : (C7511) Potential Performance
 * Loss: ..."), which it prints without -v, as "input: info: (C7511) ...";
 * the rest of its info lines are -v's report, made from the records. The
 * line the advice names ("around line 20") is mapped like an error's. */
static void advice(const char *line, size_t n, const tc_text *map, const char *input_name,
                   tc_sb *out)
{
    const char *msg = find_in(line, n, ": (C");
    if (!msg || msg + 4 >= line + n || msg[4] < '0' || msg[4] > '9')
        return;
    msg += 2;
    size_t mlen = (size_t)(line + n - msg);
    const char *at = find_in(msg, mlen, "around line ");
    const char *num = at ? at + strlen("around line ") : NULL;
    char *after = NULL;
    uint32_t l = num ? (uint32_t)strtoul(num, &after, 10) : 0;
    if (!map || !num || after == num)
        tc_sb_printf(out, "%s: info: %.*s\n", input_name, (int)mlen, msg);
    else
        tc_sb_printf(out, "%s: info: %.*s%u%.*s\n", input_name, (int)(num - msg), msg,
                     tc_text_map_line(map, l), (int)(line + n - after), after);
}

size_t tc_ptxas_diagnostics(const char *log, size_t len, const tc_text *map,
                            const char *input_name, tc_sb *out)
{
    const char *p = log, *end = log + len;
    size_t errors = 0;
    while (p < end) {
        size_t n = line_len(p, end);
        const char *line = p;
        p += n + (p + n < end);
        if (n < 6 || memcmp(line, "ptxas ", 6) != 0)
            continue;
        if (find_in(line, n, "ptxas info")) {
            advice(line, n, map, input_name, out);
            continue;
        }
        /* "ptxas FILE, line N; error   : MESSAGE" or "ptxas fatal   : MESSAGE" */
        const char *colon = find_in(line, n, ": ");
        if (!colon)
            continue;
        const char *msg = colon + 2;
        size_t mlen = (size_t)(line + n - msg);
        const char *kind = "error";
        if (find_in(line, (size_t)(colon - line), "warning"))
            kind = "warning";
        const char *ln = find_in(line, (size_t)(colon - line), ", line ");
        uint32_t in_line = 0;
        if (ln) {
            uint32_t l = (uint32_t)strtoul(ln + 7, NULL, 10);
            in_line = map ? tc_text_map_line(map, l) : l;
        }
        if (!strcmp(kind, "error")) {
            if (find_in(msg, mlen, "Ptx assembly aborted due to errors") && errors)
                continue; /* noise after the real errors */
            errors++;
        }
        if (in_line)
            tc_sb_printf(out, "%s:%u: %s: %.*s\n", input_name, in_line, kind, (int)mlen, msg);
        else
            tc_sb_printf(out, "%s: %s: %.*s\n", input_name, kind, (int)mlen, msg);
    }
    return errors;
}
