/* elf: sections, symbols, kernels and symbol attributes of a CUDA ELF file. */
#ifndef TC_ELF_H
#define TC_ELF_H

#include <stddef.h>
#include <stdint.h>

/* One symbol: name and section name are not NUL-terminated at their
 * lengths in general; section is "" when undefined or unreadable. */
typedef struct tc_elf_sym {
    const char *name;
    size_t len;
    const char *section;
    size_t section_len;
    uint64_t value, size;
    uint8_t type;   /* STT_* */
    uint8_t bind;   /* STB_* */
    uint8_t other;  /* st_other */
    uint16_t shndx; /* 0: undefined */
} tc_elf_sym;

typedef int (*tc_elf_sym_fn)(void *ctx, const tc_elf_sym *s);

/* Walks every symbol of img. 0 done; -1 not a 64-bit little-endian ELF
 * file, a table or name outside the buffer, or fn returned nonzero. */
int tc_elf_symbols(const unsigned char *img, size_t len, tc_elf_sym_fn fn, void *ctx);

/* Called once per kernel (a defined function symbol marked as a CUDA entry);
 * name is not NUL-terminated at len in general. Nonzero stops the walk. */
typedef int (*tc_elf_kernel_fn)(void *ctx, const char *name, size_t len);

/* Walks the kernels of img. 0 done; -1 not a 64-bit little-endian ELF file,
 * a table outside the buffer, or fn returned nonzero. */
int tc_elf_kernels(const unsigned char *img, size_t len, tc_elf_kernel_fn fn, void *ctx);

/* One section: name is not NUL-terminated at name_len in general ("" when
 * unreadable); data is NULL when the section has no bytes in the file
 * (SHT_NOBITS: .nv.global, .nv.shared.*) or they lie outside it. */
typedef struct tc_elf_section {
    const char *name;
    size_t name_len;
    uint32_t type;  /* SHT_* */
    uint64_t size;
    const unsigned char *data;
} tc_elf_section;

typedef int (*tc_elf_section_fn)(void *ctx, const tc_elf_section *s);

/* Walks every section of img. 0 done; -1 not a 64-bit little-endian ELF
 * file, a section header outside the buffer, or fn returned nonzero. */
int tc_elf_sections(const unsigned char *img, size_t len, tc_elf_section_fn fn, void *ctx);

/* Attributes of the module-wide .nv.info section that give a symbol a 32-bit
 * value (EIATTR_REGCOUNT 0x2f, EIATTR_FRAME_SIZE 0x11, EIATTR_MIN_STACK_SIZE
 * 0x12, ...): attr, the symbol's name (not NUL-terminated at len in
 * general) and the value. Nonzero stops the walk. */
typedef int (*tc_elf_attr_fn)(void *ctx, uint8_t attr, const char *sym, size_t len,
                              uint32_t value);

/* Walks those attributes in the order of the section. 0 done (also when img
 * has no .nv.info); -1 not a 64-bit little-endian ELF file, a record, table
 * or name outside the buffer, or fn returned nonzero. */
int tc_elf_symbol_attrs(const unsigned char *img, size_t len, tc_elf_attr_fn fn, void *ctx);

#endif
