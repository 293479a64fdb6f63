/* Tests of the PTX tokenizer: what users rely on is that comments and
 * strings never produce tokens (so names inside them are not references),
 * that opcodes with "::" stay one token, and that line numbers are right. */
#include <stdlib.h>

#include "check.h"
#include "ptx/lex.h"

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

int main(void)
{
    test_tokens();
    test_comments_and_strings();
    test_lines();
    test_gap();
    return check_report("test_lex");
}
