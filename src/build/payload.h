/* payload.h: decoders of record payloads (payload.c). Internal. */
#ifndef TC_BUILD_PAYLOAD_H
#define TC_BUILD_PAYLOAD_H

#include "internal.h"

/* What unit and task records hold. */
typedef struct tc_object_payload {
    tc_sb object;              /* relocatable object */
    tc_sb log;                 /* compiler log */
    tc_sb meta;                /* host metadata (tasks) */
    int have_object, have_meta;
    tc_entry_info *entries;    /* the kernels' metadata */
    size_t nentries;
} tc_object_payload;

/* 0, or -1 when malformed (nothing to free then). */
int tc_payload_decode_object(const char *p, size_t n, tc_object_payload *out);
void tc_payload_free_object(tc_object_payload *o);

/* Decodes a module record into r (image, entries, whole reason, replayed
 * warnings); *units counts the unit keys it names. 0, or -1 malformed (the
 * caller then discards what r received). */
int tc_payload_decode_module(const char *p, size_t n, tc_result *r, size_t *units);

#endif
