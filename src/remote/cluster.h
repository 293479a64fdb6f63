/* cluster: what a Redis Cluster client must work out for itself, since
 * hiredis has no cluster support: which slot a key lives in, where a
 * MOVED or ASK answer sends it, the slot map of CLUSTER SLOTS, and the
 * fields of an INFO answer. Pure
 * functions over text and parsed replies (fuzzed: tests/fuzz/fuzz_remote.c);
 * redis.c does the talking. */
#ifndef TC_REMOTE_CLUSTER_H
#define TC_REMOTE_CLUSTER_H

#include <stddef.h>

#include "remote/transport.h"

#define TC_CLUSTER_SLOTS 16384

/* The hash slot of a key: CRC16 (XMODEM) of the key, or of its hash tag
 * (the text between the first '{' and the next '}', when not empty),
 * modulo 16384. */
unsigned tc_cluster_slot(const void *key, size_t len);

/* Where an error answer redirects a command. */
typedef struct tc_redirect {
    int ask;              /* ASK: this command only, after ASKING; MOVED: the slot moved */
    unsigned slot;
    tc_remote_host node;  /* name "" when the answer left it out (the node asked) */
} tc_redirect;

/* Parses an error answer "MOVED <slot> <host>:<port>" or "ASK <slot>
 * <host>:<port>" (len bytes, not NUL-terminated; the host may be an IPv6
 * address, whose last ':' starts the port). 1 parsed, 0 not a redirect or
 * not well-formed. */
int tc_cluster_parse_redirect(const char *msg, size_t len, tc_redirect *out);

/* One range of slots served by one master. */
typedef struct tc_slot_range {
    unsigned first, last;
    tc_remote_host master;   /* name "" when the answer left it out */
} tc_slot_range;

/* The ranges of a CLUSTER SLOTS answer (reply: a hiredis redisReply),
 * malloc'd in *ranges. Ranges that are not well-formed are skipped. 0,
 * or -1 when the answer is not a list of ranges or memory ran out. */
int tc_cluster_parse_slots(const void *reply, tc_slot_range **ranges, size_t *n);

/* The array elements one reply may hold, all its arrays together. The
 * largest answer taskcache asks for is CLUSTER SLOTS: at most 16384
 * ranges of a few elements each. */
#define TC_REDIS_MAX_ELEMENTS (1u << 20)

/* Makes a hiredis reader (redisReader *) refuse, as a protocol error, a
 * reply announcing more array elements than TC_REDIS_MAX_ELEMENTS. Without
 * it hiredis allocates what an array header announces before a byte of it
 * arrives: "*400000000" from a confused or hostile server costs 3 GiB.
 * *count (living as long as the reader) holds the elements of the reply
 * being read, SIZE_MAX after a refusal (which hiredis reports as
 * REDIS_ERR_OOM). */
void tc_redis_bound_reader(void *reader, size_t *count);

/* The value of "name:value" in the text of an INFO answer (len bytes),
 * copied into out (cap bytes, cut to fit). 0, or -1 when it has none. */
int tc_redis_info_field(const char *text, size_t len, const char *name, char *out, size_t cap);

#endif
