/* test_lex_table: the lexer's character classes are a constant table, ready
 * before any tc_lex_init runs, so threads that lex at the same time never
 * race on building it; and the table agrees, byte by byte, with the rules
 * the tokenizer is specified by. */
#include <string.h>

#include "check.h"
#include "ptx/lex.h"

static tc_tok lex_first(const char *p, size_t n)
{
    tc_lexer lx;
    tc_lex_init(&lx, p, n, 1);
    return tc_lex_next(&lx);
}

/* Must run first in a fresh process: nothing has initialized anything. A
 * lexer set up by hand (the fields are plain data) must already skip
 * spaces and recognize names; a lazily built table is still all zeros
 * here, and the kind of state two threads race on. */
static void test_ready_before_any_init(void)
{
    static const char src[] = "  .reg %r1;";
    tc_lexer lx = {src, src, src + sizeof src - 1, 1, NULL};
    tc_tok t = tc_lex_next(&lx);
    CHECK(t.kind == TK_IDENT);
    CHECK(t.len == 4 && !memcmp(t.p, ".reg", 4));
    t = tc_lex_next(&lx);
    CHECK(t.kind == TK_IDENT && t.len == 3 && !memcmp(t.p, "%r1", 3));
}

/* The rules of lex.h for every byte value. */
static int is_space(int c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static int is_letter(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int id_start(int c) { return is_letter(c) || c == '_' || c == '$' || c == '%' || c == '.'; }
static int id_cont(int c) { return is_letter(c) || is_digit(c) || c == '_' || c == '$' || c == '.'; }

static void test_every_byte(void)
{
    int bad = 0;
    for (int c = 0; c < 256; c++) {
        char one[1] = {(char)c};
        char before_x[2] = {(char)c, 'x'};
        char after_a[2] = {'a', (char)c};
        tc_tok t = lex_first(before_x, 2);
        int skipped = t.kind == TK_IDENT && t.p == before_x + 1;
        t = lex_first(one, 1);
        int number = t.kind == TK_NUM;
        int name = t.kind == TK_IDENT && t.len == 1;
        t = lex_first(after_a, 2);
        int continues = t.kind == TK_IDENT && t.len == 2;
        if (skipped != is_space(c) || number != is_digit(c) ||
            name != (id_start(c) && !is_digit(c)) || continues != id_cont(c)) {
            if (bad++ < 5)
                fprintf(stderr, "byte 0x%02x: space %d number %d name %d continues %d\n", c,
                        skipped, number, name, continues);
        }
    }
    CHECK(bad == 0);
}

int main(void)
{
    test_ready_before_any_init();
    test_every_byte();
    return check_report("test_lex_table");
}
