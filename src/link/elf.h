/* elf: symbols and kernels of a CUDA ELF file. */
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

#endif
