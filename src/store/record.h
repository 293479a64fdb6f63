/* record: the on-disk record format shared by every cache tier.
 *
 *   offset size
 *   0      4   magic "TCR\x01"
 *   4      4   record format version (TC_RECORD_FORMAT)
 *   8      4   kind (TC_REC_*)
 *   12     4   flags (bit 0: payload is zstd-compressed; bit 1: bytes 64..95
 *              are an HMAC-SHA256 under the cache's secret)
 *   16     8   payload size, uncompressed
 *   24     8   stored payload size
 *   32    32   key (the SHA-256 the record is filed under)
 *   64    32   SHA-256 (or HMAC-SHA256) over bytes 0..63 and the stored payload
 *   96     .   stored payload
 *
 * A record verifies itself: a truncated, extended, corrupted or misfiled
 * record never decodes. Anyone who can write a record can also make a
 * plain SHA-256 verify; only an HMAC keeps out writers who do not hold the
 * secret. Sizes are checked before anything is allocated: a record of a
 * kind may hold at most tc_record_max_payload(kind) bytes, and inflate at
 * most TC_RECORD_MAX_RATIO times (zstd level 1 makes objects 2-4x smaller:
 * a frame that claims more is a decompression bomb; the writer stores a
 * payload that would compress further as it is), so no record, however
 * forged, costs more memory than that.
 * A compressed payload is stored as independent zstd frames of
 * TC_RECORD_FRAME bytes each (the last shorter), one after another, each
 * declaring its size: frames compress and decompress on several threads.
 * The payload is a sequence of fields, each (u32 tag, u64 length, bytes),
 * so readers skip tags they do not know. */
#ifndef TC_STORE_RECORD_H
#define TC_STORE_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "util/hash.h"
#include "util/strbuf.h"

/* 2: payloads in frames of TC_RECORD_FRAME bytes (1: one frame). The
 * format is part of every key, so versions that write different formats
 * keep different records, side by side. */
#define TC_RECORD_FORMAT 2u
#define TC_RECORD_FRAME ((size_t)512 << 10)
#define TC_RECORD_HEADER 96u
#define TC_RECORD_MAX_RATIO 4096u

/* TC_REC_CANON: the canonical texts of a module's functions
 * (pipeline/canon_memo.c), a local speed-up of keying. */
enum { TC_REC_UNIT = 1, TC_REC_MODULE = 2, TC_REC_TASK = 3, TC_REC_GROUP = 4, TC_REC_CANON = 5 };
#define TC_REC_KINDS 5

enum {
    TC_F_OBJECT = 1,        /* unit: relocatable object */
    TC_F_IMAGE = 2,         /* module: linked cubin */
    TC_F_ENTRY = 3,         /* per-entry metadata (repeated) */
    TC_F_UNIT_KEY = 4,      /* module: key of a unit it was linked from (repeated) */
    TC_F_WHOLE_REASON = 5,  /* module: why it was compiled whole */
    TC_F_LOG = 6,           /* compiler messages worth replaying (warnings) */
    TC_F_HOST_META = 7,     /* task: the host's metadata blob */
    TC_F_TASK_KEY = 8,      /* module of tasks, group: a task key (repeated, in order) */
    TC_F_NAME = 9,          /* task: its name */
    TC_F_CANON_TEXT = 10,   /* canonical texts: one function's (repeated) */
    TC_F_TASK_CONTENT = 11  /* module of tasks: a digest of each task's object and host
                               metadata as linked (repeated, in order) */
};

/* The most a payload of this kind may hold: what the kind can carry
 * (an object, a linked image, a list of keys), with room to spare. */
uint64_t tc_record_max_payload(uint32_t kind);
/* The most bytes a record file of this kind may have. */
uint64_t tc_record_max_file(uint32_t kind);

/* Builds a complete record (header + compressed payload) into out; mac:
 * the cache's secret, or NULL for a plain checksum. Returns 0, or -1 out
 * of memory / compression failure / a payload past its kind's limit. */
int tc_record_encode(uint32_t kind, const tc_digest *key, const void *payload, size_t len,
                     const tc_hmac_key *mac, tc_sb *out);

/* Verifies data as a record of `kind` filed under `key` (with mac: an
 * HMAC under it, without: a plain checksum; a record of the other sort
 * does not verify) and returns its payload (malloc'd). Returns 0, or -1
 * when the record is not valid. */
int tc_record_decode(const void *data, size_t len, uint32_t kind, const tc_digest *key,
                     const tc_hmac_key *mac, char **payload, size_t *plen);

/* How a reader that holds mac (NULL: no secret) judges a record of kind
 * filed under key: 1 it decodes; 0 it is damaged; -1 it is not this
 * reader's to judge. That is a record of another format (another version
 * of taskcache keeps its records beside ours), or one authenticated with
 * an HMAC that the reader cannot compute or that does not match its
 * secret: a record made under another secret, which shares the directory,
 * cannot be told from a damaged one of ours by its checksum. */
int tc_record_check(const void *data, size_t len, uint32_t kind, const tc_digest *key,
                    const tc_hmac_key *mac);

/* Payload fields. */
void tc_field_put(tc_sb *sb, uint32_t tag, const void *p, size_t n);

typedef struct tc_reader {
    const unsigned char *p, *end;
    int bad;  /* set once a read ran past the end */
} tc_reader;

void tc_reader_init(tc_reader *r, const void *p, size_t n);
/* Next field: 1 got one, 0 end of data, -1 malformed. */
int tc_field_next(tc_reader *r, uint32_t *tag, const unsigned char **p, size_t *n);
uint32_t tc_read_u32(tc_reader *r);
uint64_t tc_read_u64(tc_reader *r);
/* A length-prefixed blob; returns a pointer into the data (or NULL). */
const unsigned char *tc_read_blob(tc_reader *r, size_t *n);

#endif
