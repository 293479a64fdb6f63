/* nvptx: the in-process compile backend (NVIDIA's nvPTXCompiler API from
 * libnvptxcompiler_static). Compiled in only when CMake finds that library;
 * it then replaces the ptxas process for every compile, on the worker
 * threads, saving a process start per unit. Its identity differs from
 * ptxas's, so records from the two backends never stand in for each
 * other. */
#ifndef TC_COMPILE_NVPTX_H
#define TC_COMPILE_NVPTX_H

#include <stddef.h>

#include "compile/ptxas.h"
#include "util/strbuf.h"

/* 1 when taskcache was built with the in-process compiler. */
int tc_nvptx_available(void);

/* Identity for keys: the API version plus the SHA-256 of the static
 * library taskcache was built with. "" when unavailable. */
const char *tc_nvptx_identity(void);

/* The library's release as ptxas --version prints it ("13.0.88", read
 * from the library when taskcache was built): a ptxas the user names is
 * replaced by this compiler only when it is the same release. "" when
 * unavailable or unknown. */
const char *tc_nvptx_release(void);

/* Compiles PTX text; -v is passed unless the text holds a name the
 * library's verbose output cannot take (see nvptx.c). *exit_code is 0 on
 * success.
 * log receives the info and error logs in ptxas's own format. Returns -1
 * only when the compiler is not available or out of memory. Thread-safe. */
int tc_nvptx_compile(const char *arch, char *const *opts, size_t nopts, tc_out_kind kind,
                     const char *ptx, size_t len, tc_sb *output, tc_sb *log, int *exit_code);

#endif
