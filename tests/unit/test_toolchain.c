/* Tests of file identities (a compiler's or linker's identity goes into
 * every key): every byte counts, wherever it lies in the file, the same
 * bytes give the same identity, and a file that cannot be read is an
 * error that names it. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "link/link.h"
#include "toolchain/toolchain.h"

#define SIZE ((9u << 20) + 3) /* three 4 MiB chunks, the last one short */

static char dir[] = "/tmp/tc-test-toolchain-XXXXXX";
static int files;

/* A new file (a new path, so no identity is remembered for it) holding
 * data; its identity. */
static void identity_of(const char *data, size_t len, char id[TC_DIGEST_HEX_LEN + 1])
{
    char path[256];
    snprintf(path, sizeof path, "%s/f%d", dir, files++);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, len, f) == len);
    if (f)
        fclose(f);
    tc_sb err = TC_SB_INIT;
    CHECK(tc_file_identity(path, NULL, id, &err) == 0);
    CHECK(strlen(id) == TC_DIGEST_HEX_LEN);
    tc_sb_free(&err);
    unlink(path);
}

int main(void)
{
    CHECK(mkdtemp(dir) != NULL);
    char *data = malloc(SIZE);
    CHECK(data != NULL);
    if (!data)
        return 1;
    uint64_t x = 88172645463325252ull; /* xorshift: no two chunks alike */
    for (size_t i = 0; i < SIZE; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data[i] = (char)x;
    }

    char base[TC_DIGEST_HEX_LEN + 1], again[TC_DIGEST_HEX_LEN + 1], other[TC_DIGEST_HEX_LEN + 1];
    identity_of(data, SIZE, base);
    identity_of(data, SIZE, again);
    CHECK_STR(again, base);

    /* one byte changed in the first chunk, at a chunk boundary, in the
     * short last chunk: each is another identity */
    size_t at[] = {0, (4u << 20) - 1, 4u << 20, SIZE - 1};
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        data[at[k]] ^= 1;
        identity_of(data, SIZE, other);
        CHECK(strcmp(other, base) != 0);
        data[at[k]] ^= 1;
    }
    /* one byte shorter, or two chunks swapped: other identities */
    identity_of(data, SIZE - 1, other);
    CHECK(strcmp(other, base) != 0);
    char *swapped = malloc(8u << 20);
    if (swapped) {
        memcpy(swapped, data + (4u << 20), 4u << 20);
        memcpy(swapped + (4u << 20), data, 4u << 20);
        char a[TC_DIGEST_HEX_LEN + 1], b[TC_DIGEST_HEX_LEN + 1];
        identity_of(data, 8u << 20, a);
        identity_of(swapped, 8u << 20, b);
        CHECK(strcmp(a, b) != 0);
        free(swapped);
    }
    /* an empty file has an identity, not that of a one-byte file */
    identity_of("", 0, other);
    identity_of("x", 1, again);
    CHECK(strcmp(other, again) != 0);

    /* a file that is not there: an error that names it */
    tc_sb err = TC_SB_INIT;
    char path[300];
    snprintf(path, sizeof path, "%s/missing", dir);
    CHECK(tc_file_identity(path, NULL, other, &err) == -1);
    CHECK_CONTAINS(err.data, "missing");
    tc_sb_free(&err);

    /* a linker library: found either way, hashed only when its identity
     * goes into keys that anyone sees (a build without a cache keys
     * nothing, and need not read 100 MB) */
    snprintf(path, sizeof path, "%s/libnvJitLink.so", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, SIZE, f) == SIZE);
    if (f)
        fclose(f);
    setenv("TASKCACHE_NVJITLINK", path, 1);
    tc_linker l;
    CHECK(tc_linker_find(NULL, NULL, 0, 1, &l, &err) == 0 && l.kind == TC_LINKER_NVJITLINK);
    CHECK_CONTAINS(l.id, "unhashed");
    CHECK(tc_linker_find(NULL, NULL, 1, 1, &l, &err) == 0 && l.kind == TC_LINKER_NVJITLINK);
    char want[TC_DIGEST_HEX_LEN + 16];
    snprintf(want, sizeof want, "nvJitLink %s", base);
    CHECK_STR(l.id, want);
    tc_sb_free(&err);
    unlink(path);

    free(data);
    rmdir(dir);
    return check_report("test_toolchain");
}
