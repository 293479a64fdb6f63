/* libFuzzer target: the record decoder, the payload decoders and the ELF
 * kernel reader. Arbitrary bytes as a record, as a unit/task payload, as a
 * module payload (of units or of tasks), as a group manifest, as a memo of
 * canonical texts, as an entry and as an object or image must be rejected or
 * decoded cleanly; a payload wrapped in a well-formed record must come back
 * byte for byte. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/handles.h"
#include "link/elf.h"
#include "pipeline/canon_memo.h"
#include "pipeline/payload.h"
#include "store/record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int kernel_seen(void *ctx, const char *name, size_t len)
{
    *(size_t *)ctx += len + (name[len - (len > 0)] != 0); /* touches the name's bytes */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* 1. as a record, with the key it names (so more of it is checked) */
    tc_digest key;
    memset(&key, 0, sizeof key);
    if (size >= 64)
        memcpy(key.b, data + 32, 32);
    for (uint32_t kind = 1; kind <= TC_REC_KINDS; kind++) {
        char *p = NULL;
        size_t n = 0;
        int decoded = tc_record_decode(data, size, kind, &key, NULL, &p, &n) == 0;
        free(p);
        /* verify's judgement agrees with a build's read of a plain record */
        int judged = tc_record_check(data, size, kind, &key, NULL);
        if (decoded != (judged == 1))
            __builtin_trap();
    }
    /* 2. as payloads */
    tc_unit u;
    memset(&u, 0, sizeof u);
    (void)tc_payload_decode_unit((const char *)data, size, &u);
    tc_unit_free(&u);
    tc_digest *keys = NULL;
    char **names = NULL;
    size_t ntasks = 0;
    if (tc_payload_decode_group((const char *)data, size, &keys, &names, &ntasks) == 0) {
        for (size_t i = 0; i < ntasks; i++)
            free(names[i]);
        free(names);
        free(keys);
    }
    /* the module decoders keep the payload they are given (malloc'd) */
    tc_result *r = tc_result_new();
    char *copy = malloc(size + 1);
    if (r && copy) {
        memcpy(copy, data, size);
        size_t units;
        (void)tc_payload_decode_module(&copy, size, r, "fuzz.ptx", &units);
        if (r->image && r->image_len > size) /* the image is a part of the payload */
            abort();
    }
    tc_result_free(r);
    free(copy);
    char *image = NULL;
    size_t image_len = 0;
    if ((copy = malloc(size + 1))) {
        memcpy(copy, data, size);
        if (tc_payload_decode_task_module(&copy, size, &key, &key, 1, &image, &image_len) == 0 &&
            image_len > size)
            abort();
        free(image);
        free(copy);
    }
    size_t texts;
    (void)tc_canon_memo_check_payload((const char *)data, size, &texts);
    tc_entry_info e;
    if (tc_entry_decode(data, size, &e) == 0)
        tc_entry_clear(&e);
    /* 3. as an object or a linked image */
    size_t total = 0;
    (void)tc_elf_kernels(data, size, kernel_seen, &total);
    /* 4. a round trip through a well-formed record */
    tc_sb rec = TC_SB_INIT;
    if (tc_record_encode(TC_REC_UNIT, &key, data, size, NULL, &rec) == 0) {
        char *p = NULL;
        size_t n = 0;
        if (tc_record_decode(rec.data, rec.len, TC_REC_UNIT, &key, NULL, &p, &n) != 0 || n != size ||
            (size && memcmp(p, data, size) != 0))
            abort();
        free(p);
    }
    tc_sb_free(&rec);
    return 0;
}
