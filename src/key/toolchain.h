/* toolchain: finds ptxas/nvlink and establishes their identity, which goes
 * into every key. Asking `ptxas --version` costs a process (tens of ms), so
 * identities are memoized by the binary's path, device, inode, size and
 * modification time: in this process, and on disk in the cache. */
#ifndef TC_KEY_TOOLCHAIN_H
#define TC_KEY_TOOLCHAIN_H

#include <stddef.h>

#include "../util/hash.h"
#include "../util/strbuf.h"

#define TC_PATH_MAX 4096

/* Finds an executable: `explicit_path` if given, else $<env_var>, else
 * <dir>/<name> for each $CUDA_HOME/bin, $CUDA_PATH/bin and the toolkit
 * directory known at build time, else <name> on $PATH. Returns 0 with the
 * path in out, or -1. */
int tc_tool_find(const char *explicit_path, const char *env_var, const char *name,
                 char *out, size_t outlen);

/* Identity of the tool at `path`: a digest of its `--version` output, and
 * that output's last non-empty line for display. memo_dir may be NULL (no
 * disk memo) and is created if missing. Returns 0, or -1 with a message. */
int tc_tool_identity(const char *path, const char *memo_dir, char id[TC_DIGEST_HEX_LEN + 1],
                     char *version, size_t vlen, tc_sb *err);

#endif
