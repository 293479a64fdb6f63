/* hash: the one hashing entry point (SHA-256 through OpenSSL's libcrypto).
 * Keys for shared caches need collision resistance, so nothing here is a
 * fast non-cryptographic hash. Fields fed with tc_hash_field are
 * length-prefixed, so ("ab","c") and ("a","bc") never collide. */
#ifndef TC_HASH_H
#define TC_HASH_H

#include <stddef.h>
#include <stdint.h>

#define TC_DIGEST_LEN 32
#define TC_DIGEST_HEX_LEN 64

typedef struct tc_digest {
    unsigned char b[TC_DIGEST_LEN];
} tc_digest;

typedef struct tc_hash tc_hash;

tc_hash *tc_hash_new(void);                 /* NULL when out of memory */
void tc_hash_free(tc_hash *h);
void tc_hash_update(tc_hash *h, const void *p, size_t n);
/* A tagged, length-prefixed field: tag names what the bytes are. */
void tc_hash_field(tc_hash *h, const char *tag, const void *p, size_t n);
void tc_hash_field_str(tc_hash *h, const char *tag, const char *s);
void tc_hash_final(tc_hash *h, tc_digest *out);  /* h may be reused after */

/* HMAC-SHA256 (RFC 2104) with a secret: records of a cache shared with
 * people who do not hold the secret authenticate themselves with it. The
 * key holds the secret's padded forms, so the secret itself need not be
 * kept. */
typedef struct tc_hmac_key {
    unsigned char ipad[64], opad[64];
} tc_hmac_key;

void tc_hmac_key_init(tc_hmac_key *k, const void *secret, size_t len);
/* A hash to feed the message into (tc_hash_update), then tc_hmac_final.
 * NULL when out of memory. */
tc_hash *tc_hmac_begin(const tc_hmac_key *k);
/* The HMAC of what was fed; frees h. */
void tc_hmac_final(const tc_hmac_key *k, tc_hash *h, tc_digest *out);
/* Compares digests in constant time (a forger learns nothing from how
 * long a comparison took). 1 equal, 0 not. */
int tc_digest_equal(const tc_digest *a, const tc_digest *b);

/* One-shot helper. */
void tc_digest_of(const void *p, size_t n, tc_digest *out);
/* 64 lowercase hex digits + NUL. */
void tc_digest_hex(const tc_digest *d, char out[TC_DIGEST_HEX_LEN + 1]);
/* 0 on success, -1 if s is not exactly 64 hex digits. */
int tc_digest_from_hex(const char *s, tc_digest *out);
/* First 8 bytes as an integer, for content-defined decisions. */
uint64_t tc_digest_u64(const tc_digest *d);

#endif
