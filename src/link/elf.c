/* elf: the symbols of a CUDA ELF file (relocatable object, -ewp object or
 * linked cubin), read from its symbol table with every offset checked
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

int tc_elf_symbols(const unsigned char *img, size_t len, tc_elf_sym_fn fn, void *ctx)
{
    if (len < 64 || memcmp(img, "\177ELF", 4) != 0 || img[4] != 2 || img[5] != 1)
        return -1;
    uint64_t shoff = rd64(img + 0x28);
    uint16_t shentsize = rd16(img + 0x3A), shnum = rd16(img + 0x3C), shstrndx = rd16(img + 0x3E);
    if (shentsize < 64)
        return -1;
    for (uint32_t i = 0; i < shnum; i++) {
        const unsigned char *sh = section(img, len, shoff, shentsize, i);
        if (!sh)
            return -1;
        if (rd32(sh + 4) != SHT_SYMTAB)
            continue;
        uint64_t off = rd64(sh + 0x18), size = rd64(sh + 0x20), ent = rd64(sh + 0x38);
        const unsigned char *strh = section(img, len, shoff, shentsize, rd32(sh + 0x28));
        if (!strh || ent < 24 || off > len || size > len - off)
            return -1;
        uint64_t stroff = rd64(strh + 0x18), strsize = rd64(strh + 0x20);
        if (stroff > len || strsize > len - stroff)
            return -1;
        const char *strtab = (const char *)img + stroff;
        for (uint64_t s = 0; s + ent <= size; s += ent) {
            const unsigned char *sym = img + off + s;
            uint32_t name = rd32(sym);
            if (name >= strsize)
                return -1;
            const char *nm = strtab + name;
            const char *end = memchr(nm, '\0', strsize - name);
            if (!end)
                return -1;
            tc_elf_sym y = {.name = nm,
                            .len = (size_t)(end - nm),
                            .type = sym[4] & 0xf,
                            .bind = sym[4] >> 4,
                            .other = sym[5],
                            .shndx = rd16(sym + 6),
                            .value = rd64(sym + 8),
                            .size = rd64(sym + 16)};
            y.section = section_name(img, len, shoff, shentsize, shnum, shstrndx, y.shndx,
                                     &y.section_len);
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
