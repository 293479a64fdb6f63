/* toolchain: finds ptxas/nvlink and establishes their identity, which goes
 * into every key: a SHA-256 of the binary's bytes. Hashing a 30 MB ptxas
 * and asking its --version cost tens of milliseconds, so identities are
 * memoized by the file's path, device, inode, size, modification and
 * status-change times: in this process, and in the cache's store
 * (<root>/toolchain/, written like every file of the cache). */
#ifndef TC_TOOLCHAIN_TOOLCHAIN_H
#define TC_TOOLCHAIN_TOOLCHAIN_H

#include <stddef.h>

#include "store/store.h"
#include "util/hash.h"
#include "util/strbuf.h"

#define TC_PATH_MAX 4096

/* Finds an executable: `explicit_path` if given, else $<env_var>, else
 * <dir>/<name> for each $CUDA_HOME/bin, $CUDA_PATH/bin and the toolkit
 * directory known at build time, else <name> on $PATH. Returns 0 with the
 * path in out, or -1. named (may be NULL) is set to 1 when the user named
 * the tool (the path or variable given, or $CUDA_HOME or $CUDA_PATH holds
 * it), 0 when taskcache chose it (the build-time toolkit, $PATH). */
int tc_tool_find(const char *explicit_path, const char *env_var, const char *name,
                 char *out, size_t outlen, int *named);

/* The release in a tool's version text ("13.0.88" of "Cuda compilation
 * tools, release 13.0, V13.0.88"), into out; "" when it names none. */
void tc_tool_release(const char *version, char *out, size_t n);

/* Identity of the program at `path`: the digest of its bytes, and its
 * `--version` output in one line for display and tc_tool_release: the
 * release line where there is one, then the last non-empty line ("Cuda
 * compilation tools, release 13.0, V13.0.88; Build cuda_13.0.r13.0/...";
 * a program that cannot answer --version is refused). memo: the store that keeps
 * identities across processes, or NULL (none). Returns 0, or -1 with a
 * message. */
int tc_tool_identity(const char *path, tc_store *memo, char id[TC_DIGEST_HEX_LEN + 1],
                     char *version, size_t vlen, tc_sb *err);

/* Identity of a library (the digest of its bytes), memoized the same way. */
int tc_file_identity(const char *path, tc_store *memo, char id[TC_DIGEST_HEX_LEN + 1],
                     tc_sb *err);

#endif
