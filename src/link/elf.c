/* elf: the sections, symbols and symbol attributes of a CUDA ELF file
 * (relocatable object, -ewp object or linked cubin), every offset checked
 * against the buffer. */
#include "link/elf.h"

#include <string.h>

/* ELF64 little-endian field readers; the caller checked the bounds */
static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

#define SHT_SYMTAB 2
#define SHT_NOBITS 8
#define STT_FUNC 2
#define STO_CUDA_ENTRY 0x10 /* st_other bit of a kernel's symbol */

/* Section i's header, or NULL if it lies outside the file. */
static const unsigned char *section(const unsigned char *img, size_t len, uint64_t shoff,
                                   uint16_t shentsize, uint32_t i)
{
    uint64_t off = shoff + (uint64_t)i * shentsize;
    if (off > len || len - off < 64)
        return NULL;
    return img + off;
}

/* Name of section i from the section-name table, "" when it has none
 * readable. */
static const char *section_name(const unsigned char *img, size_t len, uint64_t shoff,
                                uint16_t shentsize, uint16_t shnum, uint16_t shstrndx,
                                uint32_t i, size_t *name_len)
{
    *name_len = 0;
    const unsigned char *sh = i < shnum ? section(img, len, shoff, shentsize, i) : NULL;
    const unsigned char *strh =
        shstrndx < shnum ? section(img, len, shoff, shentsize, shstrndx) : NULL;
    if (!sh || !strh)
        return "";
    uint64_t stroff = rd64(strh + 0x18), strsize = rd64(strh + 0x20), name = rd32(sh);
    if (stroff > len || strsize > len - stroff || name >= strsize)
        return "";
    const char *nm = (const char *)img + stroff + name;
    const char *end = memchr(nm, '\0', strsize - name);
    if (!end)
        return "";
    *name_len = (size_t)(end - nm);
    return nm;
}

/* The section header table of a 64-bit little-endian ELF file. */
typedef struct {
    const unsigned char *img;
    size_t len;
    uint64_t shoff;
    uint16_t shentsize, shnum, shstrndx;
} elf_file;

/* 0, or -1 when img is no 64-bit little-endian ELF file. */
static int open_elf(const unsigned char *img, size_t len, elf_file *f)
{
    if (len < 64 || memcmp(img, "\177ELF", 4) != 0 || img[4] != 2 || img[5] != 1)
        return -1;
    *f = (elf_file){img, len, rd64(img + 0x28), rd16(img + 0x3A), rd16(img + 0x3C),
                    rd16(img + 0x3E)};
    return f->shentsize < 64 ? -1 : 0;
}

/* A symbol table and its string table, inside the file. */
typedef struct {
    const unsigned char *syms;
    uint64_t size, ent;
    const char *str;
    uint64_t strsize;
} symtab;

/* The symbol table whose section header is sh: 0, or -1 when it or its
 * names lie outside the file. */
static int open_symtab(const elf_file *f, const unsigned char *sh, symtab *t)
{
    uint64_t off = rd64(sh + 0x18), size = rd64(sh + 0x20), ent = rd64(sh + 0x38);
    const unsigned char *strh = section(f->img, f->len, f->shoff, f->shentsize, rd32(sh + 0x28));
    if (!strh || ent < 24 || off > f->len || size > f->len - off)
        return -1;
    uint64_t stroff = rd64(strh + 0x18), strsize = rd64(strh + 0x20);
    if (stroff > f->len || strsize > f->len - stroff)
        return -1;
    *t = (symtab){f->img + off, size, ent, (const char *)f->img + stroff, strsize};
    return 0;
}

/* Symbol i's entry and name: 0, or -1 when either is out of range. */
static int symbol(const symtab *t, uint64_t i, const unsigned char **sym, const char **name,
                  size_t *len)
{
    if (i >= t->size / t->ent)
        return -1;
    *sym = t->syms + i * t->ent;
    uint32_t off = rd32(*sym);
    if (off >= t->strsize)
        return -1;
    *name = t->str + off;
    const char *end = memchr(*name, '\0', t->strsize - off);
    if (!end)
        return -1;
    *len = (size_t)(end - *name);
    return 0;
}

/* The next symbol table from section *at on, which moves past it: 1 found,
 * 0 none left, -1 a section header or the table outside the file. */
static int next_symtab(const elf_file *f, uint32_t *at, symtab *t)
{
    for (; *at < f->shnum; (*at)++) {
        const unsigned char *sh = section(f->img, f->len, f->shoff, f->shentsize, *at);
        if (!sh)
            return -1;
        if (rd32(sh + 4) == SHT_SYMTAB) {
            (*at)++;
            return open_symtab(f, sh, t) == 0 ? 1 : -1;
        }
    }
    return 0;
}

int tc_elf_sections(const unsigned char *img, size_t len, tc_elf_section_fn fn, void *ctx)
{
    elf_file f;
    if (open_elf(img, len, &f) != 0)
        return -1;
    for (uint32_t i = 0; i < f.shnum; i++) {
        const unsigned char *sh = section(img, len, f.shoff, f.shentsize, i);
        if (!sh)
            return -1;
        tc_elf_section s = {.type = rd32(sh + 4), .size = rd64(sh + 0x20)};
        uint64_t off = rd64(sh + 0x18);
        if (s.type != SHT_NOBITS && off <= len && s.size <= len - off)
            s.data = img + off;
        s.name = section_name(img, len, f.shoff, f.shentsize, f.shnum, f.shstrndx, i,
                              &s.name_len);
        if (fn(ctx, &s) != 0)
            return -1;
    }
    return 0;
}

int tc_elf_symbols(const unsigned char *img, size_t len, tc_elf_sym_fn fn, void *ctx)
{
    elf_file f;
    if (open_elf(img, len, &f) != 0)
        return -1;
    symtab t;
    int found;
    for (uint32_t i = 0; (found = next_symtab(&f, &i, &t)) != 0;) {
        if (found < 0)
            return -1;
        for (uint64_t k = 0; k < t.size / t.ent; k++) {
            const unsigned char *sym;
            tc_elf_sym y;
            if (symbol(&t, k, &sym, &y.name, &y.len) != 0)
                return -1;
            y.type = sym[4] & 0xf;
            y.bind = sym[4] >> 4;
            y.other = sym[5];
            y.shndx = rd16(sym + 6);
            y.value = rd64(sym + 8);
            y.size = rd64(sym + 16);
            y.section = section_name(img, len, f.shoff, f.shentsize, f.shnum, f.shstrndx,
                                     y.shndx, &y.section_len);
            if (fn(ctx, &y) != 0)
                return -1;
        }
    }
    return 0;
}

typedef struct {
    tc_elf_kernel_fn fn;
    void *ctx;
} kernel_walk;

static int kernel_of(void *ctx, const tc_elf_sym *y)
{
    const kernel_walk *w = ctx;
    if (y->type != STT_FUNC || !(y->other & STO_CUDA_ENTRY) || y->shndx == 0)
        return 0; /* not a defined kernel */
    return w->fn(w->ctx, y->name, y->len);
}

int tc_elf_kernels(const unsigned char *img, size_t len, tc_elf_kernel_fn fn, void *ctx)
{
    kernel_walk w = {fn, ctx};
    return tc_elf_symbols(img, len, kernel_of, &w);
}

/* ---- .nv.info attributes ---------------------------------------------------------- */

/* An .nv.info record is 4 bytes (format, attribute, a 2-byte value) but for
 * EIFMT_SVAL, whose 2-byte field is the size of the data that follows. */
#define EIFMT_SVAL 4

/* The module-wide .nv.info section. */
typedef struct {
    const unsigned char *data;
    uint64_t size;
    int found;
} info_section;

static int find_info(void *ctx, const tc_elf_section *s)
{
    info_section *w = ctx;
    if (s->name_len == 8 && !memcmp(s->name, ".nv.info", 8) && !w->found) {
        w->data = s->data;
        w->size = s->size;
        w->found = 1;
    }
    return 0;
}

int tc_elf_symbol_attrs(const unsigned char *img, size_t len, tc_elf_attr_fn fn, void *ctx)
{
    elf_file f;
    info_section w = {NULL, 0, 0};
    if (open_elf(img, len, &f) != 0 || tc_elf_sections(img, len, find_info, &w) != 0)
        return -1;
    if (!w.found)
        return 0;
    if (!w.data)
        return -1; /* outside the file */
    /* the symbols the records name by index: the (one) symbol table's */
    symtab t;
    uint32_t first = 0;
    if (next_symtab(&f, &first, &t) != 1)
        return -1;
    for (uint64_t at = 0; at + 4 <= w.size;) {
        const unsigned char *rec = w.data + at;
        if (rec[0] != EIFMT_SVAL) {
            at += 4;
            continue;
        }
        uint64_t size = rd16(rec + 2);
        if (size > w.size - at - 4)
            return -1;
        at += 4 + size;
        if (size != 8)
            continue;
        const unsigned char *sym;
        const char *name;
        size_t nlen;
        if (symbol(&t, rd32(rec + 4), &sym, &name, &nlen) != 0 ||
            fn(ctx, rec[1], name, nlen, rd32(rec + 8)) != 0)
            return -1;
    }
    return 0;
}
