/* key: the cache keys. Every key is a SHA-256 over tagged, length-prefixed
 * fields: the record format, the exact target, every compiler option, the
 * compiler's identity and the text being compiled. When unsure whether
 * something can change the machine code, it goes in the key. */
#ifndef TC_KEY_KEY_H
#define TC_KEY_KEY_H

#include <stddef.h>

#include "util/hash.h"

/* Version of the slicing, naming and unit-grouping rules (7: .shared
 * variables keep their compiler-given names): part of module keys,
 * because it decides which objects a module is linked from. Unit keys need
 * no such field: they hash the very text that is compiled. */
#define TC_SLICER_VERSION 7

/* Version of what a module record holds beyond the record format (2: its
 * entries carry the kernels' -v lines, which earlier versions' readers
 * refuse): part of module keys, so that versions that write different
 * module records keep them apart. Unit and task records are as they were. */
#define TC_MODULE_RECORD_VERSION 2

typedef struct tc_keyctx {
    const char *target;       /* "sm_90" */
    const char *const *opts;  /* compiler options, in order */
    size_t nopts;
    const char *compiler_id;  /* tc_tool_identity of ptxas */
    const char *auth;         /* the cache's secret by name (tc_store_auth_id), or NULL:
                                 records under another secret, or none, never mix */
} tc_keyctx;

/* Key of a compile unit from how it is compiled (the output option) and
 * its canonical text.
 * Returns 0, or -1 out of memory (no key must then be used). */
int tc_key_unit(const tc_keyctx *k, const char *mode, const char *text, size_t len,
                tc_digest *out);

/* Key of a whole module: its exact input bytes plus everything that decides
 * how it is built and linked. `plan` describes the build plan ("split:600"
 * or "whole"). Returns 0, or -1 out of memory. */
int tc_key_module(const tc_keyctx *k, const char *linker_id, const char *plan,
                   const void *input, size_t len, tc_digest *out);

/* Key of a host task: how tasks are compiled (the mode, as for units),
 * the host's version string and the bytes it says determine the task's
 * PTX. */
int tc_key_task(const tc_keyctx *k, const char *mode, const char *version, const void *key,
                size_t len, tc_digest *out);

/* Key of the module linked from tasks, in order. */
int tc_key_task_module(const tc_keyctx *k, const char *linker_id, const char *version,
                       const tc_digest *tasks, size_t n, tc_digest *out);

/* Key of a group manifest: its tasks' mode, the host's version and key. */
int tc_key_group(const tc_keyctx *k, const char *mode, const char *version, const void *key,
                 size_t len,
                 tc_digest *out);

#endif
