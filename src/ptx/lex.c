/* lex: streaming PTX tokenizer (see lex.h). Hot path for every input byte,
 * so it uses a character-class table rather than ctype calls. */
#include "ptx/lex.h"

#include <stdlib.h>
#include <string.h>

enum { C_OTHER = 0, C_SPACE = 1, C_IDSTART = 2, C_DIGIT = 4, C_IDCONT = 8 };

/* The classes of every byte, as a constant: no initialization at run time,
 * so threads lexing at once share nothing that is written. Bytes >= 0x80
 * are C_OTHER. */
#define S C_SPACE
#define I (C_IDSTART | C_IDCONT) /* letters _ $ . */
#define P C_IDSTART              /* % starts a register name only */
#define D (C_DIGIT | C_IDCONT)
static const unsigned char cls[256] = {
    /* 0x00 */ 0, 0, 0, 0, 0, 0, 0, 0, 0, S, S, S, S, S, 0, 0,
    /* 0x10 */ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    /*  !"#$%&'()*+,-./ */
    /* 0x20 */ S, 0, 0, 0, I, P, 0, 0, 0, 0, 0, 0, 0, 0, I, 0,
    /* 0123456789:;<=>? */
    /* 0x30 */ D, D, D, D, D, D, D, D, D, D, 0, 0, 0, 0, 0, 0,
    /* @ABCDEFGHIJKLMNO */
    /* 0x40 */ 0, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I,
    /* PQRSTUVWXYZ[\]^_ */
    /* 0x50 */ I, I, I, I, I, I, I, I, I, I, I, 0, 0, 0, 0, I,
    /* `abcdefghijklmno */
    /* 0x60 */ 0, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I,
    /* pqrstuvwxyz{|}~ */
    /* 0x70 */ I, I, I, I, I, I, I, I, I, I, I, 0, 0, 0, 0, 0,
};
#undef S
#undef I
#undef P
#undef D

void tc_lex_init(tc_lexer *lx, const char *p, size_t n, uint32_t first_line)
{
    lx->src = p;
    lx->cur = p;
    lx->end = p + n;
    lx->line = first_line;
    lx->err = NULL;
}

/* Skips spaces and comments from p: where the next token starts, counting
 * newlines into *line. NULL for an unterminated comment, with *comment_line
 * the line it starts on. */
static const char *skip_blank(const char *p, const char *e, uint32_t *line,
                              uint32_t *comment_line)
{
    for (;;) {
        while (p < e && (cls[(unsigned char)*p] & C_SPACE)) {
            *line += *p == '\n';
            p++;
        }
        if (p + 1 < e && p[0] == '/' && p[1] == '/') {
            p += 2;
            while (p < e && *p != '\n')
                p++;
            continue;
        }
        if (p + 1 < e && p[0] == '/' && p[1] == '*') {
            *comment_line = *line;
            p += 2;
            while (p + 1 < e && !(p[0] == '*' && p[1] == '/')) {
                *line += *p == '\n';
                p++;
            }
            if (p + 1 >= e)
                return NULL;
            p += 2;
            continue;
        }
        return p;
    }
}

int tc_lex_peek_punct(const tc_lexer *lx, char c)
{
    uint32_t line = lx->line, comment_line;
    const char *p = skip_blank(lx->cur, lx->end, &line, &comment_line);
    /* punctuation is any byte no other token starts with (an unterminated
     * comment is an error token) */
    return p && p < lx->end && *p == c && !(cls[(unsigned char)c] & (C_DIGIT | C_IDSTART)) &&
           c != '"';
}

void tc_lex_scan(tc_lexer *lx, tc_tok *out)
{
    const char *e = lx->end;
    tc_tok t;
    uint32_t comment_line = 0;
    const char *c = skip_blank(lx->cur, e, &lx->line, &comment_line);
    if (!c) {
        lx->cur = e;
        lx->err = "unterminated /* comment";
        t.kind = TK_ERROR;
        t.line = comment_line;
        t.p = e;
        t.len = 0;
        *out = t;
        return;
    }
    t.line = lx->line;
    t.p = c;
    if (c >= e) {
        t.kind = TK_EOF;
        t.len = 0;
        lx->cur = c;
        *out = t;
        return;
    }
    unsigned char k = cls[(unsigned char)*c];
    if (k & C_DIGIT) {
        const char *s = c++;
        int hexlike = (c < e && (*c == 'x' || *c == 'X' || *c == 'f' || *c == 'F' ||
                                 *c == 'd' || *c == 'D') && *s == '0');
        while (c < e) {
            if (cls[(unsigned char)*c] & C_IDCONT) {
                c++;
            } else if (!hexlike && (*c == '+' || *c == '-') && (c[-1] == 'e' || c[-1] == 'E')) {
                c++;
            } else {
                break;
            }
        }
        t.kind = TK_NUM;
        t.len = (size_t)(c - s);
    } else if (k & C_IDSTART) {
        const char *s = c++;
        for (;;) {
            /* the hot loop of a parse (numba's names run to 150 bytes):
             * the step does not wait for the byte it has read */
            while (c < e && (cls[(unsigned char)*c] & C_IDCONT))
                c++;
            /* "::" belongs to opcodes and qualifiers (ld.shared::cluster,
             * mbarrier::complete_tx::bytes); a label is "name:" */
            if (!(c + 2 < e && c[0] == ':' && c[1] == ':' &&
                  (cls[(unsigned char)c[2]] & C_IDCONT)))
                break;
            c += 2;
        }
        t.kind = TK_IDENT;
        t.len = (size_t)(c - s);
    } else if (*c == '"') {
        const char *s = c++;
        while (c < e && *c != '"' && *c != '\n') {
            if (*c == '\\' && c + 1 < e && c[1] != '\n')
                c++;
            c++;
        }
        if (c >= e || *c != '"') {
            lx->cur = c;
            lx->err = "unterminated string literal";
            t.kind = TK_ERROR;
            t.len = (size_t)(c - s);
            *out = t;
            return;
        }
        c++;
        t.kind = TK_STR;
        t.len = (size_t)(c - s);
    } else {
        t.kind = TK_PUNCT;
        t.len = 1;
        c++;
    }
    lx->cur = c;
    *out = t;
}

uint64_t tc_tok_integer(const tc_tok *t)
{
    char buf[32];
    if (t->kind != TK_NUM || t->len >= sizeof buf)
        return 0;
    memcpy(buf, t->p, t->len);
    buf[t->len] = '\0';
    char *end;
    unsigned long long v = strtoull(buf, &end, 0);
    return *end ? 0 : (uint64_t)v;
}

void tc_lex_copy_gap(tc_sb *out, const char *p, const char *end)
{
    /* Canonical form of inter-token text: only its newlines survive (so line
     * numbers still match the input), otherwise one space where there was
     * any separation. Comments and indentation thus never reach a key. */
    size_t newlines = 0;
    int any = p < end;
    while (p < end) {
        if (p + 1 < end && p[0] == '/' && p[1] == '/') {
            while (p < end && *p != '\n')
                p++;
            continue;
        }
        if (p + 1 < end && p[0] == '/' && p[1] == '*') {
            p += 2;
            while (p + 1 < end && !(p[0] == '*' && p[1] == '/')) {
                if (*p == '\n')
                    newlines++;
                p++;
            }
            p = p + 2 <= end ? p + 2 : end;
            continue;
        }
        if (*p == '\n')
            newlines++;
        p++;
    }
    if (newlines) {
        while (newlines--)
            tc_sb_putc(out, '\n');
    } else if (any) {
        tc_sb_putc(out, ' ');
    }
}
