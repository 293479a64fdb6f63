/* payload: decoding what unit, task and module records hold. Records have
 * verified checksums before they get here, but the decoders still check
 * every length (they are fuzzed with arbitrary bytes): a malformed payload
 * is a miss, never a crash. */
#include <stdlib.h>
#include <string.h>

#include "../store/record.h"
#include "payload.h"

void tc_payload_free_object(tc_object_payload *o)
{
    tc_sb_free(&o->object);
    tc_sb_free(&o->log);
    tc_sb_free(&o->meta);
    for (size_t i = 0; i < o->nentries; i++)
        tc_entry_clear(&o->entries[i]);
    free(o->entries);
    memset(o, 0, sizeof *o);
}

/* Counts the fields of one tag; -1 when the field list is malformed. */
static long count_fields(const char *p, size_t n, uint32_t want)
{
    tc_reader rd;
    tc_reader_init(&rd, p, n);
    uint32_t tag;
    const unsigned char *f;
    size_t len;
    long count = 0;
    int rc;
    while ((rc = tc_field_next(&rd, &tag, &f, &len)) == 1)
        count += tag == want;
    return rc < 0 ? -1 : count;
}

int tc_payload_decode_object(const char *p, size_t n, tc_object_payload *o)
{
    memset(o, 0, sizeof *o);
    long nent = count_fields(p, n, TC_F_ENTRY);
    if (nent < 0 || !(o->entries = calloc(nent ? (size_t)nent : 1, sizeof *o->entries)))
        return -1;
    tc_reader rd;
    tc_reader_init(&rd, p, n);
    uint32_t tag;
    const unsigned char *f;
    size_t len;
    int rc;
    while ((rc = tc_field_next(&rd, &tag, &f, &len)) == 1) {
        if (tag == TC_F_OBJECT && !o->have_object) {
            tc_sb_append(&o->object, f, len);
            o->have_object = 1;
        } else if (tag == TC_F_ENTRY) {
            if (tc_entry_decode(f, len, &o->entries[o->nentries]) != 0)
                break;
            o->nentries++;
        } else if (tag == TC_F_LOG) {
            tc_sb_append(&o->log, f, len);
        } else if (tag == TC_F_HOST_META && !o->have_meta) {
            tc_sb_append(&o->meta, f, len);
            o->have_meta = 1;
        }
    }
    if (rc != 0 || !o->have_object || o->object.oom || o->log.oom || o->meta.oom) {
        tc_payload_free_object(o);
        return -1;
    }
    return 0;
}

int tc_payload_decode_module(const char *p, size_t n, tc_result *r, size_t *units)
{
    *units = 0;
    long nent = count_fields(p, n, TC_F_ENTRY);
    if (nent < 0 || !(r->entries = calloc(nent ? (size_t)nent : 1, sizeof *r->entries)))
        return -1;
    tc_reader rd;
    tc_reader_init(&rd, p, n);
    uint32_t tag;
    const unsigned char *f;
    size_t len;
    int rc, have_image = 0;
    while ((rc = tc_field_next(&rd, &tag, &f, &len)) == 1) {
        if (tag == TC_F_IMAGE && !have_image) {
            if (!(r->image = malloc(len ? len : 1)))
                return -1;
            memcpy(r->image, f, len);
            r->image_len = len;
            have_image = 1;
        } else if (tag == TC_F_ENTRY) {
            if (tc_entry_decode(f, len, &r->entries[r->nentries]) != 0)
                return -1;
            r->entries[r->nentries].cached = 1;
            r->nentries++;
        } else if (tag == TC_F_UNIT_KEY) {
            (*units)++;
        } else if (tag == TC_F_WHOLE_REASON && !r->whole_reason) {
            if (!(r->whole_reason = malloc(len + 1)))
                return -1;
            memcpy(r->whole_reason, f, len);
            r->whole_reason[len] = '\0';
        } else if (tag == TC_F_LOG) {
            tc_sb_append(&r->diag, f, len);
        }
    }
    return rc == 0 && have_image && !r->diag.oom ? 0 : -1;
}
