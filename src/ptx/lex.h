/* lex: a streaming PTX tokenizer. It never materializes the token list, so
 * memory stays proportional to the module model, not to the input size.
 * Comments are skipped; string literals are single tokens, so braces,
 * semicolons or names inside comments and strings never count. */
#ifndef TC_PTX_LEX_H
#define TC_PTX_LEX_H

#include <stddef.h>
#include <stdint.h>

#include "util/strbuf.h"

typedef enum {
    TK_EOF = 0,
    TK_IDENT,  /* names, directives (".reg"), opcodes ("ld.global.u32"), %regs */
    TK_NUM,    /* numeric literals: 12, 0x1f, 0f3F800000, 1.5e-3, 9.0 */
    TK_STR,    /* "..." including the quotes */
    TK_PUNCT,  /* one character: { } ( ) [ ] ; , : = + - < > @ ! | ... */
    TK_ERROR   /* unterminated comment or string; message in lexer->err */
} tc_tok_kind;

typedef struct tc_tok {
    tc_tok_kind kind;
    uint32_t line;     /* 1-based line of the token's first character */
    const char *p;     /* points into the source */
    size_t len;
} tc_tok;

typedef struct tc_lexer {
    const char *src;
    const char *cur;
    const char *end;
    uint32_t line;
    const char *err;   /* set with a TK_ERROR token */
} tc_lexer;

void tc_lex_init(tc_lexer *lx, const char *p, size_t n, uint32_t first_line);
/* Scans the next token into *t. The body walker's way: a token returned by
 * value came back through memory written a field at a time and read back
 * whole, a stall per token that was a third of its time. */
void tc_lex_scan(tc_lexer *lx, tc_tok *t);
/* The next token, by value. */
static inline tc_tok tc_lex_next(tc_lexer *lx)
{
    tc_tok t;
    tc_lex_scan(lx, &t);
    return t;
}
/* Whether the next token is the punctuation character c (not ':' of "::",
 * which belongs to a name), without consuming anything: what tc_lex_next
 * on a copy of the lexer would say, minus making the token. */
int tc_lex_peek_punct(const tc_lexer *lx, char c);

static inline int tc_tok_is(const tc_tok *t, const char *s)
{
    size_t i = 0;
    for (; i < t->len; i++)
        if (s[i] != t->p[i])
            return 0;
    return s[i] == '\0';
}

static inline int tc_tok_punct(const tc_tok *t, char c)
{
    return t->kind == TK_PUNCT && t->p[0] == c;
}

/* The value of an integer literal token (12, 0x1f, 017), read within the
 * token (the source is not NUL-terminated); 0 for any other token. */
uint64_t tc_tok_integer(const tc_tok *t);

/* Appends the canonical form of the text between two tokens: its newlines
 * (those inside block comments too, so line numbers still match the input),
 * or a single space when it holds no newline; comments and other
 * whitespace are dropped. */
void tc_lex_copy_gap(tc_sb *out, const char *p, const char *end);

#endif
