/* elf: kernels defined by a CUDA ELF file. */
#ifndef TC_ELF_H
#define TC_ELF_H

#include <stddef.h>
#include <stdint.h>

/* Called once per kernel (a defined function symbol marked as a CUDA entry);
 * name is not NUL-terminated at len in general. Nonzero stops the walk. */
typedef int (*tc_elf_kernel_fn)(void *ctx, const char *name, size_t len);

/* Walks the kernels of img. 0 done; -1 not a 64-bit little-endian ELF file,
 * a table outside the buffer, or fn returned nonzero. */
int tc_elf_kernels(const unsigned char *img, size_t len, tc_elf_kernel_fn fn, void *ctx);

#endif
