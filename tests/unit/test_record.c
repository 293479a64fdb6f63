/* Tests of the record format and entry metadata: a record round-trips, and
 * any flipped byte, truncation, extension, wrong key or wrong kind is
 * rejected, so a damaged cache can only cause a miss. */
#include <stdlib.h>

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
    CHECK(tc_record_encode(TC_REC_UNIT, &key, payload.data, payload.len, &rec) == 0);
    CHECK(rec.len < payload.len); /* compressed */

    char *out;
    size_t n;
    CHECK(tc_record_decode(rec.data, rec.len, TC_REC_UNIT, &key, &out, &n) == 0);
    CHECK(n == payload.len && !memcmp(out, payload.data, n));
    free(out);

    CHECK(tc_record_decode(rec.data, rec.len, TC_REC_MODULE, &key, &out, &n) == -1);
    CHECK(tc_record_decode(rec.data, rec.len, TC_REC_UNIT, &other, &out, &n) == -1);
    for (size_t cut = 0; cut < rec.len; cut += 7)
        CHECK(tc_record_decode(rec.data, cut, TC_REC_UNIT, &key, &out, &n) == -1);
    tc_sb longer = TC_SB_INIT;
    tc_sb_append(&longer, rec.data, rec.len);
    tc_sb_putc(&longer, 0);
    CHECK(tc_record_decode(longer.data, longer.len, TC_REC_UNIT, &key, &out, &n) == -1);
    int accepted = 0;
    for (size_t i = 0; i < rec.len; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            rec.data[i] ^= (char)(1 << bit);
            if (tc_record_decode(rec.data, rec.len, TC_REC_UNIT, &key, &out, &n) == 0) {
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
    tc_entry_clear(&d);
    for (size_t cut = 0; cut < sb.len; cut++)
        CHECK(tc_entry_decode(sb.data, cut, &d) == -1);
    tc_sb_free(&sb);
}

int main(void)
{
    test_record();
    test_fields();
    test_entries();
    return check_report("test_record");
}
