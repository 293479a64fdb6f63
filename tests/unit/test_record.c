/* Tests of the record format and entry metadata: a record round-trips, and
 * any flipped byte, truncation, extension, wrong key or wrong kind is
 * rejected, so a damaged cache can only cause a miss. */
#include <stdlib.h>
#include <zstd.h>

#include "api/handles.h"
#include "check.h"
#include "store/record.h"

static void test_record(void)
{
    tc_digest key, other;
    tc_digest_of("k", 1, &key);
    tc_digest_of("o", 1, &other);
    tc_sb payload = TC_SB_INIT, rec = TC_SB_INIT;
    for (int i = 0; i < 200; i++)
        tc_field_put(&payload, TC_F_LOG, "ptxas info : a line of log\n", 27);
    tc_field_put(&payload, TC_F_OBJECT, "\x7f" "ELF\0\1\2", 7);
    CHECK(tc_record_encode(TC_REC_UNIT, &key, payload.data, payload.len, NULL, &rec) == 0);
    CHECK(rec.len < payload.len); /* compressed */

    char *out;
    size_t n;
    CHECK(tc_record_decode(rec.data, rec.len, TC_REC_UNIT, &key, NULL, &out, &n) == 0);
    CHECK(n == payload.len && !memcmp(out, payload.data, n));
    free(out);

    CHECK(tc_record_decode(rec.data, rec.len, TC_REC_MODULE, &key, NULL, &out, &n) == -1);
    CHECK(tc_record_decode(rec.data, rec.len, TC_REC_UNIT, &other, NULL, &out, &n) == -1);
    for (size_t cut = 0; cut < rec.len; cut += 7)
        CHECK(tc_record_decode(rec.data, cut, TC_REC_UNIT, &key, NULL, &out, &n) == -1);
    tc_sb longer = TC_SB_INIT;
    tc_sb_append(&longer, rec.data, rec.len);
    tc_sb_putc(&longer, 0);
    CHECK(tc_record_decode(longer.data, longer.len, TC_REC_UNIT, &key, NULL, &out, &n) == -1);
    int accepted = 0;
    for (size_t i = 0; i < rec.len; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            rec.data[i] ^= (char)(1 << bit);
            if (tc_record_decode(rec.data, rec.len, TC_REC_UNIT, &key, NULL, &out, &n) == 0) {
                accepted++;
                free(out);
            }
            rec.data[i] ^= (char)(1 << bit);
        }
    }
    CHECK(accepted == 0);
    tc_sb_free(&longer);
    tc_sb_free(&payload);
    tc_sb_free(&rec);
}

/* Recomputes a record's plain checksum, as anyone who can write it can. */
static void seal(tc_sb *rec)
{
    tc_hash *h = tc_hash_new();
    tc_digest sum;
    tc_hash_update(h, rec->data, 64);
    tc_hash_update(h, rec->data + TC_RECORD_HEADER, rec->len - TC_RECORD_HEADER);
    tc_hash_final(h, &sum);
    tc_hash_free(h);
    memcpy(rec->data + 64, sum.b, 32);
}

/* With a secret, a record verifies only under that secret: a plain one,
 * one made under another secret, or one whose checksum a writer without
 * the secret recomputed, is a miss. */
static void test_authenticated(void)
{
    tc_hmac_key mine, theirs;
    tc_hmac_key_init(&mine, "a team secret of some length", 28);
    tc_hmac_key_init(&theirs, "another secret of some length", 29);
    tc_digest key;
    tc_digest_of("k", 1, &key);
    tc_sb rec = TC_SB_INIT, plain = TC_SB_INIT;
    CHECK(tc_record_encode(TC_REC_MODULE, &key, "image", 5, &mine, &rec) == 0);
    CHECK(tc_record_encode(TC_REC_MODULE, &key, "image", 5, NULL, &plain) == 0);
    char *out = NULL;
    size_t n;
    CHECK(tc_record_decode(rec.data, rec.len, TC_REC_MODULE, &key, &mine, &out, &n) == 0);
    CHECK(n == 5 && !memcmp(out, "image", 5));
    free(out);
    CHECK(tc_record_decode(rec.data, rec.len, TC_REC_MODULE, &key, &theirs, &out, &n) == -1);
    CHECK(tc_record_decode(rec.data, rec.len, TC_REC_MODULE, &key, NULL, &out, &n) == -1);
    CHECK(tc_record_decode(plain.data, plain.len, TC_REC_MODULE, &key, &mine, &out, &n) == -1);
    /* a forger flips the flag and recomputes the plain SHA-256 */
    tc_sb forged = TC_SB_INIT;
    tc_sb_append(&forged, plain.data, plain.len);
    forged.data[12] |= 2;
    seal(&forged);
    CHECK(tc_record_decode(forged.data, forged.len, TC_REC_MODULE, &key, &mine, &out, &n) == -1);
    /* what verify may judge: its own secret's records and plain ones; an
     * HMAC it cannot compute or that is not its secret's, and another
     * format's record, are not its to judge (-1); damage it can see is 0 */
    CHECK(tc_record_check(rec.data, rec.len, TC_REC_MODULE, &key, &mine) == 1);
    CHECK(tc_record_check(rec.data, rec.len, TC_REC_MODULE, &key, &theirs) == -1);
    CHECK(tc_record_check(rec.data, rec.len, TC_REC_MODULE, &key, NULL) == -1);
    CHECK(tc_record_check(plain.data, plain.len, TC_REC_MODULE, &key, &mine) == 1);
    CHECK(tc_record_check(plain.data, plain.len, TC_REC_MODULE, &key, NULL) == 1);
    CHECK(tc_record_check(rec.data, rec.len - 1, TC_REC_MODULE, &key, &mine) == 0);
    CHECK(tc_record_check(rec.data, rec.len, TC_REC_UNIT, &key, &mine) == 0);
    tc_sb_reset(&forged);
    tc_sb_append(&forged, plain.data, plain.len);
    forged.data[forged.len - 1] ^= 1;
    CHECK(tc_record_check(forged.data, forged.len, TC_REC_MODULE, &key, &mine) == 0);
    forged.data[forged.len - 1] ^= 1;
    forged.data[4] = 1; /* format 1 */
    seal(&forged);
    CHECK(tc_record_check(forged.data, forged.len, TC_REC_MODULE, &key, NULL) == -1);
    tc_sb_free(&forged);
    tc_sb_free(&plain);
    tc_sb_free(&rec);
}

/* A header may claim no more than its kind holds, nor inflate past the
 * ratio real records show: checked before anything is allocated. */
static void test_size_limits(void)
{
    tc_digest key;
    tc_digest_of("k", 1, &key);
    CHECK(tc_record_max_payload(TC_REC_UNIT) < tc_record_max_payload(TC_REC_MODULE));
    size_t zeros = (size_t)8 << 20;
    char *big = calloc(1, zeros);
    /* 8 MiB of zeros compress past the ratio: the writer stores them as
     * they are, so the record still reads */
    tc_sb rec = TC_SB_INIT;
    char *out = NULL;
    size_t n;
    CHECK(tc_record_encode(TC_REC_UNIT, &key, big, zeros, NULL, &rec) == 0);
    CHECK(rec.len == TC_RECORD_HEADER + zeros);
    CHECK(tc_record_decode(rec.data, rec.len, TC_REC_UNIT, &key, NULL, &out, &n) == 0 &&
          n == zeros);
    free(out);
    /* the same zeros as one zstd frame: a bomb, refused */
    tc_sb_reset(&rec);
    CHECK(tc_record_encode(TC_REC_UNIT, &key, "x", 1, NULL, &rec) == 0);
    tc_sb_reserve(&rec, ZSTD_compressBound(zeros));
    size_t z = ZSTD_compress(rec.data + TC_RECORD_HEADER, ZSTD_compressBound(zeros), big, zeros, 1);
    CHECK(!ZSTD_isError(z) && z < zeros / TC_RECORD_MAX_RATIO);
    rec.len = TC_RECORD_HEADER + z;
    rec.data[12] = 1;
    for (int i = 0; i < 8; i++) {
        rec.data[16 + i] = (char)((uint64_t)zeros >> (8 * i));
        rec.data[24 + i] = (char)((uint64_t)z >> (8 * i));
    }
    seal(&rec);
    CHECK(tc_record_decode(rec.data, rec.len, TC_REC_UNIT, &key, NULL, &out, &n) == -1);
    /* a header claiming more than its frame holds */
    tc_sb_reset(&rec);
    CHECK(tc_record_encode(TC_REC_UNIT, &key, "abcdefgh", 8, NULL, &rec) == 0);
    rec.data[16] = 9;
    seal(&rec);
    CHECK(tc_record_decode(rec.data, rec.len, TC_REC_UNIT, &key, NULL, &out, &n) == -1);
    free(big);
    tc_sb_free(&rec);
}

static void test_fields(void)
{
    tc_sb sb = TC_SB_INIT;
    tc_field_put(&sb, 7, "abc", 3);
    tc_field_put(&sb, 9, "", 0);
    tc_reader r;
    tc_reader_init(&r, sb.data, sb.len);
    uint32_t tag;
    const unsigned char *p;
    size_t n;
    CHECK(tc_field_next(&r, &tag, &p, &n) == 1 && tag == 7 && n == 3 && !memcmp(p, "abc", 3));
    CHECK(tc_field_next(&r, &tag, &p, &n) == 1 && tag == 9 && n == 0);
    CHECK(tc_field_next(&r, &tag, &p, &n) == 0);
    tc_reader_init(&r, sb.data, sb.len - 1); /* truncated blob */
    CHECK(tc_field_next(&r, &tag, &p, &n) == 1);
    CHECK(tc_field_next(&r, &tag, &p, &n) == -1);
    tc_sb_free(&sb);
}

static void test_entries(void)
{
    tc_param_info params[2] = {{"u64", 0, 8, 8}, {"b8", 16, 24, 16}};
    tc_entry_info e;
    memset(&e, 0, sizeof e);
    e.name = "kernel$1";
    e.param_count = 2;
    e.param_bytes = 40;
    e.params = params;
    e.maxntid[0] = 256;
    e.reqnctapercluster[2] = 2;
    e.registers = 32;
    e.shared_bytes = 1024;
    e.stack_bytes = 16;
    e.spill_store_bytes = -1;
    e.spill_load_bytes = 4;
    e.unit_key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    e.slice_key = "";
    e.unit = 3;
    tc_sb sb = TC_SB_INIT;
    tc_entry_encode(&e, &sb);
    tc_entry_info d;
    CHECK(tc_entry_decode(sb.data, sb.len, &d) == 0);
    CHECK_STR(d.name, "kernel$1");
    CHECK(d.param_count == 2 && d.param_bytes == 40);
    CHECK(d.params[1].offset == 16 && d.params[1].size == 24 && d.params[1].align == 16);
    CHECK_STR(d.params[1].type, "b8");
    CHECK(d.maxntid[0] == 256 && d.reqnctapercluster[2] == 2);
    CHECK(d.registers == 32 && d.shared_bytes == 1024 && d.stack_bytes == 16);
    CHECK(d.spill_store_bytes == -1 && d.spill_load_bytes == 4);
    CHECK_STR(d.unit_key, e.unit_key);
    CHECK(d.unit == 3);
    CHECK(!d.verbose && !d.verbose_head); /* none given: unknown, as in older records */
    tc_entry_clear(&d);
    for (size_t cut = 0; cut < sb.len; cut++)
        CHECK(tc_entry_decode(sb.data, cut, &d) == -1);

    /* with its -v lines: they follow, so that the entry of an older record
     * (which ends where they begin) still decodes, as unknown */
    size_t plain = sb.len;
    e.verbose = "ptxas info    : Compiling entry function 'kernel$1' for 'sm_90'\n";
    e.verbose_head = "ptxas info    : Overriding maximum register limit 256 for 'kernel$1'\n";
    e.verbose_rank = 7;
    tc_sb_reset(&sb);
    tc_entry_encode(&e, &sb);
    CHECK(tc_entry_decode(sb.data, sb.len, &d) == 0);
    CHECK_STR(d.verbose, e.verbose);
    CHECK_STR(d.verbose_head, e.verbose_head);
    CHECK(d.verbose_rank == 7 && d.registers == 32);
    tc_entry_clear(&d);
    for (size_t cut = 0; cut < sb.len; cut++) {
        int rc = tc_entry_decode(sb.data, cut, &d);
        CHECK(rc == (cut == plain ? 0 : -1));
        if (rc == 0) {
            CHECK(!d.verbose && d.registers == 32);
            tc_entry_clear(&d);
        }
    }
    e.verbose_head = NULL; /* no head: decoded as none */
    tc_sb_reset(&sb);
    tc_entry_encode(&e, &sb);
    CHECK(tc_entry_decode(sb.data, sb.len, &d) == 0 && d.verbose && !d.verbose_head);
    tc_entry_clear(&d);
    tc_sb_free(&sb);
}

/* Sets a record's sizes and flags to a payload of raw bytes stored in
 * body (z bytes), sealed with a plain checksum. */
static void restore(tc_sb *rec, uint64_t raw, const void *body, size_t z)
{
    rec->len = TC_RECORD_HEADER;
    tc_sb_append(rec, body, z);
    rec->data[12] = 1;
    for (int i = 0; i < 8; i++) {
        rec->data[16 + i] = (char)(raw >> (8 * i));
        rec->data[24 + i] = (char)((uint64_t)z >> (8 * i));
    }
    seal(rec);
}

/* zstd frames of data cut at the given raw sizes, one after another. */
static size_t frames_of(const char *data, const size_t *cuts, size_t ncuts, char *out)
{
    size_t z = 0, off = 0;
    for (size_t i = 0; i < ncuts; i++) {
        size_t b = ZSTD_compressBound(cuts[i]);
        z += ZSTD_compress(out + z, b, data + off, cuts[i], 1);
        off += cuts[i];
    }
    return z;
}

/* A payload is stored in frames of TC_RECORD_FRAME bytes (they decompress
 * on several threads): every size round-trips, and a record must hold
 * exactly those frames -- the same payload as one frame, or cut elsewhere,
 * does not decode, however well it is sealed. */
static void test_frames(void)
{
    tc_digest key;
    tc_digest_of("k", 1, &key);
    const size_t F = TC_RECORD_FRAME;
    size_t sizes[] = {0, 1, F - 1, F, F + 1, 3 * F + 12345};
    size_t max = 3 * F + 12345;
    char *data = malloc(max), *body = malloc(ZSTD_compressBound(max) + 4 * 64);
    uint32_t x = 1;
    for (size_t i = 0; i < max; i++) { /* text-like: compresses, not to nothing */
        x = x * 1103515245u + 12345u;
        data[i] = (char)('a' + (x >> 16) % 16);
    }
    tc_sb rec = TC_SB_INIT;
    char *out = NULL;
    size_t n;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t len = sizes[k];
        tc_sb_reset(&rec);
        CHECK(tc_record_encode(TC_REC_MODULE, &key, data, len, NULL, &rec) == 0);
        CHECK(tc_record_decode(rec.data, rec.len, TC_REC_MODULE, &key, NULL, &out, &n) == 0 &&
              n == len && !memcmp(out, data, len) && out[len] == '\0');
        free(out);
        size_t frames = 0, off = TC_RECORD_HEADER;
        while (off < rec.len) {
            size_t z = ZSTD_findFrameCompressedSize(rec.data + off, rec.len - off);
            CHECK(!ZSTD_isError(z));
            if (ZSTD_isError(z))
                break;
            off += z;
            frames++;
        }
        CHECK(frames == (len ? (len + F - 1) / F : 1));
    }
    /* 3F + 12345 bytes as one frame; as frames cut at F/2; with a frame
     * too many (an empty one at the end) */
    size_t one[] = {max}, half[] = {F / 2, F, F, F / 2 + 12345}, extra[] = {F, F, F, 12345, 0};
    const size_t *cuts[] = {one, half, extra};
    size_t ncuts[] = {1, 4, 5};
    for (int c = 0; c < 3; c++) {
        size_t z = frames_of(data, cuts[c], ncuts[c], body);
        restore(&rec, max, body, z);
        CHECK(tc_record_decode(rec.data, rec.len, TC_REC_MODULE, &key, NULL, &out, &n) == -1);
    }
    /* the right frames, sealed by hand, do decode (the checks above are
     * about the frames, not the seal) */
    size_t right[] = {F, F, F, 12345};
    restore(&rec, max, body, frames_of(data, right, 4, body));
    CHECK(tc_record_decode(rec.data, rec.len, TC_REC_MODULE, &key, NULL, &out, &n) == 0 &&
          n == max && !memcmp(out, data, max));
    free(out);
    free(data);
    free(body);
    tc_sb_free(&rec);
}

int main(void)
{
    test_record();
    test_authenticated();
    test_size_limits();
    test_frames();
    test_fields();
    test_entries();
    return check_report("test_record");
}
