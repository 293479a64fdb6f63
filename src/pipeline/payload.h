/* payload: what each kind of record holds (store/record.h gives the
 * fields), written and read in one place. Internal.
 *
 *   unit record    OBJECT, ENTRY..., LOG?                 a compile unit
 *   task record    NAME, OBJECT, ENTRY..., HOST_META?, LOG?   a host's task
 *   module record  IMAGE, ENTRY..., UNIT_KEY..., WHOLE_REASON?, LOG?
 *                  (tc_build)  or  IMAGE, TASK_KEY... (tc_build_tasks)
 *   group record   (TASK_KEY, NAME)...                    a group manifest
 *
 * A unit or task record's LOG is its compiler's whole output, from which
 * its kernels' -v lines are read (tc_payload_decode_unit); a module
 * record's LOG holds only the warnings to replay, and its ENTRY fields
 * carry the kernels' -v lines themselves.
 *
 * Decoders check every length (they are fuzzed with arbitrary bytes) and
 * return 0, or -1 when the payload is malformed, having left nothing to
 * free; the record reader then counts the record as bad. */
#ifndef TC_PIPELINE_PAYLOAD_H
#define TC_PIPELINE_PAYLOAD_H

#include "pipeline/session.h"

/* Reads u's record (TC_REC_UNIT or TC_REC_TASK) into u through the
 * session's record reader (first_look: see tc_session_read_record). 1
 * hit, 0 miss. */
int tc_payload_read_unit(tc_session *s, uint32_t kind, tc_unit *u, int first_look);
/* Reads the records of n units (kind as above) into them and sets each
 * one's hit: those this machine lacks are first asked of the remote tier
 * together (tc_session_prefetch), and those it lacks too are not asked
 * again; then every read (a file read, a checksum and a decompression of
 * its own) runs on the -j threads. 0, or -1 out of memory. */
int tc_payload_read_units(tc_session *s, uint32_t kind, tc_unit_at_fn unit, void *ctx,
                          size_t n);
/* Stores u's record (name: the task's, NULL for a unit). */
void tc_payload_write_unit(tc_session *s, uint32_t kind, const char *name, const tc_unit *u);

/* A unit or task record from u (name: the task's, NULL for a unit). */
void tc_payload_encode_unit(const char *name, const tc_unit *u, tc_sb *out);
/* Fills u's object, log, entries (their -v lines from the log) and host
 * metadata (u holds none yet). */
int tc_payload_decode_unit(const char *p, size_t n, tc_unit *u);

/* A module record of tc_build: the result's image and entries, the keys
 * of the units it was linked from, the warnings to replay, kept without
 * the input's name (the build's: a record serves any file of that text). */
void tc_payload_encode_module(const tc_result *r, const tc_digest *unit_keys, size_t n,
                              const tc_sb *warnings, const char *name, tc_sb *out);
/* Decodes a module record into r (image, entries, whole reason, warnings
 * replayed under `name`); *units counts the unit keys it names. The image
 * is moved to the front of *p (malloc'd), which becomes r->image: *p is
 * then NULL. On -1 the caller clears r (tc_result_clear) and frees *p. */
int tc_payload_decode_module(char **p, size_t n, tc_result *r, const char *name,
                             size_t *units);

/* A module record of tc_build_tasks: the image, the ordered task keys and
 * the digests of the tasks' contents it was linked from. */
void tc_payload_encode_task_module(const void *image, size_t len, const tc_digest *keys,
                                   const tc_digest *contents, size_t n, tc_sb *out);
/* Its image, when it names exactly the tasks keys[0..n) with exactly these
 * contents: moved to the front of *p (malloc'd), which becomes *image (*p
 * is then NULL). */
int tc_payload_decode_task_module(char **p, size_t n, const tc_digest *keys,
                                  const tc_digest *contents, size_t nkeys, char **image,
                                  size_t *len);

/* A group manifest: ordered task keys and names. */
void tc_payload_encode_group(const tc_digest *keys, char *const *names, size_t n, tc_sb *out);
/* Its tasks: *keys and *names (malloc'd, names each malloc'd), *count >= 1. */
int tc_payload_decode_group(const char *p, size_t n, tc_digest **keys, char ***names,
                            size_t *count);

#endif
