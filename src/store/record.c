/* record: encoding and self-verification of cache records (see record.h). */
#include "store/record.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "util/pool.h"

static const unsigned char magic[4] = {'T', 'C', 'R', 1};

#define FLAG_ZSTD 1u
#define FLAG_HMAC 2u

uint64_t tc_record_max_payload(uint32_t kind)
{
    switch (kind) {
    case TC_REC_MODULE: return (uint64_t)1 << 30;  /* a linked image */
    case TC_REC_GROUP: return (uint64_t)64 << 20;  /* task keys and names */
    default: return (uint64_t)256 << 20;           /* one unit's or task's object */
    }
}

uint64_t tc_record_max_file(uint32_t kind)
{
    return TC_RECORD_HEADER + ZSTD_compressBound((size_t)tc_record_max_payload(kind));
}

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

/* The SHA-256, or with mac the HMAC, of the header's first 64 bytes and
 * the stored payload. -1 out of memory. */
static int checksum(const unsigned char *hdr, const unsigned char *stored, size_t n,
                    const tc_hmac_key *mac, tc_digest *out)
{
    tc_hash *h = mac ? tc_hmac_begin(mac) : tc_hash_new();
    if (!h)
        return -1;
    tc_hash_update(h, hdr, 64);
    tc_hash_update(h, stored, n);
    if (mac) {
        tc_hmac_final(mac, h, out);
    } else {
        tc_hash_final(h, out);
        tc_hash_free(h);
    }
    return 0;
}

/* The frames of a payload of len bytes: TC_RECORD_FRAME raw bytes each,
 * the last shorter; an empty payload is one empty frame. */
static size_t frame_count(uint64_t len)
{
    return len ? (size_t)((len + TC_RECORD_FRAME - 1) / TC_RECORD_FRAME) : 1;
}

static size_t frame_len(uint64_t len, size_t i)
{
    uint64_t left = len - (uint64_t)i * TC_RECORD_FRAME;
    return (size_t)(left < TC_RECORD_FRAME ? left : TC_RECORD_FRAME);
}

/* Where frame i is compressed to, before the frames are moved together:
 * every frame before the last is full, so each slot is a full frame's
 * bound. */
static size_t frame_slot(size_t i) { return i * ZSTD_compressBound(TC_RECORD_FRAME); }

/* Room for every frame of a payload of len bytes, compressed. */
static size_t frames_bound(uint64_t len)
{
    size_t last = frame_count(len) - 1;
    return frame_slot(last) + ZSTD_compressBound(frame_len(len, last));
}

/* Each thread keeps one compression and one decompression context and
 * reuses it. A context made for one call (ZSTD_compress, ZSTD_decompress)
 * tests the CPU's features with cpuid every time, which a virtual machine
 * traps: 14-15 us a frame on the 2-core machine, more than decompressing a
 * unit's 20 KB, and a relink reads a hundred records. The contexts are
 * freed when their thread ends, the main thread's at exit. */
static pthread_key_t cctx_key, dctx_key;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;
static int ctx_keys_ok;

static void free_cctx(void *c) { ZSTD_freeCCtx(c); }
static void free_dctx(void *d) { ZSTD_freeDCtx(d); }
static void make_ctx_keys(void)
{
    ctx_keys_ok = pthread_key_create(&cctx_key, free_cctx) == 0 &&
                  pthread_key_create(&dctx_key, free_dctx) == 0;
}

/* A host may unload the library while its threads live on: their keys'
 * destructors must not point into code that is gone. The unloading
 * thread frees its own contexts; other threads' stay allocated. */
__attribute__((destructor)) static void drop_ctx_keys(void)
{
    if (!ctx_keys_ok)
        return;
    free_cctx(pthread_getspecific(cctx_key));
    free_dctx(pthread_getspecific(dctx_key));
    pthread_key_delete(cctx_key);
    pthread_key_delete(dctx_key);
    ctx_keys_ok = 0;
}

static void *make_cctx(void) { return ZSTD_createCCtx(); }
static void *make_dctx(void) { return ZSTD_createDCtx(); }

/* This thread's context of a key, or NULL where there is none to keep (no
 * key, no memory): the caller then uses a context for the one call. */
static void *thread_ctx(const pthread_key_t *key, void *(*make)(void), void (*drop)(void *))
{
    pthread_once(&ctx_once, make_ctx_keys);
    if (!ctx_keys_ok)
        return NULL;
    void *c = pthread_getspecific(*key);
    if (!c && (c = make()) != NULL && pthread_setspecific(*key, c) != 0) {
        drop(c);
        c = NULL;
    }
    return c;
}

/* Frames compress and decompress on threads of their own: a linked image
 * of 2.2 MB is five frames, and decompressing it on one thread was most of
 * a warm build. */
#define FRAME_THREADS_MAX 8

typedef struct {
    const unsigned char *raw; /* the payload */
    uint64_t len;
    unsigned char *body;      /* where the frames go (frames_bound bytes) */
    size_t *size;             /* per frame: its compressed bytes, or a zstd error code */
} frame_job;

static tc_pool_step compress_frame(void *ctx, size_t i)
{
    frame_job *f = ctx;
    size_t n = frame_len(f->len, i);
    /* level 1: records are written on the edit path; objects still shrink 2-4x */
    ZSTD_CCtx *c = thread_ctx(&cctx_key, make_cctx, free_cctx);
    void *to = f->body + frame_slot(i);
    const void *from = f->raw + i * TC_RECORD_FRAME;
    f->size[i] = c ? ZSTD_compressCCtx(c, to, ZSTD_compressBound(n), from, n, 1)
                   : ZSTD_compress(to, ZSTD_compressBound(n), from, n, 1);
    return TC_POOL_DONE;
}

/* The payload as zstd frames, one after another, into body (frames_bound
 * bytes): each frame is compressed into its slot, then the frames are moved
 * together. The stored size, or 0 when compression failed. */
static size_t compress_frames(const void *payload, uint64_t len, unsigned char *body)
{
    size_t n = frame_count(len), z = 0;
    frame_job f = {payload, len, body, malloc(n * sizeof *f.size)};
    int ok = f.size &&
             tc_pool_run_range(n, tc_pool_cpus(FRAME_THREADS_MAX), compress_frame, &f) == 0;
    for (size_t i = 0; ok && i < n; i++) {
        if ((ok = !ZSTD_isError(f.size[i]))) {
            /* z <= frame_slot(i): frames only ever move left */
            memmove(body + z, body + frame_slot(i), f.size[i]);
            z += f.size[i];
        }
    }
    free(f.size);
    return ok ? z : 0;
}

int tc_record_encode(uint32_t kind, const tc_digest *key, const void *payload, size_t len,
                     const tc_hmac_key *mac, tc_sb *out)
{
    if (len > tc_record_max_payload(kind))
        return -1; /* readers would refuse it */
    if (tc_sb_reserve(out, TC_RECORD_HEADER + frames_bound(len)) != 0)
        return -1;
    size_t base = out->len;
    unsigned char *hdr = (unsigned char *)out->data + base;
    unsigned char *body = hdr + TC_RECORD_HEADER;
    size_t z = compress_frames(payload, len, body);
    if (!z)
        return -1;
    /* past the ratio readers accept (a frame like that is a bomb to them):
     * stored as it is */
    uint32_t zstd = len / TC_RECORD_MAX_RATIO <= z ? FLAG_ZSTD : 0;
    if (!zstd) {
        if (tc_sb_reserve(out, TC_RECORD_HEADER + len) != 0)
            return -1;
        hdr = (unsigned char *)out->data + base;
        body = hdr + TC_RECORD_HEADER;
        memcpy(body, payload, len);
        z = len;
    }
    memcpy(hdr, magic, 4);
    put32(hdr + 4, TC_RECORD_FORMAT);
    put32(hdr + 8, kind);
    put32(hdr + 12, zstd | (mac ? FLAG_HMAC : 0));
    put64(hdr + 16, len);
    put64(hdr + 24, z);
    memcpy(hdr + 32, key->b, 32);
    tc_digest sum;
    if (checksum(hdr, body, z, mac, &sum) != 0)
        return -1;
    memcpy(hdr + 64, sum.b, 32);
    out->len = base + TC_RECORD_HEADER + z;
    out->data[out->len] = '\0';
    return 0;
}

typedef struct {
    const unsigned char **at; /* per frame: where it is stored */
    size_t *size;             /* per frame: its stored bytes */
    char *out;
    uint64_t len;
    int failed;               /* a frame did not decompress to its size */
} unframe_job;

static tc_pool_step decompress_frame(void *ctx, size_t i)
{
    unframe_job *f = ctx;
    size_t n = frame_len(f->len, i);
    ZSTD_DCtx *d = thread_ctx(&dctx_key, make_dctx, free_dctx);
    char *to = f->out + i * TC_RECORD_FRAME;
    size_t got = d ? ZSTD_decompressDCtx(d, to, n, f->at[i], f->size[i])
                   : ZSTD_decompress(to, n, f->at[i], f->size[i]);
    if (ZSTD_isError(got) || got != n)
        __atomic_store_n(&f->failed, 1, __ATOMIC_RELAXED);
    return TC_POOL_DONE;
}

/* The stored frames of a payload of raw bytes, decompressed into a new
 * buffer (with a NUL after it). Exactly the frames the encoder writes --
 * frame_count(raw) of them, each declaring its size -- filling exactly
 * `stored` bytes: checked before anything is allocated, so the buffer is
 * all the memory a record can take. 0, or -1. */
static int decompress_frames(const unsigned char *body, size_t stored, uint64_t raw, char **out)
{
    size_t n = frame_count(raw);
    unframe_job f = {malloc(n * sizeof *f.at), malloc(n * sizeof *f.size), NULL, raw, 0};
    int rc = -1;
    if (!f.at || !f.size)
        goto done;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        size_t z = ZSTD_findFrameCompressedSize(body + off, stored - off);
        if (ZSTD_isError(z) ||
            ZSTD_getFrameContentSize(body + off, z) != (unsigned long long)frame_len(raw, i))
            goto done;
        f.at[i] = body + off;
        f.size[i] = z;
        off += z;
    }
    if (off != stored || !(f.out = malloc((size_t)raw + 1)))
        goto done;
    if (tc_pool_run_range(n, tc_pool_cpus(FRAME_THREADS_MAX), decompress_frame, &f) != 0 ||
        f.failed) {
        free(f.out);
        goto done;
    }
    *out = f.out;
    rc = 0;
done:
    free(f.at);
    free(f.size);
    return rc;
}

/* What the header of a record of kind filed under key says before its
 * checksum is computed: HEADER_OK, HEADER_BAD (short, no magic, another
 * kind or key, sizes that do not add up or inflate like a bomb, unknown
 * flags), or HEADER_OTHER_FORMAT (another version of taskcache's record). */
enum { HEADER_OK, HEADER_BAD, HEADER_OTHER_FORMAT };

static int header_state(const unsigned char *hdr, size_t len, uint32_t kind,
                        const tc_digest *key)
{
    if (len < TC_RECORD_HEADER || memcmp(hdr, magic, 4) != 0)
        return HEADER_BAD;
    if (get32(hdr + 4) != TC_RECORD_FORMAT)
        return HEADER_OTHER_FORMAT;
    if (get32(hdr + 8) != kind || memcmp(hdr + 32, key->b, 32) != 0)
        return HEADER_BAD;
    uint32_t flags = get32(hdr + 12);
    uint64_t raw = get64(hdr + 16), stored = get64(hdr + 24);
    if (stored != len - TC_RECORD_HEADER || raw > tc_record_max_payload(kind) ||
        (flags & ~(FLAG_ZSTD | FLAG_HMAC)))
        return HEADER_BAD;
    /* a frame that inflates past the ratio real records show is a bomb:
     * refused before anything is allocated for it */
    if ((flags & FLAG_ZSTD) ? raw / TC_RECORD_MAX_RATIO > stored : raw != stored)
        return HEADER_BAD;
    return HEADER_OK;
}

/* Whether the stored checksum of a record whose header is fine matches
 * the one computed with mac (NULL: a plain SHA-256). */
static int checksum_matches(const unsigned char *hdr, const tc_hmac_key *mac)
{
    tc_digest sum, want;
    memcpy(want.b, hdr + 64, 32);
    return checksum(hdr, hdr + TC_RECORD_HEADER, (size_t)get64(hdr + 24), mac, &sum) == 0 &&
           tc_digest_equal(&sum, &want);
}

/* The payload of a record whose header and checksum were checked: 0, or
 * -1 (frames that do not inflate to what the header says, no memory). */
static int payload_of(const unsigned char *hdr, char **payload, size_t *plen)
{
    uint32_t flags = get32(hdr + 12);
    uint64_t raw = get64(hdr + 16), stored = get64(hdr + 24);
    const unsigned char *body = hdr + TC_RECORD_HEADER;
    char *out = NULL;
    if (flags & FLAG_ZSTD) {
        if (decompress_frames(body, (size_t)stored, raw, &out) != 0)
            return -1;
    } else if ((out = malloc((size_t)raw + 1))) {
        memcpy(out, body, (size_t)raw);
    } else {
        return -1;
    }
    out[raw] = '\0';
    *payload = out;
    *plen = (size_t)raw;
    return 0;
}

int tc_record_decode(const void *data, size_t len, uint32_t kind, const tc_digest *key,
                     const tc_hmac_key *mac, char **payload, size_t *plen)
{
    const unsigned char *hdr = data;
    *payload = NULL;
    *plen = 0;
    if (header_state(hdr, len, kind, key) != HEADER_OK ||
        !(get32(hdr + 12) & FLAG_HMAC) != !mac || !checksum_matches(hdr, mac))
        return -1;
    return payload_of(hdr, payload, plen);
}

int tc_record_check(const void *data, size_t len, uint32_t kind, const tc_digest *key,
                    const tc_hmac_key *mac)
{
    const unsigned char *hdr = data;
    int state = header_state(hdr, len, kind, key);
    if (state != HEADER_OK)
        return state == HEADER_OTHER_FORMAT ? -1 : 0;
    int hmac = (get32(hdr + 12) & FLAG_HMAC) != 0;
    if (hmac && !mac)
        return -1;
    if (!checksum_matches(hdr, hmac ? mac : NULL))
        return hmac ? -1 : 0;
    char *payload = NULL;
    size_t n;
    int ok = payload_of(hdr, &payload, &n) == 0; /* the frames inflate as the header says */
    free(payload);
    return ok;
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
