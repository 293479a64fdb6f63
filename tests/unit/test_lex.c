/* Tests of the PTX tokenizer: what users rely on is that comments and
 * strings never produce tokens (so names inside them are not references),
 * that opcodes with "::" stay one token, and that line numbers are right. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ptx/lex.h"
#include "util/map.h"

static char *join_tokens(const char *src)
{
    static char buf[4096];
    tc_lexer lx;
    tc_lex_init(&lx, src, strlen(src), 1);
    buf[0] = '\0';
    for (;;) {
        tc_tok t = tc_lex_next(&lx);
        if (t.kind == TK_EOF)
            break;
        if (t.kind == TK_ERROR) {
            strcat(buf, "<ERR>");
            break;
        }
        if (buf[0])
            strcat(buf, "|");
        strncat(buf, t.p, t.len);
    }
    return buf;
}

static void test_tokens(void)
{
    CHECK_STR(join_tokens("ld.global.u32 %r1, [tbl+8];"), "ld.global.u32|%r1|,|[|tbl|+|8|]|;");
    CHECK_STR(join_tokens("mapa.shared::cluster.u32 %r9, %r5;"),
              "mapa.shared::cluster.u32|%r9|,|%r5|;");
    CHECK_STR(join_tokens("L1: bra L1;"), "L1|:|bra|L1|;");
    CHECK_STR(join_tokens("$L__BB0_1 :"), "$L__BB0_1|:");
    CHECK_STR(join_tokens("mov.f32 %f1, 0f3F800000; x = 1.5e-3"),
              "mov.f32|%f1|,|0f3F800000|;|x|=|1.5e-3");
    CHECK_STR(join_tokens("0x1F-2"), "0x1F|-|2");
}

/* The numbers .file and .loc name, read within the token: an input ends
 * where its length says, with no NUL after its last number. */
static void test_integers(void)
{
    const char src[] = {'1', '2', ' ', '0', 'x', '1', 'f', ' ', '0', '1', '7', ' ',
                        '1', '.', '5', ' ', 'k', ' ', '9'};
    const uint64_t want[] = {12, 31, 15, 0, 0, 9};
    char *end = malloc(sizeof src); /* exactly: ASan sees a read past it */
    memcpy(end, src, sizeof src);
    tc_lexer lx;
    tc_lex_init(&lx, end, sizeof src, 1);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        tc_tok t = tc_lex_next(&lx);
        CHECK(tc_tok_integer(&t) == want[i]);
    }
    free(end);
}

static void test_comments_and_strings(void)
{
    CHECK_STR(join_tokens("a // b { ; } c\nd"), "a|d");
    CHECK_STR(join_tokens("a /* b {\n ; */ c"), "a|c");
    CHECK_STR(join_tokens(".pragma \"no{un;roll}\";"), ".pragma|\"no{un;roll}\"|;");
    CHECK_STR(join_tokens(".file 1 \"a\\\"b.cu\""), ".file|1|\"a\\\"b.cu\"");
    CHECK_STR(join_tokens("a /* never closed"), "a<ERR>");
    CHECK_STR(join_tokens("\"never closed\n\""), "<ERR>");
}

static void test_lines(void)
{
    const char *src = "a\n/* x\ny */ b\n\n  c";
    tc_lexer lx;
    tc_lex_init(&lx, src, strlen(src), 1);
    tc_tok t = tc_lex_next(&lx);
    CHECK(t.line == 1);
    t = tc_lex_next(&lx);
    CHECK(t.line == 3 && tc_tok_is(&t, "b"));
    t = tc_lex_next(&lx);
    CHECK(t.line == 5 && tc_tok_is(&t, "c"));
}

static void test_gap(void)
{
    tc_sb sb = TC_SB_INIT;
    const char *g1 = "   \t ";
    tc_lex_copy_gap(&sb, g1, g1 + strlen(g1));
    CHECK_STR(sb.data, " ");
    tc_sb_reset(&sb);
    const char *g2 = "  // comment\n\t/* two\nlines */ ";
    tc_lex_copy_gap(&sb, g2, g2 + strlen(g2));
    CHECK_STR(sb.data, "\n\n"); /* newlines survive, so lines still map */
    tc_sb_reset(&sb);
    tc_lex_copy_gap(&sb, g2, g2); /* adjacent tokens stay adjacent */
    CHECK(sb.len == 0);
    tc_sb_free(&sb);
}

/* tc_lex_peek_punct says what the next tc_lex_next would: the body walker
 * asks it after every name that starts a statement (is it a label?). */
static void test_peek(void)
{
    const char *cases[] = {"L1: bra", "L1 /* c */ :", "L1 // c\n :", "L1 ::x", "L1 /* open",
                           "L1", "L1 \":\"", "L1 5:", "L1\n\t\r :", "L1 / :", "L1 ;"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tc_lexer lx;
        tc_lex_init(&lx, cases[i], strlen(cases[i]), 1);
        tc_lex_next(&lx); /* the name */
        tc_lexer copy = lx;
        tc_tok n = tc_lex_next(&copy);
        CHECK(tc_lex_peek_punct(&lx, ':') == tc_tok_punct(&n, ':'));
        CHECK(tc_lex_peek_punct(&lx, ';') == tc_tok_punct(&n, ';'));
    }
}

/* The map answers most misses from its first-byte and length masks: keys
 * of one length modulo 64, the empty key and bytes past 0x7f still work. */
static void test_map(void)
{
    tc_map m = {0};
    char long1[70], long2[6];
    memset(long1, 'a', sizeof long1);
    memset(long2, 'a', sizeof long2); /* 70 and 6 share a length bit */
    CHECK(tc_map_get(&m, "x", 1) == NULL);
    CHECK(tc_map_put(&m, long1, sizeof long1, 1) == 1);
    CHECK(tc_map_put(&m, "", 0, 2) == 1);
    CHECK(tc_map_put(&m, "\xc3\xa9t", 3, 3) == 1);
    CHECK(tc_map_get(&m, long2, sizeof long2) == NULL);
    CHECK(*tc_map_get(&m, long1, sizeof long1) == 1);
    CHECK(*tc_map_get(&m, "", 0) == 2);
    CHECK(*tc_map_get(&m, "\xc3\xa9t", 3) == 3);
    CHECK(tc_map_get(&m, "%r1", 3) == NULL && tc_map_get(&m, "\xc3\xa9u", 3) == NULL);
    for (unsigned i = 0; i < 300; i++) { /* growing keeps every key and the masks */
        char *k = malloc(8);
        snprintf(k, 8, "%c%u", 'A' + i % 50, i);
        CHECK(tc_map_put(&m, k, strlen(k), i + 10) == 1);
        CHECK(*tc_map_get(&m, k, strlen(k)) == i + 10);
    }
    CHECK(*tc_map_get(&m, long1, sizeof long1) == 1);
    for (size_t i = 0; i < m.cap; i++)
        if (m.slots[i].key && m.slots[i].value >= 10)
            free((char *)m.slots[i].key);
    tc_map_free(&m);
    CHECK(m.count == 0 && tc_map_get(&m, "", 0) == NULL);
}

int main(void)
{
    test_peek();
    test_map();
    test_tokens();
    test_integers();
    test_comments_and_strings();
    test_lines();
    test_gap();
    return check_report("test_lex");
}
