/* The stand-in libnvJitLink (fake_nvjitlink.c) as the linker of a test:
 * TC_FAKE_NVJITLINK is its path (tests/CMakeLists.txt). */
#ifndef TC_TESTS_FAKE_NVJITLINK_H
#define TC_TESTS_FAKE_NVJITLINK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "link/link.h"

#ifndef TC_FAKE_NVJITLINK
#error "TC_FAKE_NVJITLINK: the path of the stand-in libnvJitLink (tests/CMakeLists.txt)"
#endif

/* The stand-in as l, its nvJitLinkCreate taking delay_ms milliseconds. */
static inline void fake_nvjitlink(tc_linker *l, const char *delay_ms)
{
    setenv("FAKE_NVJITLINK_DELAY_MS", delay_ms, 1);
    memset(l, 0, sizeof *l);
    l->kind = TC_LINKER_NVJITLINK;
    snprintf(l->path, sizeof l->path, "%s", TC_FAKE_NVJITLINK);
    snprintf(l->id, sizeof l->id, "fake");
}

#endif
