/* report: what ptxas prints about a build (tc_result_ptxas_report), put
 * together from the kernels' -v lines (entry.c) in ptxas's order, the
 * warnings their figures make, and what only the image knows: the module's
 * memory, and the cumulative stack size a split build's units cannot. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handles.h"
#include "compile/ptxas.h"
#include "link/elf.h"
#include "util/map.h"

#define EIATTR_MIN_STACK_SIZE 0x12 /* a kernel's stack, callees included */
#define BANKS 32

static const char info[] = "ptxas info    : ";

/* What the report reads from the image. */
typedef struct image_facts {
    uint64_t gmem;          /* .nv.global and .nv.global.init */
    uint64_t bank[BANKS];   /* module-wide constant banks (.nv.constantN) */
    tc_map stack;           /* kernel -> cumulative stack size; keys point into the image */
} image_facts;

/* Bank number of a module-wide constant section (".nv.constant3"), or -1
 * for any other section (".nv.constant0.kernel" is a kernel's). */
static int bank_of(const tc_elf_section *s)
{
    static const char prefix[] = ".nv.constant";
    size_t k = sizeof prefix - 1, n = s->name_len;
    if (n <= k || n > k + 2 || memcmp(s->name, prefix, k) != 0)
        return -1;
    int bank = 0;
    for (size_t i = k; i < n; i++) {
        if (s->name[i] < '0' || s->name[i] > '9')
            return -1;
        bank = bank * 10 + (s->name[i] - '0');
    }
    return bank < BANKS ? bank : -1;
}

static int take_section(void *ctx, const tc_elf_section *s)
{
    image_facts *f = ctx;
    int bank = bank_of(s);
    if ((s->name_len == 10 && !memcmp(s->name, ".nv.global", 10)) ||
        (s->name_len == 15 && !memcmp(s->name, ".nv.global.init", 15)))
        f->gmem += s->size;
    else if (bank >= 0)
        f->bank[bank] += s->size;
    return 0;
}

static int take_attr(void *ctx, uint8_t attr, const char *sym, size_t len, uint32_t value)
{
    image_facts *f = ctx;
    if (attr == EIATTR_MIN_STACK_SIZE && tc_map_put(&f->stack, sym, len, value) < 0)
        return -1;
    return 0;
}

/* 0, or -1 when the image cannot be read (no module line then). */
static int read_image(const tc_result *r, image_facts *f)
{
    memset(f, 0, sizeof *f);
    const unsigned char *img = (const unsigned char *)r->image;
    if (!img || tc_elf_sections(img, r->image_len, take_section, f) != 0)
        return -1;
    if (tc_elf_symbol_attrs(img, r->image_len, take_attr, f) != 0) {
        tc_map_free(&f->stack);
        memset(&f->stack, 0, sizeof f->stack);
    }
    return 0;
}

/* ---- the kernels' order ----------------------------------------------------------- */

static int cmp_rank(const void *a, const void *b)
{
    const tc_entry_info *x = *(const tc_entry_info *const *)a;
    const tc_entry_info *y = *(const tc_entry_info *const *)b;
    if (x->verbose_rank != y->verbose_rank)
        return x->verbose_rank < y->verbose_rank ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* ---- warnings ---------------------------------------------------------------------- */

/* ptxas's warnings about one function's figures (-1: unknown): its local
 * memory, a kernel's with what the functions it calls use. */
static void warn(tc_sb *out, unsigned what, const char *name, size_t nlen, long local,
                 long stores, long loads)
{
    if ((what & TC_PTXAS_WARN_LOCAL_MEMORY) && local > 0)
        tc_sb_printf(out, "ptxas warning : Local memory used for function '%.*s', size of "
                          "stack frame: %ld bytes\n", (int)nlen, name, local);
    /* spill stores without loads, or loads without stores, get none */
    if ((what & TC_PTXAS_WARN_SPILLS) && stores > 0 && loads > 0)
        tc_sb_printf(out, "ptxas warning : Registers are spilled to local memory in function "
                          "'%.*s', %ld bytes spill stores, %ld bytes spill loads\n",
                     (int)nlen, name, stores, loads);
}

/* The warnings of every "Function properties" of a kernel's lines, in
 * their order. The kernel's own local memory is its cumulative stack size
 * where there is one (a frame of 0 bytes whose callees use 8 is warned of
 * as 8 bytes). */
static void warnings_of(tc_sb *out, unsigned what, const char *kernel, const char *v)
{
    static const char props[] = "ptxas info    : Function properties for ";
    static const char used[] = "ptxas info    : Used ";
    const char *u = strstr(v, used);
    long stack =
        u ? tc_ptxas_number_before(u, strcspn(u, "\n"), "bytes cumulative stack size") : -1;
    for (const char *p = v; (p = strstr(p, props)) != NULL;) {
        const char *name = p + sizeof props - 1;
        size_t nlen = strcspn(name, "\n");
        const char *next = name + nlen + (name[nlen] == '\n');
        size_t more = strcspn(next, "\n");
        p = next;
        if (more <= 4 || memcmp(next, "    ", 4) != 0)
            continue;
        long frame = tc_ptxas_number_before(next, more, "bytes stack frame");
        if (nlen == strlen(kernel) && !memcmp(name, kernel, nlen) && stack > frame)
            frame = stack;
        warn(out, what, name, nlen, frame, tc_ptxas_number_before(next, more, "bytes spill stores"),
             tc_ptxas_number_before(next, more, "bytes spill loads"));
    }
}

/* ---- a kernel's lines ----------------------------------------------------------------- */

/* The kernel's lines with its cumulative stack size, which a split build's
 * units do not print (whole-program units cannot see their callees in
 * other objects, relocatable ones none): the linked image has it. ptxas
 * prints it after the barriers when it is not zero. */
static void put_with_stack(tc_sb *out, const char *v, uint32_t stack)
{
    static const char used[] = "ptxas info    : Used ";
    const char *line = strstr(v, used);
    size_t n = line ? strcspn(line, "\n") : 0;
    /* UINT32_MAX: unknown (recursion), and ptxas prints none then */
    if (!line || !stack || stack == UINT32_MAX || memmem(line, n, "cumulative stack size", 21)) {
        tc_sb_puts(out, v);
        return;
    }
    const char *at = memmem(line, n, ", used ", 7), *end = line + n;
    if (at)
        at += strcspn(at + 1, ",\n") + 1;
    else if ((at = memmem(line, n, " registers", 10)) != NULL)
        at += 10;
    else
        at = end;
    tc_sb_append(out, v, (size_t)(at - v));
    tc_sb_printf(out, ", %u bytes cumulative stack size", stack);
    tc_sb_puts(out, at);
}

/* What the entry's resource figures say, for a kernel whose lines are
 * unknown: no more than they hold. */
static void put_known(tc_sb *out, const tc_entry_info *e, const char *arch)
{
    tc_sb_printf(out, "%sCompiling entry function '%s' for '%s'\n", info, e->name, arch);
    if (e->stack_bytes >= 0 && e->spill_store_bytes >= 0 && e->spill_load_bytes >= 0)
        tc_sb_printf(out, "%sFunction properties for %s\n    %d bytes stack frame, %d bytes "
                          "spill stores, %d bytes spill loads\n", info, e->name,
                     e->stack_bytes, e->spill_store_bytes, e->spill_load_bytes);
    if (e->registers >= 0) {
        tc_sb_printf(out, "%sUsed %d registers", info, e->registers);
        if (e->shared_bytes > 0)
            tc_sb_printf(out, ", %d bytes smem", e->shared_bytes);
        tc_sb_putc(out, '\n');
    }
}

/* The module's line: its global memory and, where the target's report
 * names constant banks at all (before sm_90; seen in the kernels' own
 * lines), its module-wide banks. */
static void put_memory(tc_sb *out, const image_facts *f, tc_entry_info *const *order, size_t n)
{
    int banks = 0;
    for (size_t i = 0; i < n && !banks; i++)
        banks = order[i]->verbose && strstr(order[i]->verbose, " bytes cmem[") != NULL;
    tc_sb_printf(out, "%s%llu bytes gmem", info, (unsigned long long)f->gmem);
    for (int b = 0; b < BANKS && banks; b++)
        if (f->bank[b])
            tc_sb_printf(out, ", %llu bytes cmem[%d]", (unsigned long long)f->bank[b], b);
    tc_sb_putc(out, '\n');
}

/* Each kernel's lines, in order: its own, its cumulative stack size from
 * the image (stacks: NULL but for a split build), or what its figures say. */
static void kernel_lines(const tc_result *r, const tc_map *stacks, tc_entry_info *const *order,
                         size_t n, tc_sb *lines)
{
    for (size_t i = 0; i < n; i++) {
        const tc_entry_info *e = order[i];
        uint32_t *stack = stacks ? tc_map_get(stacks, e->name, strlen(e->name)) : NULL;
        if (!e->verbose)
            put_known(&lines[i], e, r->arch[0] ? r->arch : "unknown");
        else if (stack)
            put_with_stack(&lines[i], e->verbose, *stack);
        else
            tc_sb_puts(&lines[i], e->verbose);
    }
}

static void compose(const tc_result *r, unsigned what, tc_entry_info *const *order, size_t n,
                    tc_sb *lines, tc_sb *out)
{
    const unsigned warnings = TC_PTXAS_WARN_SPILLS | TC_PTXAS_WARN_LOCAL_MEMORY;
    for (size_t i = 0; i < n && (what & TC_PTXAS_LIMITS); i++)
        if (order[i]->verbose && order[i]->verbose_head)
            tc_sb_puts(out, order[i]->verbose_head);
    if (!(what & (warnings | TC_PTXAS_RESOURCES)))
        return;
    /* the image is read once: a split build's stacks, the module's memory */
    image_facts f;
    int have_image = (r->report.split || (what & TC_PTXAS_RESOURCES)) && read_image(r, &f) == 0;
    kernel_lines(r, have_image && r->report.split ? &f.stack : NULL, order, n, lines);
    for (size_t i = 0; i < n && (what & warnings); i++) {
        const tc_entry_info *e = order[i];
        if (e->verbose)
            warnings_of(out, what, e->name, lines[i].data ? lines[i].data : "");
        else
            warn(out, what, e->name, strlen(e->name), e->stack_bytes, e->spill_store_bytes,
                 e->spill_load_bytes);
    }
    if (what & TC_PTXAS_RESOURCES) {
        if (have_image)
            put_memory(out, &f, order, n);
        for (size_t i = 0; i < n; i++)
            tc_sb_append(out, lines[i].data, lines[i].len);
    }
    if (have_image)
        tc_map_free(&f.stack);
}

size_t tc_result_ptxas_report(const tc_result *r, unsigned what, char *buf, size_t size)
{
    if (buf && size)
        *buf = '\0';
    tc_entry_info **order = malloc((r->nentries ? r->nentries : 1) * sizeof *order);
    if (!order)
        return 0;
    for (size_t i = 0; i < r->nentries; i++)
        order[i] = &r->entries[i];
    qsort(order, r->nentries, sizeof *order, cmp_rank);
    tc_sb out = TC_SB_INIT, *lines = calloc(r->nentries ? r->nentries : 1, sizeof *lines);
    if (lines)
        compose(r, what, order, r->nentries, lines, &out);
    int oom = !lines || out.oom;
    for (size_t i = 0; lines && i < r->nentries; i++) {
        oom |= lines[i].oom;
        tc_sb_free(&lines[i]);
    }
    free(lines);
    free(order);
    size_t len = oom ? 0 : out.len;
    if (buf && size && len) {
        size_t n = len < size ? len : size - 1;
        memcpy(buf, out.data, n);
        buf[n] = '\0';
    }
    tc_sb_free(&out);
    return len;
}
