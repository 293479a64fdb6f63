/* test_link: a link fed one object at a time (tc_link_start, tc_link_add,
 * tc_link_finish), as a split build feeds it while units still compile.
 * The linker is the stand-in libnvJitLink, which counts what it is given
 * and fails every nvJitLinkComplete with "fake nvJitLink: links nothing";
 * the object is a real `ptxas -c` object from the fuzz corpus. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fake_nvjitlink.h"
#include "link/link.h"
#include "util/fs.h"

#ifndef TC_TEST_OBJECT
#error "TC_TEST_OBJECT: a relocatable object (tests/CMakeLists.txt)"
#endif

static int (*adds)(void);

static int counter(const char *name, int (**fn)(void))
{
    void *lib = dlopen(TC_FAKE_NVJITLINK, RTLD_NOW | RTLD_NOLOAD);
    void *sym = lib ? dlsym(lib, name) : NULL;
    if (sym)
        memcpy(fn, &sym, sizeof sym);
    return sym ? 0 : -1;
}

/* Links n copies of obj: the multiple definitions the finish counts
 * ("... N multiple definitions in all"), or -1 when the link did not fail
 * as it must (the second add refused, the linker never completing). */
static int clashes(const tc_linker *l, const char *obj, size_t len, int n)
{
    tc_link_job *lj = tc_link_start(l, "sm_90", "/nonexistent");
    int ok = lj != NULL;
    for (int i = 0; lj && i < n; i++)
        ok &= (tc_link_add(lj, obj, len) == 0) == (i == 0);
    tc_sb image = TC_SB_INIT, log = TC_SB_INIT;
    ok &= lj && tc_link_finish(lj, &image, &log) != 0 && log.data &&
          strstr(log.data, "multiple definition of '") && strstr(log.data, "(objects 0 and 1)") &&
          !strstr(log.data, "fake nvJitLink");
    const char *all = log.data ? strstr(log.data, "... ") : NULL;
    int count = all ? atoi(all + 4) : -1;
    tc_sb_free(&image);
    tc_sb_free(&log);
    return ok ? count : -1;
}

int main(void)
{
    tc_linker l;
    fake_nvjitlink(&l, "0");
    char *obj = NULL;
    size_t len = 0;
    CHECK(tc_read_file(TC_TEST_OBJECT, 0, &obj, &len) == 0 && len > 0);
    if (!obj)
        return check_report("test_link");

    /* Objects reach the linker as they are added: the library is loaded
     * at the first add, and the finish only completes. */
    tc_link_job *lj = tc_link_start(&l, "sm_90", "/nonexistent");
    CHECK(lj != NULL);
    CHECK(tc_link_add(lj, obj, len) == 0);
    CHECK(counter("fake_nvjitlink_adds", &adds) == 0);
    if (!adds)
        return check_report("test_link");
    CHECK(adds() == 1);
    tc_sb image = TC_SB_INIT, log = TC_SB_INIT;
    CHECK(tc_link_finish(lj, &image, &log) != 0);
    CHECK(log.data && strstr(log.data, "fake nvJitLink: links nothing"));
    CHECK(image.len == 0);
    tc_sb_reset(&log);

    /* The same object again defines its functions again: that add fails,
     * nothing after it reaches the linker (libnvJitLink would let it pass,
     * keeping one definition), and the finish says why without completing
     * anything. Every object is still checked: a third copy doubles the
     * count of clashes. */
    int twice = clashes(&l, obj, len, 2), thrice = clashes(&l, obj, len, 3);
    CHECK(twice > 3 && thrice == 2 * twice);
    CHECK(adds() == 3); /* the first link's one, one for each of these */

    /* Bytes that are no ELF file fail the link at their add. */
    lj = tc_link_start(&l, "sm_90", "/nonexistent");
    CHECK(tc_link_add(lj, "not an object", 13) != 0);
    CHECK(adds() == 3);
    CHECK(tc_link_finish(lj, &image, &log) != 0);
    CHECK(log.data && strstr(log.data, "object 0 is not a readable ELF file"));

    /* A link given up before its finish frees what it holds (the
     * sanitizer build checks for leaks). */
    lj = tc_link_start(&l, "sm_90", "/nonexistent");
    CHECK(tc_link_add(lj, obj, len) == 0);
    tc_link_abandon(lj);
    tc_link_abandon(NULL);

    tc_linker_prewarm_wait();
    tc_sb_free(&image);
    tc_sb_free(&log);
    free(obj);
    return check_report("test_link");
}
