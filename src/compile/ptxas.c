/* ptxas: running ptxas and reading its output (see ptxas.h). */
#include "compile/ptxas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toolchain/spawn.h"
#include "util/fs.h"
#include "util/map.h"

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

/* The decimal number at p (digits only, none past end: a log is not
 * NUL-terminated, and strtoul would skip a newline to read the next line's
 * number); *after is where its digits end (p when there are none). */
static uint32_t number_at(const char *p, const char *end, const char **after)
{
    uint64_t v = 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++)
        if ((v = v * 10 + (uint64_t)(*p - '0')) > UINT32_MAX)
            v = UINT32_MAX;
    *after = p;
    return (uint32_t)v;
}

int32_t tc_ptxas_number_before(const char *line, size_t n, const char *needle)
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
    const char *after;
    return (int32_t)number_at(d, e, &after);
}

/* ---- the -v report ------------------------------------------------------------- */

/* How a line of a -v log reads: info (after "ptxas info    : "), a
 * continuation of the previous line (in ptxas's form, four spaces; the
 * in-process compiler writes "ptxas         .     " for them), or
 * anything else (warnings, errors: diagnostics, not the report). */
enum { L_OTHER, L_INFO, L_MORE };

static int classify(const char *p, size_t n, const char **text, size_t *tlen)
{
    static const char info[] = "ptxas info    : ";
    size_t k = sizeof info - 1;
    if (n >= 4 && !memcmp(p, "    ", 4)) {
        *text = p + 4;
        *tlen = n - 4;
        return L_MORE;
    }
    if (n > k && !memcmp(p, info, k)) {
        *text = p + k;
        *tlen = n - k;
        return L_INFO;
    }
    size_t i = 5;
    if (n < i || memcmp(p, "ptxas", 5) != 0)
        return L_OTHER;
    while (i < n && p[i] == ' ')
        i++;
    if (i == 5 || i >= n || p[i] != '.')
        return L_OTHER;
    for (i++; i < n && p[i] == ' '; i++)
        ;
    *text = p + i;
    *tlen = n - i;
    return L_MORE;
}

static int starts(const char *p, size_t n, const char *prefix)
{
    size_t k = strlen(prefix);
    return n >= k && !memcmp(p, prefix, k);
}

/* The name quoted after `after` in the line ("... for 'K' with ..."), or
 * NULL. */
static const char *quoted(const char *p, size_t n, const char *after, size_t *len)
{
    const char *at = find_in(p, n, after);
    if (!at)
        return NULL;
    const char *name = at + strlen(after);
    const char *end = memchr(name, '\'', (size_t)(p + n - name));
    if (!end)
        return NULL;
    *len = (size_t)(end - name);
    return name;
}

/* A line printed before the compile report (a register limit ptxas
 * overrides), with the kernel it names, if any. */
typedef struct head_line {
    const char *text;
    size_t len;
    const char *name;
    size_t nlen;
} head_line;

typedef struct report_parse {
    tc_ptxas_report *out;
    head_line *heads;
    size_t nheads, cap_heads;
    tc_sb lead;     /* report lines before the first kernel's (-c: functions) */
    int started;    /* the report proper has begun */
    int own;        /* the next stack line is the current kernel's own */
} report_parse;

static tc_ptxas_kernel *new_kernel(tc_ptxas_report *r, const char *name, size_t nlen)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 16;
        tc_ptxas_kernel *k = realloc(r->kernels, cap * sizeof *k);
        if (!k)
            return NULL;
        r->kernels = k;
        r->cap = cap;
    }
    tc_ptxas_kernel *k = &r->kernels[r->n];
    memset(k, 0, sizeof *k);
    if (!(k->name = malloc(nlen + 1)))
        return NULL;
    memcpy(k->name, name, nlen);
    k->name[nlen] = '\0';
    k->res = (tc_ptxas_res){-1, -1, -1, -1, -1};
    r->n++;
    return k;
}

static int add_head(report_parse *x, const char *line, size_t n, const char *text, size_t tlen)
{
    if (x->nheads == x->cap_heads) {
        size_t cap = x->cap_heads ? 2 * x->cap_heads : 16;
        head_line *h = realloc(x->heads, cap * sizeof *h);
        if (!h)
            return -1;
        x->heads = h;
        x->cap_heads = cap;
    }
    head_line *h = &x->heads[x->nheads++];
    *h = (head_line){line, n, NULL, 0};
    h->name = quoted(text, tlen, " for '", &h->nlen);
    return 0;
}

/* A kernel's own figures, from its lines ("Function properties for K" and
 * the stack line after it; "Used N registers, ..."). */
static void take_figures(report_parse *x, tc_ptxas_kernel *k, int kind, const char *t,
                         size_t n)
{
    size_t nlen;
    const char *name;
    if (kind == L_INFO && starts(t, n, "Function properties for ")) {
        name = t + strlen("Function properties for ");
        nlen = (size_t)(t + n - name);
        while (nlen && name[nlen - 1] == ' ')
            nlen--;
        x->own = nlen == strlen(k->name) && !memcmp(name, k->name, nlen);
    } else if (kind == L_MORE && x->own && find_in(t, n, "bytes stack frame")) {
        k->res.stack_bytes = tc_ptxas_number_before(t, n, "bytes stack frame");
        k->res.spill_store_bytes = tc_ptxas_number_before(t, n, "bytes spill stores");
        k->res.spill_load_bytes = tc_ptxas_number_before(t, n, "bytes spill loads");
        x->own = 0;
    } else if (kind == L_INFO && starts(t, n, "Used ") && k->res.registers < 0) {
        k->res.registers = tc_ptxas_number_before(t, n, "registers");
        int32_t smem = tc_ptxas_number_before(t, n, "bytes smem");
        k->res.shared_bytes = smem < 0 ? 0 : smem;
    }
}

/* One line of the log. */
static int parse_line(report_parse *x, const char *p, size_t n)
{
    const char *t;
    size_t tlen;
    int kind = classify(p, n, &t, &tlen);
    if (kind == L_OTHER)
        return 0;
    if (kind == L_INFO && tlen > 3 && t[0] == '(' && t[1] == 'C' && t[2] >= '0' && t[2] <= '9')
        return 0; /* numbered advice: a diagnostic (tc_ptxas_diagnostics) */
    if (kind == L_INFO && find_in(t, tlen, " bytes gmem") && tlen && t[0] >= '0' && t[0] <= '9') {
        x->started = 1; /* the module's memory: read from the image instead */
        return 0;
    }
    size_t nlen;
    const char *name = kind == L_INFO && starts(t, tlen, "Compiling entry function ")
                           ? quoted(t, tlen, "function '", &nlen)
                           : NULL;
    if (name) {
        if (!new_kernel(x->out, name, nlen))
            return -1;
        x->started = 1;
        x->own = 0;
    } else if (!x->started && kind == L_MORE) {
        return 0; /* the rest of a diagnostic */
    } else if (!x->started && !starts(t, tlen, "Function properties for ")) {
        return add_head(x, p, n, t, tlen);
    }
    x->started = 1;
    tc_ptxas_kernel *k = x->out->n ? &x->out->kernels[x->out->n - 1] : NULL;
    tc_sb *to = k ? &k->body : &x->lead;
    if (kind == L_MORE)
        tc_sb_puts(to, "    ");
    else
        tc_sb_puts(to, "ptxas info    : ");
    tc_sb_append(to, t, tlen);
    tc_sb_putc(to, '\n');
    if (k)
        take_figures(x, k, kind, t, tlen);
    return 0;
}

/* Whether sb holds the line [text, text + len). */
static int has_line(const tc_sb *sb, const char *text, size_t len)
{
    if (!sb->data)
        return 0;
    for (const char *p = sb->data, *end = p + sb->len; p < end;) {
        size_t n = line_len(p, end);
        if (n == len && !memcmp(p, text, len))
            return 1;
        p += n + 1;
    }
    return 0;
}

/* The lines before the report go to the kernels they are about. They come
 * in the report's order of kernels; a line that names none ("Overriding
 * global maxrregcount 32 with entry-specific value 40 of .maxnreg") belongs
 * to a kernel after the last one named: put with the next, it is printed
 * where ptxas printed it. ptxas -ewp prints them all twice: a kernel keeps
 * each once. */
static int place_heads(report_parse *x)
{
    tc_ptxas_report *r = x->out;
    tc_map names = {0}; /* kernel name -> index; keys are the kernels' names */
    for (size_t i = 0; i < r->n && x->nheads; i++)
        if (tc_map_put(&names, r->kernels[i].name, strlen(r->kernels[i].name),
                       (uint32_t)i) < 0) {
            tc_map_free(&names);
            return -1;
        }
    size_t next = 0;
    for (size_t i = 0; i < x->nheads && r->n; i++) {
        const head_line *h = &x->heads[i];
        uint32_t *named = h->name ? tc_map_get(&names, h->name, h->nlen) : NULL;
        size_t at = named ? *named : next < r->n ? next : r->n - 1;
        tc_sb *head = &r->kernels[at].head;
        if (!has_line(head, h->text, h->len)) {
            tc_sb_append(head, h->text, h->len);
            tc_sb_putc(head, '\n');
        }
        next = at + 1;
    }
    tc_map_free(&names);
    return 0;
}

void tc_ptxas_report_free(tc_ptxas_report *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->kernels[i].name);
        tc_sb_free(&r->kernels[i].head);
        tc_sb_free(&r->kernels[i].body);
    }
    free(r->kernels);
    memset(r, 0, sizeof *r);
}

int tc_ptxas_parse_report(const char *log, size_t len, tc_ptxas_report *out)
{
    memset(out, 0, sizeof *out);
    report_parse x;
    memset(&x, 0, sizeof x);
    x.out = out;
    int rc = 0;
    for (const char *p = log, *end = log + len; p < end && rc == 0;) {
        size_t n = line_len(p, end), used = n;
        while (n && p[n - 1] == '\r')
            n--;
        rc = parse_line(&x, p, n);
        p += used + (p + used < end);
    }
    if (rc == 0 && (rc = place_heads(&x)) == 0) {
        if (x.lead.len && out->n) { /* put before the first kernel's lines */
            tc_sb *b = &out->kernels[0].body;
            tc_sb_append(&x.lead, b->data, b->len);
            tc_sb_free(b);
            *b = x.lead;
            memset(&x.lead, 0, sizeof x.lead);
        }
        rc = x.lead.oom ? -1 : 0;
        for (size_t i = 0; i < out->n; i++)
            if (out->kernels[i].head.oom || out->kernels[i].body.oom)
                rc = -1;
    }
    tc_sb_free(&x.lead);
    free(x.heads);
    if (rc != 0)
        tc_ptxas_report_free(out);
    return rc;
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
    const char *num = at ? at + strlen("around line ") : NULL, *after = num;
    uint32_t l = num ? number_at(num, line + n, &after) : 0;
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
            const char *after;
            uint32_t l = number_at(ln + 7, colon, &after);
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
