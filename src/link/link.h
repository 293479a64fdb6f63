/* link: links unit objects into one executable cubin with the nvlink
 * program (the default, next to ptxas) or in process with libnvJitLink
 * (loaded with dlopen on first use, so processes that only hit the cache
 * never pay for loading it; needed for -ewp objects). */
#ifndef TC_LINK_LINK_H
#define TC_LINK_LINK_H

#include <stddef.h>

#include "toolchain/toolchain.h"
#include "util/strbuf.h"

enum { TC_LINKER_NVJITLINK = 1, TC_LINKER_NVLINK = 2 };

typedef struct tc_linker {
    int kind;
    char path[TC_PATH_MAX];  /* the library or the nvlink program */
    char id[160];            /* identity, part of module keys */
} tc_linker;

/* Chooses the linker (see link.c for the order). want_library: prefer
 * libnvJitLink wherever it is found, because the objects need it (nvlink
 * silently drops -ewp objects). memo: where identities are memoized
 * (tc_tool_identity), or NULL. keyed: the identity will be part of keys
 * someone sees; a build without a cache keys nothing, and need not hash
 * the library's 100 MB (its id then says so). */
int tc_linker_find(const char *ptxas, tc_store *memo, int keyed, int want_library,
                   tc_linker *out, tc_sb *err);

/* Starts loading and initializing libnvJitLink on a detached thread when
 * l is that linker and nothing started it yet (the first use in a process
 * is slow); a link's first tc_link_add (or its finish) waits for it.
 * Call it when a link will follow work that takes a while. A fork()
 * meanwhile waits for it to finish, so a child never inherits a prewarm
 * without its thread. */
void tc_linker_prewarm(const tc_linker *l, const char *arch);
/* Returns once no prewarm is running (a build that started one calls it
 * before it returns, so no thread is inside the library at exit). */
void tc_linker_prewarm_wait(void);
/* A link, fed one object at a time in link order: a build adds each
 * unit's object as soon as it and every unit before it are ready, so the
 * adding overlaps the compiles and reads still running. tc_link_start
 * loads nothing (NULL: out of memory); the first tc_link_add waits for a
 * prewarm and makes nvJitLink's handle. tc_link_add keeps p, which must
 * stay valid until the finish; it returns -1 once the link has failed
 * (two objects defining one symbol, an unreadable object, a linker error),
 * after which it only checks, and tc_link_finish says why. One thread at a
 * time per link. */
typedef struct tc_link_job tc_link_job;
tc_link_job *tc_link_start(const tc_linker *l, const char *arch, const char *scratch);
int tc_link_add(tc_link_job *lj, const void *p, size_t n);
/* Links what was added into *image and frees lj. 0, or -1 with the
 * linker's messages in *log. scratch (tc_link_start): a private directory
 * for nvlink's files. */
int tc_link_finish(tc_link_job *lj, tc_sb *image, tc_sb *log);
/* Frees a link that will not be finished (NULL: nothing). */
void tc_link_abandon(tc_link_job *lj);
/* Nonzero while a prewarm is loading the library: a thread that has other
 * work need not start a link (which would wait for it) yet. */
int tc_linker_prewarm_running(void);

#endif
