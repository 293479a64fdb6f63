/* libFuzzer target: what the compiler and the linker write, as taskcache
 * reads it. Arbitrary bytes as a ptxas log (a -v report, errors, warnings,
 * numbered advice), read by the report parser and by the diagnostics
 * mapper with and without a unit's line map; and as an ELF file, walked by
 * section, by symbol and by .nv.info attribute. Logs and images come from
 * the compiler or from records, never from the user, but a record written
 * by another taskcache or a compiler of another release must still be read
 * cleanly. Checks: everything a reader hands back lies inside the input;
 * every line the mapper writes names the input, ends in a newline and
 * comes from one line of the log, and as many of them say "error" as it
 * counted; every kernel of a report is named in the log, and its lines end
 * in newlines. */
#define _GNU_SOURCE /* memmem */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compile/ptxas.h"
#include "link/elf.h"
#include "ptx/slice.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t *in_begin, *in_end;

static void inside(const void *p, uint64_t n)
{
    const uint8_t *b = p;
    if (n && (b < in_begin || b > in_end || n > (uint64_t)(in_end - b)))
        abort();
}

static int section_seen(void *ctx, const tc_elf_section *s)
{
    (void)ctx;
    inside(s->name, s->name_len);
    if (s->data)
        inside(s->data, s->size);
    return 0;
}

static int symbol_seen(void *ctx, const tc_elf_sym *s)
{
    (void)ctx;
    inside(s->name, s->len);
    inside(s->section, s->section_len);
    return 0;
}

static int attr_seen(void *ctx, uint8_t attr, const char *sym, size_t len, uint32_t value)
{
    (void)ctx;
    (void)attr;
    (void)value;
    inside(sym, len);
    return 0;
}

static int kernel_seen(void *ctx, const char *name, size_t len)
{
    (void)ctx;
    inside(name, len);
    return 0;
}

#define INPUT "in.ptx"

static void check_diagnostics(const char *log, size_t len, const tc_text *map)
{
    tc_sb out = TC_SB_INIT;
    size_t errors = tc_ptxas_diagnostics(log, len, map, INPUT, &out);
    if (out.oom)
        abort();
    size_t log_lines = 1, lines = 0, said = 0;
    for (size_t i = 0; i < len; i++)
        log_lines += log[i] == '\n';
    const char *text = out.data ? out.data : "";
    for (const char *p = text, *end = p + out.len; p < end; lines++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl || strncmp(p, INPUT ":", sizeof INPUT))
            abort();
        const char *q = p + sizeof INPUT; /* past "in.ptx:" */
        while (q < nl && *q >= '0' && *q <= '9')
            q++;
        if (q > p + sizeof INPUT && *q++ != ':') /* "in.ptx:12: kind" */
            abort();
        said += nl - q >= 8 && !memcmp(q, " error: ", 8);
        p = nl + 1;
    }
    if (lines > log_lines || said != errors)
        abort();
    tc_sb_free(&out);
}

static void check_report(const char *log, size_t len)
{
    tc_ptxas_report r;
    if (tc_ptxas_parse_report(log, len, &r) != 0)
        return; /* out of memory */
    for (size_t i = 0; i < r.n; i++) {
        const tc_ptxas_kernel *k = &r.kernels[i];
        size_t n = strlen(k->name);
        if (n && !memmem(log, len, k->name, n))
            abort();
        if ((k->head.len && k->head.data[k->head.len - 1] != '\n') ||
            (k->body.len && k->body.data[k->body.len - 1] != '\n'))
            abort();
    }
    tc_ptxas_report_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    in_begin = data;
    in_end = data + size;
    (void)tc_elf_sections(data, size, section_seen, NULL);
    (void)tc_elf_symbols(data, size, symbol_seen, NULL);
    (void)tc_elf_symbol_attrs(data, size, attr_seen, NULL);
    (void)tc_elf_kernels(data, size, kernel_seen, NULL);

    const char *log = (const char *)data;
    check_report(log, size);
    check_diagnostics(log, size, NULL);
    /* a unit's map: its lines 1-9 are input lines 40-48, 30-31 are 7-8 */
    tc_line_seg segs[] = {{1, 40, 9}, {30, 7, 2}};
    tc_text map;
    memset(&map, 0, sizeof map);
    map.segs = segs;
    map.nsegs = sizeof segs / sizeof segs[0];
    check_diagnostics(log, size, &map);
    (void)tc_ptxas_number_before(log, size, "registers");
    return 0;
}
