/* record: encoding and self-verification of cache records (see record.h). */
#include "store/record.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

static const unsigned char magic[4] = {'T', 'C', 'R', 1};

/* Payloads above this are refused on decode: nothing taskcache writes is
 * near it, and it bounds what a corrupt size field can make us allocate. */
#define MAX_PAYLOAD ((uint64_t)4 << 30)

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void checksum(const unsigned char *hdr, const unsigned char *stored, size_t n,
                     tc_digest *out)
{
    tc_hash *h = tc_hash_new();
    if (!h) {
        memset(out, 0, sizeof *out);
        return;
    }
    tc_hash_update(h, hdr, 64);
    tc_hash_update(h, stored, n);
    tc_hash_final(h, out);
    tc_hash_free(h);
}

int tc_record_encode(uint32_t kind, const tc_digest *key, const void *payload, size_t len,
                     tc_sb *out)
{
    size_t bound = ZSTD_compressBound(len);
    if (tc_sb_reserve(out, TC_RECORD_HEADER + bound) != 0)
        return -1;
    size_t base = out->len;
    unsigned char *hdr = (unsigned char *)out->data + base;
    unsigned char *body = hdr + TC_RECORD_HEADER;
    /* Level 1: records are written on the edit path, where compression time
     * counts; object files still shrink 2-4x. */
    size_t z = ZSTD_compress(body, bound, payload, len, 1);
    if (ZSTD_isError(z))
        return -1;
    memcpy(hdr, magic, 4);
    put32(hdr + 4, TC_RECORD_FORMAT);
    put32(hdr + 8, kind);
    put32(hdr + 12, 1);
    put64(hdr + 16, len);
    put64(hdr + 24, z);
    memcpy(hdr + 32, key->b, 32);
    tc_digest sum;
    checksum(hdr, body, z, &sum);
    memcpy(hdr + 64, sum.b, 32);
    out->len = base + TC_RECORD_HEADER + z;
    out->data[out->len] = '\0';
    return 0;
}

int tc_record_decode(const void *data, size_t len, uint32_t kind, const tc_digest *key,
                     char **payload, size_t *plen)
{
    const unsigned char *hdr = data;
    *payload = NULL;
    *plen = 0;
    if (len < TC_RECORD_HEADER || memcmp(hdr, magic, 4) != 0 ||
        get32(hdr + 4) != TC_RECORD_FORMAT || get32(hdr + 8) != kind ||
        memcmp(hdr + 32, key->b, 32) != 0)
        return -1;
    uint32_t flags = get32(hdr + 12);
    uint64_t raw = get64(hdr + 16), stored = get64(hdr + 24);
    if (stored != len - TC_RECORD_HEADER || raw > MAX_PAYLOAD || (flags & ~1u))
        return -1;
    tc_digest sum;
    checksum(hdr, hdr + TC_RECORD_HEADER, (size_t)stored, &sum);
    if (memcmp(sum.b, hdr + 64, 32) != 0)
        return -1;
    char *out = malloc((size_t)raw + 1);
    if (!out)
        return -1;
    if (flags & 1) {
        size_t n = ZSTD_decompress(out, (size_t)raw, hdr + TC_RECORD_HEADER, (size_t)stored);
        if (ZSTD_isError(n) || n != raw) {
            free(out);
            return -1;
        }
    } else {
        if (stored != raw) {
            free(out);
            return -1;
        }
        memcpy(out, hdr + TC_RECORD_HEADER, (size_t)raw);
    }
    out[raw] = '\0';
    *payload = out;
    *plen = (size_t)raw;
    return 0;
}

void tc_field_put(tc_sb *sb, uint32_t tag, const void *p, size_t n)
{
    tc_sb_put_u32(sb, tag);
    tc_sb_put_blob(sb, p, n);
}

void tc_reader_init(tc_reader *r, const void *p, size_t n)
{
    r->p = p;
    r->end = r->p + n;
    r->bad = 0;
}

static int need(tc_reader *r, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = 1;
        return 0;
    }
    return 1;
}

uint32_t tc_read_u32(tc_reader *r)
{
    if (!need(r, 4))
        return 0;
    uint32_t v = get32(r->p);
    r->p += 4;
    return v;
}

uint64_t tc_read_u64(tc_reader *r)
{
    if (!need(r, 8))
        return 0;
    uint64_t v = get64(r->p);
    r->p += 8;
    return v;
}

const unsigned char *tc_read_blob(tc_reader *r, size_t *n)
{
    uint64_t len = tc_read_u64(r);
    if (r->bad || len > (uint64_t)(r->end - r->p)) {
        r->bad = 1;
        *n = 0;
        return NULL;
    }
    const unsigned char *p = r->p;
    r->p += len;
    *n = (size_t)len;
    return p;
}

int tc_field_next(tc_reader *r, uint32_t *tag, const unsigned char **p, size_t *n)
{
    if (r->p == r->end && !r->bad)
        return 0;
    *tag = tc_read_u32(r);
    *p = tc_read_blob(r, n);
    return r->bad ? -1 : 1;
}
