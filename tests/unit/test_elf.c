/* Tests of the ELF reader that checks every linked image: it finds exactly
 * the defined kernel symbols, gives each symbol its value and the name of
 * its section (what the check of whole-program units' __constant__ layout
 * reads), each section its size and bytes, each .nv.info attribute of a
 * symbol its name and value (what ptxas's -v report reads: global memory,
 * cumulative stack sizes), and a damaged file (truncated, offsets out of
 * range, names without an end) is refused, never read past. */
#include <stdlib.h>
#include <string.h>

#include "link/elf.h"
#include "check.h"

enum { SHOFF = 64, NSEC = 3, STRTAB = SHOFF + NSEC * 64, SYMTAB = 512, SIZE = 640 };

static void put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}
static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

/* A zeroed file of size bytes with a 64-bit little-endian ELF header:
 * nsec section headers of 64 bytes at shoff, section 1 the names. */
static void put_header(unsigned char *img, size_t size, uint64_t shoff, uint16_t nsec)
{
    memset(img, 0, size);
    memcpy(img, "\177ELF", 4);
    img[4] = 2, img[5] = 1, img[6] = 1;
    put64(img + 0x28, shoff);
    put16(img + 0x3A, 64);
    put16(img + 0x3C, nsec);
    put16(img + 0x3E, 1);
}

static const char names[] = "\0kern_a\0helper\0kern_b\0undef_kernel\0.nv.constant3\0";
enum { SECNAME = 35 }; /* ".nv.constant3" in names */

static void add_sym(unsigned char *img, int i, uint32_t name, int func, int entry, int shndx)
{
    unsigned char *s = img + SYMTAB + 24 * i;
    put32(s, name);
    s[4] = (unsigned char)(0x10 | (func ? 2 : 1)); /* GLOBAL, FUNC or OBJECT */
    s[5] = entry ? 0x10 : 0;
    put16(s + 6, (uint16_t)shndx);
    put64(s + 8, 0x100u * (uint64_t)i); /* st_value */
}

/* A 64-bit little-endian ELF file: section 1 the string table, section 2
 * the symbol table with kern_a and kern_b (kernels), helper (a function
 * that is no kernel) and undef_kernel (a kernel referenced, not defined). */
static void make(unsigned char *img)
{
    put_header(img, SIZE, SHOFF, NSEC); /* section names in section 1 too */
    unsigned char *str = img + SHOFF + 64, *sym = img + SHOFF + 128;
    put32(str + 4, 3); /* SHT_STRTAB */
    put64(str + 0x18, STRTAB);
    put64(str + 0x20, sizeof names);
    memcpy(img + STRTAB, names, sizeof names);
    put32(sym, SECNAME); /* section 2 is named ".nv.constant3" */
    put32(sym + 4, 2);   /* SHT_SYMTAB */
    put64(sym + 0x18, SYMTAB);
    put64(sym + 0x20, 5 * 24);
    put32(sym + 0x28, 1);
    put64(sym + 0x38, 24);
    add_sym(img, 1, 1, 1, 1, 2);  /* kern_a */
    add_sym(img, 2, 8, 1, 0, 2);  /* helper */
    add_sym(img, 3, 15, 1, 1, 2); /* kern_b */
    add_sym(img, 4, 22, 1, 1, 0); /* undef_kernel: undefined */
}

typedef struct {
    char seen[256];
    int count;
} names_seen;

static int collect(void *ctx, const char *name, size_t len)
{
    names_seen *n = ctx;
    size_t used = strlen(n->seen);
    snprintf(n->seen + used, sizeof n->seen - used, "%s%.*s", used ? "," : "", (int)len, name);
    n->count++;
    return 0;
}

static int stop(void *ctx, const char *name, size_t len)
{
    (void)ctx, (void)name, (void)len;
    return 1;
}

/* Every symbol as name@section=value */
static int collect_sym(void *ctx, const tc_elf_sym *y)
{
    names_seen *n = ctx;
    size_t used = strlen(n->seen);
    snprintf(n->seen + used, sizeof n->seen - used, "%s%.*s@%.*s=%llu", used ? "," : "",
             (int)y->len, y->name, (int)y->section_len, y->section,
             (unsigned long long)y->value);
    n->count++;
    return 0;
}

static int walk(const unsigned char *img, size_t len, names_seen *n)
{
    memset(n, 0, sizeof *n);
    return tc_elf_kernels(img, len, collect, n);
}

/* ---- sections and .nv.info ---------------------------------------------------------- */

/* A second file: sections 1 names (section and symbol names), 2 the symbol
 * table (kern_a, kern_b), 3 .nv.info, 4 .nv.global (no bytes in the file),
 * 5 .nv.global.init. */
enum { I_SHOFF = 64, I_NSEC = 6, I_STR = I_SHOFF + I_NSEC * 64, I_SYM = 512, I_INFO = 600,
       I_INIT = 680, I_SIZE = 688 };
static const char inames[] = "\0kern_a\0kern_b\0.symtab\0.nv.info\0.nv.global\0"
                             ".nv.global.init\0";
enum { N_KA = 1, N_KB = 8, N_SYMTAB = 15, N_INFO = 23, N_GLOBAL = 32, N_INIT = 43 };

static void put_section(unsigned char *img, int i, uint32_t name, uint32_t type, uint64_t off,
                        uint64_t size)
{
    unsigned char *sh = img + I_SHOFF + 64 * i;
    put32(sh, name);
    put32(sh + 4, type);
    put64(sh + 0x18, off);
    put64(sh + 0x20, size);
}

/* An attribute record of format SVAL giving symbol sym a value. */
static unsigned char *put_attr(unsigned char *p, uint8_t attr, uint32_t sym, uint32_t value)
{
    p[0] = 4, p[1] = attr;
    put16(p + 2, 8);
    put32(p + 4, sym);
    put32(p + 8, value);
    return p + 12;
}

static void make_info(unsigned char *img)
{
    put_header(img, I_SIZE, I_SHOFF, I_NSEC);
    memcpy(img + I_STR, inames, sizeof inames);
    put_section(img, 1, 0, 3, I_STR, sizeof inames);
    put_section(img, 2, N_SYMTAB, 2, I_SYM, 3 * 24);
    put32(img + I_SHOFF + 128 + 0x28, 1);
    put64(img + I_SHOFF + 128 + 0x38, 24);
    put32(img + I_SYM + 24, N_KA);
    put32(img + I_SYM + 48, N_KB);
    /* EIATTR_MIN_STACK_SIZE of kern_a, a 2-byte record, one of 12 bytes,
     * EIATTR_REGCOUNT of kern_b */
    unsigned char *p = put_attr(img + I_INFO, 0x12, 1, 32);
    p[0] = 3, p[1] = 0x1b, p[2] = 0xff, p += 4;
    p[0] = 4, p[1] = 0x17, p[2] = 12, p += 16;
    p = put_attr(p, 0x2f, 2, 24);
    put_section(img, 3, N_INFO, 0x70000000, I_INFO, (uint64_t)(p - (img + I_INFO)));
    put_section(img, 4, N_GLOBAL, 8, 0, 1u << 20); /* NOBITS: no bytes, any size */
    put_section(img, 5, N_INIT, 1, I_INIT, 8);
}

static int collect_section(void *ctx, const tc_elf_section *s)
{
    names_seen *n = ctx;
    size_t used = strlen(n->seen);
    snprintf(n->seen + used, sizeof n->seen - used, "%s%.*s:%llu%s", used ? "," : "",
             (int)s->name_len, s->name, (unsigned long long)s->size, s->data ? "+" : "");
    n->count++;
    return 0;
}

static int collect_attr(void *ctx, uint8_t attr, const char *sym, size_t len, uint32_t value)
{
    names_seen *n = ctx;
    size_t used = strlen(n->seen);
    snprintf(n->seen + used, sizeof n->seen - used, "%s%x:%.*s=%u", used ? "," : "", attr,
             (int)len, sym, value);
    n->count++;
    return 0;
}

static void test_sections_and_attrs(void)
{
    unsigned char *img = malloc(I_SIZE);
    names_seen n;
    make_info(img);
    memset(&n, 0, sizeof n);
    CHECK(tc_elf_sections(img, I_SIZE, collect_section, &n) == 0);
    CHECK_STR(n.seen, ":0+,:60+,.symtab:72+,.nv.info:44+,.nv.global:1048576,.nv.global.init:8+");
    memset(&n, 0, sizeof n);
    CHECK(tc_elf_symbol_attrs(img, I_SIZE, collect_attr, &n) == 0);
    CHECK_STR(n.seen, "12:kern_a=32,2f:kern_b=24");
    /* truncated anywhere: refused, or (the section's name cut off) no
     * .nv.info, or all of it */
    for (size_t cut = 0; cut < I_SIZE; cut++) {
        unsigned char *t = malloc(cut ? cut : 1);
        memcpy(t, img, cut);
        memset(&n, 0, sizeof n);
        int rc = tc_elf_symbol_attrs(t, cut, collect_attr, &n);
        CHECK(rc == -1 || (cut < I_STR + sizeof inames && n.count == 0) ||
              (cut >= I_INFO + 44 && n.count == 2));
        free(t);
    }
    put16(img + I_INFO + 2, 200); /* a record larger than the section */
    CHECK(tc_elf_symbol_attrs(img, I_SIZE, collect_attr, &n) == -1);
    make_info(img);
    put32(img + I_INFO + 4, 3); /* a symbol past the table */
    CHECK(tc_elf_symbol_attrs(img, I_SIZE, collect_attr, &n) == -1);
    make_info(img);
    put32(img + I_SHOFF + 3 * 64, N_GLOBAL); /* no .nv.info: no attributes */
    memset(&n, 0, sizeof n);
    CHECK(tc_elf_symbol_attrs(img, I_SIZE, collect_attr, &n) == 0 && n.count == 0);
    free(img);
}

int main(void)
{
    test_sections_and_attrs();
    unsigned char *img = malloc(SIZE); /* exact size: ASan sees any overread */
    names_seen n;
    make(img);
    CHECK(walk(img, SIZE, &n) == 0);
    CHECK_STR(n.seen, "kern_a,kern_b");
    CHECK(tc_elf_kernels(img, SIZE, stop, NULL) == -1);

    /* every symbol with its value and section; the undefined one has none */
    memset(&n, 0, sizeof n);
    CHECK(tc_elf_symbols(img, SIZE, collect_sym, &n) == 0);
    CHECK_STR(n.seen, "@=0,kern_a@.nv.constant3=256,helper@.nv.constant3=512,"
                      "kern_b@.nv.constant3=768,undef_kernel@=1024");
    /* a section-name table out of range: names are "", the walk goes on */
    put16(img + 0x3E, 7);
    memset(&n, 0, sizeof n);
    CHECK(tc_elf_symbols(img, SIZE, collect_sym, &n) == 0);
    CHECK(n.count == 5 && !strstr(n.seen, ".nv.constant3"));
    make(img);

    /* truncated anywhere before the tables end */
    for (size_t cut = 0; cut < SIZE; cut += 7) {
        unsigned char *t = malloc(cut ? cut : 1);
        memcpy(t, img, cut);
        int rc = walk(t, cut, &n);
        CHECK(rc == -1 || cut >= SYMTAB + 5 * 24);
        free(t);
    }
    make(img);
    put64(img + 0x28, (uint64_t)-32); /* section headers past the end (wraps) */
    CHECK(walk(img, SIZE, &n) == -1);
    make(img);
    put64(img + SHOFF + 128 + 0x20, 1u << 20); /* symbol table larger than the file */
    CHECK(walk(img, SIZE, &n) == -1);
    make(img);
    put32(img + SHOFF + 128 + 0x28, 9); /* string table section out of range */
    CHECK(walk(img, SIZE, &n) == -1);
    make(img);
    put32(img + SYMTAB + 24, 4000); /* a name past the string table */
    CHECK(walk(img, SIZE, &n) == -1);
    make(img);
    put64(img + SHOFF + 64 + 0x20, 4); /* the table ends inside "kern_a" */
    CHECK(walk(img, SIZE, &n) == -1);
    make(img);
    img[4] = 1; /* 32-bit */
    CHECK(walk(img, SIZE, &n) == -1);
    free(img);
    return check_report("test_elf");
}
