/* hash: SHA-256 through libcrypto's SHA256_* functions (hardware
 * accelerated where the CPU has SHA extensions).
 *
 * Not the EVP interface: a process's first EVP digest initializes
 * OpenSSL's providers (and reads openssl.cnf), 1-2 ms that a warm build --
 * a host's first tc_build, a fresh CLI -- pays before its one record read;
 * SHA256_Init costs nothing and runs the same code. The functions are
 * deprecated since OpenSSL 3.0 but still exported; asking for the 1.1.1 API
 * declares them without the deprecation attribute. */
#define OPENSSL_API_COMPAT 10101
#include "util/hash.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <string.h>

struct tc_hash {
    SHA256_CTX ctx;
};

tc_hash *tc_hash_new(void)
{
    tc_hash *h = (tc_hash *)OPENSSL_malloc(sizeof *h);
    if (h)
        SHA256_Init(&h->ctx);
    return h;
}

void tc_hash_free(tc_hash *h)
{
    if (h)
        OPENSSL_cleanse(h, sizeof *h); /* an HMAC's state holds the secret's pad */
    OPENSSL_free(h);
}

void tc_hash_update(tc_hash *h, const void *p, size_t n)
{
    if (n)
        SHA256_Update(&h->ctx, p, n);
}

void tc_hash_field(tc_hash *h, const char *tag, const void *p, size_t n)
{
    unsigned char len[8];
    size_t tl = strlen(tag);
    tc_hash_update(h, tag, tl + 1); /* includes the NUL as separator */
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    tc_hash_update(h, len, sizeof len);
    tc_hash_update(h, p, n);
}

void tc_hash_field_str(tc_hash *h, const char *tag, const char *s)
{
    tc_hash_field(h, tag, s ? s : "", s ? strlen(s) : 0);
}

void tc_hash_final(tc_hash *h, tc_digest *out)
{
    SHA256_Final(out->b, &h->ctx);
    SHA256_Init(&h->ctx);
}

void tc_hmac_key_init(tc_hmac_key *k, const void *secret, size_t len)
{
    unsigned char block[64];
    memset(block, 0, sizeof block);
    if (len > sizeof block) {
        tc_digest d; /* a secret longer than a block is hashed first */
        tc_digest_of(secret, len, &d);
        memcpy(block, d.b, sizeof d.b);
    } else if (len) {
        memcpy(block, secret, len);
    }
    for (size_t i = 0; i < sizeof block; i++) {
        k->ipad[i] = block[i] ^ 0x36;
        k->opad[i] = block[i] ^ 0x5c;
    }
}

tc_hash *tc_hmac_begin(const tc_hmac_key *k)
{
    tc_hash *h = tc_hash_new();
    if (h)
        tc_hash_update(h, k->ipad, sizeof k->ipad);
    return h;
}

void tc_hmac_final(const tc_hmac_key *k, tc_hash *h, tc_digest *out)
{
    tc_digest inner;
    tc_hash_final(h, &inner);
    tc_hash_update(h, k->opad, sizeof k->opad);
    tc_hash_update(h, inner.b, sizeof inner.b);
    tc_hash_final(h, out);
    tc_hash_free(h);
}

int tc_digest_equal(const tc_digest *a, const tc_digest *b)
{
    unsigned char diff = 0;
    for (int i = 0; i < TC_DIGEST_LEN; i++)
        diff |= a->b[i] ^ b->b[i];
    return diff == 0;
}

void tc_digest_of(const void *p, size_t n, tc_digest *out)
{
    /* not SHA256(): since OpenSSL 3.0 that one-shot goes through EVP */
    SHA256_CTX c;
    SHA256_Init(&c);
    SHA256_Update(&c, p, n);
    SHA256_Final(out->b, &c);
}

void tc_digest_hex(const tc_digest *d, char out[TC_DIGEST_HEX_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < TC_DIGEST_LEN; i++) {
        out[2 * i] = hex[d->b[i] >> 4];
        out[2 * i + 1] = hex[d->b[i] & 15];
    }
    out[TC_DIGEST_HEX_LEN] = '\0';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int tc_digest_from_hex(const char *s, tc_digest *out)
{
    for (int i = 0; i < TC_DIGEST_LEN; i++) {
        int hi = hexval(s[2 * i]);
        int lo = hi < 0 ? -1 : hexval(s[2 * i + 1]);
        if (lo < 0)
            return -1;
        out->b[i] = (unsigned char)(hi << 4 | lo);
    }
    return s[TC_DIGEST_HEX_LEN] == '\0' ? 0 : -1;
}

uint64_t tc_digest_u64(const tc_digest *d)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)d->b[i] << (8 * i);
    return v;
}
