/* module: parses the module-level structure of PTX (see module.h) in one
 * streaming pass. Function bodies are only tokenized: each identifier that
 * names an already-declared module symbol becomes a reference (PTX requires
 * declaration before use, so one pass suffices), classified as a direct
 * call or as a use of the symbol's address or value. */
#include "ptx/module.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx/body.h"
#include "ptx/lex.h"
#include "util/hash.h"
#include "util/strbuf.h"

typedef struct parser {
    tc_lexer lx;
    tc_tok tok;
    tc_ptx_module *m;
    tc_ptx_error *err;
    int failed;
    /* reference de-duplication within one statement */
    uint32_t *mark;  /* per symbol: statement index + 1 that last referenced it */
    uint32_t *pos;   /* per symbol: index of that reference in m->refs */
    size_t mark_cap;
    tc_tok *params_seen; /* parameter names of functions with a body */
    size_t nparams_seen, cap_params_seen;
    int seen_function;
    /* labels the .loc directives of function bodies name ("function_name
     * L"), resolved once the .debug_str section (at the end) is parsed */
    struct info_use {
        uint32_t stmt;
        tc_tok label;
    } *info_uses;
    size_t ninfo_uses, cap_info_uses;
} parser;

#define GROW(arr, n, cap)                                                       \
    ((n) < (cap) ? 0                                                            \
                 : grow_array((void **)&(arr), &(cap), sizeof *(arr), (n) + 1))

static int grow_array(void **arr, size_t *cap, size_t elem, size_t need)
{
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*arr, ncap * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

static void fail(parser *p, uint32_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(parser *p, uint32_t line, const char *fmt, ...)
{
    if (p->failed)
        return;
    p->failed = 1;
    p->err->line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err->message, sizeof p->err->message, fmt, ap);
    va_end(ap);
}

static void oom(parser *p)
{
    if (p->failed)
        return;
    p->failed = 1;
    p->err->line = 0;
    snprintf(p->err->message, sizeof p->err->message, "out of memory");
}

static void advance(parser *p)
{
    p->tok = tc_lex_next(&p->lx);
    if (p->tok.kind == TK_ERROR)
        fail(p, p->tok.line, "%s", p->lx.err);
}

static size_t off(const parser *p, const tc_tok *t) { return (size_t)(t->p - p->m->src); }

/* A token as error messages show it: quoted (at most 40 characters), or
 * as a byte value when it is not printable text. */
static const char *describe(const tc_tok *t, char buf[64])
{
    if (t->kind == TK_EOF || t->len == 0)
        return "the end of the file";
    unsigned char c = (unsigned char)t->p[0];
    if (t->kind == TK_PUNCT && (c < 0x20 || c >= 0x7f)) {
        snprintf(buf, 64, "byte 0x%02x", c);
        return buf;
    }
    snprintf(buf, 64, "'%.*s%s'", (int)(t->len > 40 ? 40 : t->len), t->p,
             t->len > 40 ? "..." : "");
    return buf;
}

static void whole(tc_ptx_module *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void whole(tc_ptx_module *m, const char *fmt, ...)
{
    if (m->whole_reason[0])
        return; /* the first reason is the one reported */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->whole_reason, sizeof m->whole_reason, fmt, ap);
    va_end(ap);
}

/* ---- symbols and references ------------------------------------------ */

static int32_t find_sym(parser *p, const char *name, size_t len)
{
    uint32_t *v = tc_map_get(&p->m->symtab, name, len);
    return v ? (int32_t)*v : -1;
}

static int32_t add_sym(parser *p, const tc_tok *name, uint8_t kind)
{
    tc_ptx_module *m = p->m;
    if (GROW(m->syms, m->nsyms, m->cap_syms) != 0) {
        oom(p);
        return -1;
    }
    if (m->nsyms >= p->mark_cap) {
        size_t ncap = p->mark_cap ? p->mark_cap * 2 : 64;
        uint32_t *a = realloc(p->mark, ncap * sizeof *a);
        if (!a) {
            oom(p);
            return -1;
        }
        p->mark = a;
        uint32_t *b = realloc(p->pos, ncap * sizeof *b);
        if (!b) {
            oom(p);
            return -1;
        }
        p->pos = b;
        memset(p->mark + p->mark_cap, 0, (ncap - p->mark_cap) * sizeof *a);
        p->mark_cap = ncap;
    }
    tc_ptx_sym *s = &m->syms[m->nsyms];
    memset(s, 0, sizeof *s);
    s->name = name->p;
    s->len = (uint32_t)name->len;
    s->kind = kind;
    s->def = s->decl = s->alias_of = -1;
    if (tc_map_put(&m->symtab, name->p, name->len, (uint32_t)m->nsyms) < 0) {
        oom(p);
        return -1;
    }
    return (int32_t)m->nsyms++;
}

/* Records that statement `si` references the symbol named by t, if any. */
static void add_ref(parser *p, size_t si, const tc_tok *t, uint8_t how)
{
    int32_t sym = find_sym(p, t->p, t->len);
    if (sym < 0)
        return;
    tc_ptx_module *m = p->m;
    if (p->mark[sym] == si + 1) {
        m->refs[p->pos[sym]].how |= how;
        return;
    }
    if (GROW(m->refs, m->nrefs, m->cap_refs) != 0) {
        oom(p);
        return;
    }
    p->mark[sym] = (uint32_t)si + 1;
    p->pos[sym] = (uint32_t)m->nrefs;
    m->refs[m->nrefs].sym = (uint32_t)sym;
    m->refs[m->nrefs].how = how;
    m->nrefs++;
}

static tc_ptx_stmt *new_stmt(parser *p, uint8_t kind, const tc_tok *first)
{
    tc_ptx_module *m = p->m;
    if (GROW(m->stmts, m->nstmts, m->cap_stmts) != 0) {
        oom(p);
        return NULL;
    }
    tc_ptx_stmt *st = &m->stmts[m->nstmts++];
    memset(st, 0, sizeof *st);
    st->kind = kind;
    st->line = first->line;
    st->start = off(p, first);
    st->sym = -1;
    st->ref_begin = (uint32_t)m->nrefs;
    return st;
}

static void end_stmt(parser *p, tc_ptx_stmt *st, const tc_tok *last)
{
    st->end = off(p, last) + last->len;
    st->last_line = last->line;
    st->ref_count = (uint32_t)(p->m->nrefs - st->ref_begin);
}

/* ---- simple directives ------------------------------------------------- */

static int expect_kind(parser *p, tc_tok_kind kind, const char *what)
{
    if (p->tok.kind != kind) {
        char d[64];
        fail(p, p->tok.line, "expected %s, found %s", what, describe(&p->tok, d));
        return -1;
    }
    return 0;
}

static void parse_version(parser *p, tc_tok first)
{
    tc_ptx_stmt *st = new_stmt(p, TC_STMT_VERSION, &first);
    if (!st)
        return;
    if (p->m->version_stmt >= 0)
        fail(p, first.line, "duplicate .version directive");
    p->m->version_stmt = (int32_t)(p->m->nstmts - 1);
    advance(p);
    if (expect_kind(p, TK_NUM, "a version number after .version"))
        return;
    end_stmt(p, st, &p->tok);
    advance(p);
}

static void parse_target(parser *p, tc_tok first)
{
    tc_ptx_stmt *st = new_stmt(p, TC_STMT_TARGET, &first);
    if (!st)
        return;
    if (p->m->target_stmt >= 0)
        fail(p, first.line, "duplicate .target directive");
    p->m->target_stmt = (int32_t)(p->m->nstmts - 1);
    advance(p);
    if (expect_kind(p, TK_IDENT, "a target name after .target"))
        return;
    if (p->tok.len < sizeof p->m->target)
        memcpy(p->m->target, p->tok.p, p->tok.len);
    tc_tok last = p->tok;
    advance(p);
    while (!p->failed && tc_tok_punct(&p->tok, ',')) {
        advance(p);
        if (expect_kind(p, TK_IDENT, "a target option after ','"))
            return;
        if (tc_tok_is(&p->tok, "debug"))
            whole(p->m, ".target at line %u asks for debug information, as -g does, which "
                        "refers to code across all functions", first.line);
        last = p->tok;
        advance(p);
    }
    end_stmt(p, st, &last);
}

static void parse_address_size(parser *p, tc_tok first)
{
    tc_ptx_stmt *st = new_stmt(p, TC_STMT_ADDRSIZE, &first);
    if (!st)
        return;
    p->m->addrsize_stmt = (int32_t)(p->m->nstmts - 1);
    advance(p);
    if (expect_kind(p, TK_NUM, "a number after .address_size"))
        return;
    end_stmt(p, st, &p->tok);
    advance(p);
}

static void parse_file(parser *p, tc_tok first)
{
    tc_ptx_stmt *st = new_stmt(p, TC_STMT_FILE, &first);
    if (!st)
        return;
    advance(p);
    if (expect_kind(p, TK_NUM, "a file number after .file"))
        return;
    st->loc_begin = (uint32_t)tc_tok_integer(&p->tok);
    advance(p);
    if (expect_kind(p, TK_STR, "a quoted file name in .file"))
        return;
    tc_tok last = p->tok;
    advance(p);
    /* optional ", timestamp, size" */
    while (!p->failed && tc_tok_punct(&p->tok, ',')) {
        advance(p);
        if (expect_kind(p, TK_NUM, "a number in .file"))
            return;
        last = p->tok;
        advance(p);
    }
    end_stmt(p, st, &last);
}

/* Skips a balanced {...} group; the current token is '{'. Returns the
 * closing token. */
static tc_tok skip_braces(parser *p)
{
    tc_tok open = p->tok;
    int depth = 0;
    for (;;) {
        if (p->failed)
            return p->tok;
        if (p->tok.kind == TK_EOF) {
            fail(p, open.line, "'{' opened here is never closed");
            return p->tok;
        }
        if (tc_tok_punct(&p->tok, '{'))
            depth++;
        else if (tc_tok_punct(&p->tok, '}') && --depth == 0) {
            tc_tok close = p->tok;
            advance(p);
            return close;
        }
        advance(p);
    }
}

/* The entries of a .debug_str section, the current token its '{': each a
 * label followed by ".b8" lists of byte values. 0, or 1 when the section
 * has another shape (the caller then skips it and compiles whole). */
static int parse_debug_str(parser *p, uint32_t section_line)
{
    tc_ptx_module *m = p->m;
    advance(p);
    while (!p->failed && !tc_tok_punct(&p->tok, '}')) {
        tc_tok label = p->tok;
        if (label.kind != TK_IDENT || label.p[0] == '.')
            return 1;
        advance(p);
        if (!tc_tok_punct(&p->tok, ':'))
            return 1;
        advance(p);
        size_t data = off(p, &p->tok), data_end = data;
        while (!p->failed && tc_tok_is(&p->tok, ".b8")) {
            advance(p);
            for (;;) {
                if (p->tok.kind != TK_NUM)
                    return 1;
                data_end = off(p, &p->tok) + p->tok.len;
                advance(p);
                if (!tc_tok_punct(&p->tok, ','))
                    break;
                advance(p);
            }
        }
        if (data_end == data)
            return 1; /* a label without bytes, or bytes of another width */
        if (GROW(m->infos, m->ninfos, m->cap_infos) != 0) {
            oom(p);
            return 0;
        }
        tc_ptx_info *in = &m->infos[m->ninfos];
        memset(in, 0, sizeof *in);
        in->label = label.p;
        in->len = (uint32_t)label.len;
        in->line = label.line;
        in->data = data;
        in->data_end = data_end;
        int put = tc_map_put(&m->infomap, label.p, label.len, (uint32_t)m->ninfos);
        if (put < 0) {
            oom(p);
            return 0;
        }
        if (put == 0) {
            fail(p, label.line, "label '%.*s' is defined twice in the .debug_str section "
                                "of line %u", (int)label.len, label.p, section_line);
            return 0;
        }
        m->ninfos++;
    }
    return 0;
}

static void parse_section(parser *p, tc_tok first)
{
    tc_ptx_stmt *st = new_stmt(p, TC_STMT_SECTION, &first);
    if (!st)
        return;
    size_t si = p->m->nstmts - 1;
    advance(p);
    if (expect_kind(p, TK_IDENT, "a section name after .section"))
        return;
    /* nvcc -G writes .debug_info and the like, which refer to labels of
     * every function: such a module is compiled whole. -lineinfo, where
     * functions were inlined, writes only .debug_str, the inlined
     * functions' names: units get the entries their .loc directives name */
    tc_tok name = p->tok;
    int strings = tc_tok_is(&name, ".debug_str") && p->m->section_stmt < 0;
    if (!strings)
        whole(p->m, "debug sections (%.*s at line %u: DWARF, from -G or Triton's line info) "
                    "refer to labels across all functions",
              (int)(name.len > 32 ? 32 : name.len), name.p, first.line);
    advance(p);
    if (!tc_tok_punct(&p->tok, '{')) {
        fail(p, p->tok.line, "expected '{' after the .section name");
        return;
    }
    tc_ptx_stmt *sec = &p->m->stmts[si];
    if (strings) {
        tc_lexer at = p->lx;
        tc_tok open_tok = p->tok;
        if (parse_debug_str(p, first.line) != 0) {
            whole(p->m, "the .debug_str section at line %u holds more than labels and .b8 "
                        "bytes", first.line);
            p->m->ninfos = 0;
            tc_map_free(&p->m->infomap);
            memset(&p->m->infomap, 0, sizeof p->m->infomap);
            p->lx = at; /* skip it from its '{' */
            p->tok = open_tok;
        } else if (!p->failed) {
            p->m->section_stmt = (int32_t)si;
            tc_tok close = p->tok;
            advance(p);
            end_stmt(p, sec, &close);
            return;
        }
    }
    if (p->failed)
        return;
    tc_tok close = skip_braces(p);
    end_stmt(p, &p->m->stmts[si], &close);
}

/* Statements that end with ';' and need no structure: .pragma, .alias. */
static tc_tok skip_to_semicolon(parser *p, tc_tok first, const char *what)
{
    for (;;) {
        if (p->failed)
            return p->tok;
        if (p->tok.kind == TK_EOF) {
            fail(p, first.line, "%s is not terminated by ';'", what);
            return p->tok;
        }
        if (tc_tok_punct(&p->tok, ';')) {
            tc_tok semi = p->tok;
            advance(p);
            return semi;
        }
        if (tc_tok_punct(&p->tok, '{') || tc_tok_punct(&p->tok, '}')) {
            fail(p, p->tok.line, "unexpected '%c' in %s", p->tok.p[0], what);
            return p->tok;
        }
        advance(p);
    }
}

static void parse_pragma(parser *p, tc_tok first)
{
    tc_ptx_stmt *st = new_stmt(p, TC_STMT_PRAGMA, &first);
    if (!st)
        return;
    if (p->seen_function)
        whole(p->m, "module-scope .pragma at line %u follows function code and applies to "
                    "what comes after it", first.line);
    advance(p);
    tc_tok semi = skip_to_semicolon(p, first, ".pragma");
    end_stmt(p, st, &semi);
}

static void parse_alias(parser *p, tc_tok first)
{
    tc_ptx_stmt *st = new_stmt(p, TC_STMT_ALIAS, &first);
    if (!st)
        return;
    size_t si = p->m->nstmts - 1;
    advance(p);
    if (expect_kind(p, TK_IDENT, "an alias name after .alias"))
        return;
    tc_tok alias = p->tok;
    advance(p);
    if (!tc_tok_punct(&p->tok, ',')) {
        fail(p, p->tok.line, "expected ',' in .alias");
        return;
    }
    advance(p);
    if (expect_kind(p, TK_IDENT, "the aliased function in .alias"))
        return;
    tc_tok target = p->tok;
    advance(p);
    if (!tc_tok_punct(&p->tok, ';')) {
        fail(p, p->tok.line, "expected ';' after .alias");
        return;
    }
    int32_t ts = find_sym(p, target.p, target.len);
    int32_t as = find_sym(p, alias.p, alias.len);
    if (ts >= 0 && p->m->syms[ts].kind == TC_SYM_ALIAS)
        whole(p->m, "'%.*s' at line %u aliases another alias, which ptxas cannot compile "
                    "separately", (int)alias.len, alias.p, first.line);
    else if (ts < 0 || p->m->syms[ts].kind != TC_SYM_FUNC) {
        fail(p, target.line, ".alias target '%.*s' is not a declared function",
             (int)target.len, target.p);
        return;
    }
    if (as < 0 || p->m->syms[as].kind != TC_SYM_FUNC) {
        fail(p, alias.line, ".alias name '%.*s' must be declared as a function first",
             (int)alias.len, alias.p);
        return;
    }
    tc_ptx_sym *a = &p->m->syms[as];
    if (a->def >= 0) {
        fail(p, alias.line, ".alias name '%.*s' already has a body", (int)alias.len,
             alias.p);
        return;
    }
    a->kind = TC_SYM_ALIAS;
    a->alias_of = ts;
    a->def = (int32_t)si;
    st->sym = as;
    add_ref(p, si, &target, TC_REF_USE);
    end_stmt(p, st, &p->tok);
    advance(p);
}

/* ---- variables ---------------------------------------------------------- */

/* The state space a module-level directive declares (tc_body_space less
 * the spaces only a body has), or TC_SPACE_NONE. */
static tc_space space_of(const tc_tok *t)
{
    int s = tc_body_space(t);
    return s >= TC_SPACE_GLOBAL && s <= TC_SPACE_TEX ? (tc_space)s : TC_SPACE_NONE;
}

/* Whether the prototypes of two function statements (from the linkage to
 * the end of the parameters and the directives that set the calling
 * convention) are the same tokens, whatever the spacing. */
static int same_prototype(const tc_ptx_module *m, const tc_ptx_stmt *a, const tc_ptx_stmt *b)
{
    tc_lexer la, lb;
    tc_lex_init(&la, m->src + a->start, a->proto_end - a->start, a->line);
    tc_lex_init(&lb, m->src + b->start, b->proto_end - b->start, b->line);
    for (;;) {
        tc_tok ta = tc_lex_next(&la), tb = tc_lex_next(&lb);
        if (ta.kind != tb.kind || ta.len != tb.len || memcmp(ta.p, tb.p, ta.len) != 0)
            return 0;
        if (ta.kind == TK_EOF || ta.kind == TK_ERROR)
            return ta.kind == TK_EOF;
    }
}

/* A function declared more than once: ptxas rejects prototypes that
 * disagree ("Inconsistent prototypes") and a prototype after the
 * definition, and takes a linkage a prototype gives. A split build copies
 * the definition's prototype into each unit, so none of that would reach
 * ptxas: the module is compiled whole, and ptxas judges it. */
static void check_redeclaration(parser *p, const tc_ptx_sym *sym, size_t si, int is_def)
{
    const tc_ptx_module *m = p->m;
    const tc_ptx_stmt *now = &m->stmts[si], *first = &m->stmts[sym->decl];
    int len = (int)(sym->len > 200 ? 200 : sym->len);
    if (!is_def && sym->def >= 0)
        whole(p->m, "'%.*s' is declared at line %u after its definition at line %u", len,
              sym->name, now->line, m->stmts[sym->def].line);
    else if (first->linkage != now->linkage || !same_prototype(m, first, now))
        whole(p->m, "the declarations of '%.*s' at lines %u and %u differ", len, sym->name,
              first->line, now->line);
}

static void declare(parser *p, size_t si, const tc_tok *name, uint8_t kind, int is_def)
{
    tc_ptx_module *m = p->m;
    int32_t s = find_sym(p, name->p, name->len);
    if (s < 0) {
        s = add_sym(p, name, kind);
        if (s < 0)
            return;
    } else if (m->syms[s].kind != kind) {
        const tc_ptx_stmt *prev = &m->stmts[m->syms[s].decl];
        fail(p, name->line, "'%.*s' was declared as a %s at line %u", (int)name->len,
             name->p, m->syms[s].kind == TC_SYM_VAR ? "variable" : "function", prev->line);
        return;
    }
    tc_ptx_sym *sym = &m->syms[s];
    if (kind == TC_SYM_FUNC && sym->decl >= 0 && !(is_def && sym->def >= 0))
        check_redeclaration(p, sym, si, is_def);
    if (is_def) {
        if (sym->def >= 0) {
            fail(p, name->line, "redefinition of '%.*s' (first defined at line %u)",
                 (int)name->len, name->p, m->stmts[sym->def].line);
            return;
        }
        sym->def = (int32_t)si;
    }
    if (sym->decl < 0)
        sym->decl = (int32_t)si;
    m->stmts[si].sym = s;
}

static void parse_variable(parser *p, tc_tok first, tc_linkage linkage)
{
    tc_ptx_stmt *st = new_stmt(p, TC_STMT_VAR, &first);
    if (!st)
        return;
    size_t si = p->m->nstmts - 1;
    st->linkage = (uint8_t)linkage;
    st->space = (uint8_t)space_of(&p->tok);
    int depth = 0, in_init = 0, names = 0;
    tc_tok name = {0};
    for (;;) {
        if (p->failed)
            return;
        tc_tok t = p->tok;
        if (t.kind == TK_EOF) {
            fail(p, first.line, "variable declaration is not terminated by ';'");
            return;
        }
        if (t.kind == TK_PUNCT) {
            char c = t.p[0];
            if (c == '(' || c == '{' || c == '[')
                depth++;
            else if (c == ')' || c == '}' || c == ']') {
                if (--depth < 0) {
                    fail(p, t.line, "unbalanced '%c' in variable declaration", c);
                    return;
                }
            } else if (c == '=' && depth == 0) {
                if (in_init) {
                    fail(p, t.line, "a second '=' in one variable declaration");
                    return;
                }
                if (!st->init) /* the first declarator's */
                    st->init = off(p, &t);
                in_init = 1;
            } else if (c == ',' && depth == 0) {
                whole(p->m, "several variables declared in one statement (line %u)",
                      t.line);
                in_init = 0;
            } else if (c == ';' && depth == 0) {
                if (!names) {
                    fail(p, first.line, "variable declaration without a name");
                    return;
                }
                end_stmt(p, st, &t);
                advance(p);
                declare(p, si, &name, TC_SYM_VAR, linkage != TC_LINK_EXTERN);
                return;
            }
        } else if (t.kind == TK_IDENT && t.p[0] != '.') {
            if (in_init)
                add_ref(p, si, &t, TC_REF_USE);
            else if (depth == 0 && !names++)
                name = t;
        } else if (tc_tok_is(&t, ".samplerref")) {
            /* units that use a sampler declare it .extern, and a relocatable
             * compile of one adds an empty init record (all 0xff) beside the
             * module data's own: which one the driver reads is unknown */
            whole(p->m, "line %u: a module-scope .samplerref variable", t.line);
        }
        advance(p);
    }
}

/* ---- functions ---------------------------------------------------------- */

static uint32_t type_size(const char *t, size_t n)
{
    /* ".u32" -> 4, ".f16x2" -> 4, ".b8" -> 1, ".pred" -> 1 */
    size_t i = 1;
    while (i < n && t[i] >= 'a' && t[i] <= 'z')
        i++;
    uint32_t bits = 0, mult = 1;
    while (i < n && t[i] >= '0' && t[i] <= '9')
        bits = bits * 10 + (uint32_t)(t[i++] - '0');
    if (i < n && t[i] == 'x') {
        mult = 0;
        for (i++; i < n && t[i] >= '0' && t[i] <= '9'; i++)
            mult = mult * 10 + (uint32_t)(t[i] - '0');
    }
    if (!bits)
        return n == 5 && !memcmp(t, ".pred", 5) ? 1 : 0;
    return (bits / 8 ? bits / 8 : 1) * (mult ? mult : 1);
}

static int is_type_token(const tc_tok *t)
{
    if (t->kind != TK_IDENT || t->len < 3 || t->p[0] != '.')
        return 0;
    char c = t->p[1];
    if (!(c == 'b' || c == 'u' || c == 's' || c == 'f' || c == 'e' || c == 'p'))
        return 0;
    return type_size(t->p, t->len) > 0 || tc_tok_is(t, ".pred");
}

static uint32_t parse_uint(const tc_tok *t)
{
    uint32_t v = 0;
    if (t->kind != TK_NUM)
        return 0;
    if (t->len > 2 && t->p[0] == '0' && (t->p[1] == 'x' || t->p[1] == 'X')) {
        for (size_t i = 2; i < t->len; i++) {
            char c = t->p[i];
            int d = c >= '0' && c <= '9' ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (d < 0)
                break;
            v = v * 16 + (uint32_t)d;
        }
        return v;
    }
    for (size_t i = 0; i < t->len && t->p[i] >= '0' && t->p[i] <= '9'; i++)
        v = v * 10 + (uint32_t)(t->p[i] - '0');
    return v;
}

/* Parses a parenthesised parameter list; the current token is '('. For
 * entries, records each parameter's layout. */
static void parse_params(parser *p, tc_ptx_stmt *st, int record)
{
    tc_tok open = p->tok;
    advance(p);
    tc_ptx_param cur;
    memset(&cur, 0, sizeof cur);
    int depth = 0, after_ptr = 0, have = 0;
    uint32_t elem = 0, count = 1, align = 0;
    tc_ptx_module *m = p->m;
    for (;;) {
        if (p->failed)
            return;
        tc_tok t = p->tok;
        if (t.kind == TK_EOF || tc_tok_punct(&t, '{') || tc_tok_punct(&t, ';')) {
            fail(p, open.line, "parameter list is not closed by ')'");
            return;
        }
        int closing = tc_tok_punct(&t, ')') && depth == 0;
        if ((tc_tok_punct(&t, ',') && depth == 0) || closing) {
            if (record && have) {
                if (GROW(m->params, m->nparams, m->cap_params) != 0) {
                    oom(p);
                    return;
                }
                cur.size = elem * count;
                cur.align = align ? align : (elem ? elem : 1);
                uint32_t o = (st->param_bytes + cur.align - 1) / cur.align * cur.align;
                cur.offset = o;
                st->param_bytes = o + cur.size;
                m->params[m->nparams++] = cur;
                st->param_count++;
            }
            memset(&cur, 0, sizeof cur);
            after_ptr = have = 0;
            elem = 0;
            count = 1;
            align = 0;
            advance(p);
            if (closing)
                return;
            continue;
        }
        if (tc_tok_punct(&t, '(') || tc_tok_punct(&t, '['))
            depth++;
        else if (tc_tok_punct(&t, ')') || tc_tok_punct(&t, ']'))
            depth--;
        else if (t.kind == TK_IDENT && tc_tok_is(&t, ".ptr"))
            after_ptr = 1;
        else if (t.kind == TK_IDENT && tc_tok_is(&t, ".align")) {
            advance(p);
            if (!after_ptr)
                align = parse_uint(&p->tok);
        } else if (is_type_token(&t)) {
            elem = type_size(t.p, t.len);
            size_t n = t.len - 1 < sizeof cur.type - 1 ? t.len - 1 : sizeof cur.type - 1;
            memcpy(cur.type, t.p + 1, n);
            cur.type[n] = '\0';
        } else if (t.kind == TK_IDENT && t.p[0] != '.' && depth == 0) {
            cur.name = t.p;
            cur.name_len = (uint32_t)t.len;
            have = 1;
        } else if (t.kind == TK_NUM && depth == 1) {
            count = parse_uint(&t);
        }
        advance(p);
    }
}

/* Reads up to three comma-separated numbers after a directive. */
static void parse_dims(parser *p, uint32_t out[3])
{
    advance(p);
    for (int i = 0; i < 3 && p->tok.kind == TK_NUM; i++) {
        out[i] = parse_uint(&p->tok);
        advance(p);
        if (!tc_tok_punct(&p->tok, ','))
            break;
        advance(p);
    }
}

static uint32_t parse_one(parser *p)
{
    advance(p);
    uint32_t v = parse_uint(&p->tok);
    if (p->tok.kind == TK_NUM)
        advance(p);
    return v;
}

static int push_locfile(parser *p, tc_ptx_stmt *st, uint32_t file)
{
    tc_ptx_module *m = p->m;
    for (uint32_t i = 0; i < st->loc_count; i++)
        if (m->locfiles[st->loc_begin + i] == file)
            return 0;
    if (GROW(m->locfiles, m->nlocfiles, m->cap_locfiles) != 0)
        return -1;
    m->locfiles[m->nlocfiles++] = file;
    st->loc_count++;
    return 0;
}

/* A name used as an operand that is also a label of the function is the
 * label (canon.c renames it as one), not the module symbol of that name:
 * its references from the function's operands are dropped. */
static void drop_label_uses(parser *p, const tc_ptx_stmt *st, const tc_map *labels)
{
    if (!labels->count)
        return;
    tc_ptx_module *m = p->m;
    size_t keep = st->ref_begin;
    for (size_t i = st->ref_begin; i < m->nrefs; i++) {
        const tc_ptx_sym *y = &m->syms[m->refs[i].sym];
        if (m->refs[i].how == TC_REF_USE && tc_map_get(labels, y->name, y->len)) {
            /* ptxas takes the name for the label or for the symbol by the
             * instruction (bra: the label; mov: the variable); the units'
             * texts would have to decide it the same way */
            whole(m, "the function at line %u has a label named like the module symbol "
                  "'%.*s' and uses that name", st->line, (int)y->len, y->name);
            continue;
        }
        m->refs[keep++] = m->refs[i];
    }
    m->nrefs = keep;
}

/* What canon.c needs to know of a function's names before writing it
 * (module.h): its labels in order of definition, and whether renaming them
 * and its .local variables is safe. A prefixed name that keeps its
 * spelling (a register, a parameter, a module symbol) could collide with a
 * new name; a prefixed operand is harmless only when it is one of the
 * function's labels (renamed with them), which is known at the end. */
typedef struct rename_check {
    tc_tok kept[8];   /* prefixed operands that must turn out to be labels */
    size_t nkept;
    int rename;
} rename_check;

static int has_canon_prefix(const tc_tok *t)
{
    return t->len >= sizeof TC_CANON_PREFIX - 1 &&
           !memcmp(t->p, TC_CANON_PREFIX, sizeof TC_CANON_PREFIX - 1);
}

static void check_rename(rename_check *r, const tc_body_tok *b)
{
    if ((b->role != TC_BODY_DECL && b->role != TC_BODY_NAME && b->role != TC_BODY_CALLEE) ||
        !has_canon_prefix(&b->tok))
        return;
    if (b->local ? !tc_canon_renamed_space(b->space) : b->role != TC_BODY_NAME || r->nkept == 8)
        r->rename = 0;
    else if (!b->local)
        r->kept[r->nkept++] = b->tok;
}

static int finish_rename(const rename_check *r, const tc_map *labels)
{
    for (size_t i = 0; i < r->nkept; i++)
        if (!tc_map_get(labels, r->kept[i].p, r->kept[i].len))
            return 0;
    return r->rename;
}

/* The operands of a .loc, token by token (PTX ISA: ".loc file line
 * column", then any of ", function_name LABEL [+ OFFSET]" and ", inlined_at
 * file line column"). The body walker ends a .loc with its line; a
 * statement after the operands on that line would be taken for more
 * operands, its declarations and calls unseen: such a module is compiled
 * whole (LOC_OTHER). */
enum { LOC_FILE, LOC_LINE, LOC_COLUMN, LOC_DONE, LOC_CLAUSE, LOC_LABEL, LOC_AFTER_LABEL,
       LOC_OFFSET, LOC_AT_FILE, LOC_AT_LINE, LOC_AT_COLUMN, LOC_OTHER };

static int loc_next(int state, const tc_tok *t)
{
    int num = t->kind == TK_NUM, comma = tc_tok_punct(t, ',');
    switch (state) {
    case LOC_FILE: case LOC_LINE: case LOC_AT_FILE: case LOC_AT_LINE:
        return num ? state + 1 : LOC_OTHER;
    case LOC_COLUMN: case LOC_AT_COLUMN: case LOC_OFFSET:
        return num ? LOC_DONE : LOC_OTHER;
    case LOC_DONE:
        return comma ? LOC_CLAUSE : LOC_OTHER;
    case LOC_CLAUSE:
        return tc_tok_is(t, "function_name") ? LOC_LABEL
               : tc_tok_is(t, "inlined_at")  ? LOC_AT_FILE
                                             : LOC_OTHER;
    case LOC_LABEL:
        return t->kind == TK_IDENT ? LOC_AFTER_LABEL : LOC_OTHER;
    case LOC_AFTER_LABEL:
        return comma ? LOC_CLAUSE : tc_tok_punct(t, '+') ? LOC_OFFSET : LOC_OTHER;
    default:
        return LOC_OTHER;
    }
}

/* Walks the function whose body starts at the current token ('{') and
 * records what it references: module symbols named outside the scope of
 * the function's own declarations, as calls or as uses of an address or
 * value; its .loc files; whether it declares static storage or calls
 * through a register. Leaves the parser after the closing '}'. */
static void scan_body(parser *p, tc_ptx_stmt *st, size_t si)
{
    tc_body w;
    tc_body_init(&w, p->m->src + st->start, p->m->len - st->start, st->line);
    st->loc_begin = (uint32_t)p->m->nlocfiles;
    uint32_t open_line = p->tok.line;
    int want_file = 0;
    /* .loc statements: the locations so far, which an inlined_at must
     * name (ptxas: "used in a preceding .loc directive") */
    tc_map locs = {0};
    uint32_t loc_line = 0, pragma_line = 0, nnum = 0, triple[3] = {0, 0, 0};
    int in_inlined = 0, loc_state = LOC_DONE;
    tc_map labels = {0};   /* the function's labels */
    rename_check rn;
    memset(&rn, 0, sizeof rn);
    rn.rename = 1;
    st->label_begin = (uint32_t)p->m->nlabels;
    tc_body_tok b;
    int rc;
    while (!p->failed && (rc = tc_body_next(&w, &b)) == 1) {
        const tc_tok *t = &b.tok;
        check_rename(&rn, &b);
        if (want_file && t->kind == TK_NUM && push_locfile(p, st, (uint32_t)tc_tok_integer(t)))
            oom(p);
        want_file = 0;
        if (b.inlined && GROW(p->info_uses, p->ninfo_uses, p->cap_info_uses) == 0)
            p->info_uses[p->ninfo_uses++] = (struct info_use){(uint32_t)si, *t};
        else if (b.inlined)
            oom(p);
        if (loc_line && t->line == loc_line) {
            loc_state = loc_next(loc_state, t);
            if (loc_state == LOC_OTHER)
                whole(p->m, "line %u: something follows the operands of a .loc on its line",
                      t->line);
            if (t->kind == TK_NUM && nnum < 3)
                triple[nnum++] = (uint32_t)tc_tok_integer(t);
            if (tc_tok_is(t, "inlined_at") || (t->kind == TK_NUM && nnum == 3)) {
                char key[40];
                int n = snprintf(key, sizeof key, "%u:%u:%u", triple[0], triple[1], triple[2]);
                if (nnum == 3 && in_inlined && !tc_map_get(&locs, key, (size_t)n))
                    whole(p->m, "line %u: inlined_at %u %u %u names a location no earlier .loc "
                          "of its function has", t->line, triple[0], triple[1], triple[2]);
                else if (nnum == 3 && !in_inlined && tc_map_put(&locs, key, (size_t)n, 1) < 0)
                    oom(p);
                in_inlined |= tc_tok_is(t, "inlined_at");
                nnum = tc_tok_is(t, "inlined_at") ? 0 : nnum;
            }
        } else if (pragma_line && t->line == pragma_line && t->kind == TK_STR) {
            if (t->len == 22 && !memcmp(t->p, "\"enable_smem_spilling\"", 22))
                st->ewp_only |= TC_EWP_SMEM_SPILLING;
        }
        switch (b.role) {
        case TC_BODY_END:
            st->cost++;
            break;
        case TC_BODY_OPCODE:
            if (tc_tok_is(t, ".loc")) {
                want_file = 1;
                loc_state = loc_line == t->line ? LOC_OTHER : LOC_FILE;
                if (loc_state == LOC_OTHER)
                    whole(p->m, "line %u: two .loc directives on one line", t->line);
                loc_line = t->line;
                nnum = 0;
                in_inlined = 0;
            } else if (tc_tok_is(t, ".pragma")) {
                pragma_line = t->line;
            } else if (t->len >= 10 && !memcmp(t->p, "setmaxnreg", 10)) {
                st->ewp_only |= TC_EWP_SETMAXNREG;
            }
            break;
        case TC_BODY_DECL:
            if (w.depth > 0 && (b.space == TC_SPACE_GLOBAL || b.space == TC_SPACE_CONST ||
                                b.space == TC_SPACE_SHARED || b.space == TC_SPACE_TEX))
                st->static_vars = 1;
            if (w.depth > 0 && (b.space == TC_SPACE_CONST || b.space == TC_SPACE_TEX))
                st->own_const = 1;
            /* the function's parameters, and the .param a call site
             * declares in the body (nvcc's param0, retval0) */
            if (w.depth == 0 || b.space == TC_BODY_SPACE_PARAM) {
                if (GROW(p->params_seen, p->nparams_seen, p->cap_params_seen) == 0)
                    p->params_seen[p->nparams_seen++] = *t;
                else
                    oom(p);
            }
            break;
        case TC_BODY_CALLEE: {
            int32_t sym = b.local ? -1 : find_sym(p, t->p, t->len);
            if (sym < 0 || p->m->syms[sym].kind == TC_SYM_VAR)
                st->indirect_call = 1;
            if (!b.local)
                add_ref(p, si, t, TC_REF_CALL);
            break;
        }
        case TC_BODY_NAME:
            if (!b.local)
                add_ref(p, si, t, TC_REF_USE);
            break;
        case TC_BODY_LABEL: {
            int fresh = tc_map_put(&labels, t->p, t->len, 1);
            if (fresh < 0 || (fresh && GROW(p->m->labels, p->m->nlabels, p->m->cap_labels))) {
                oom(p);
            } else if (fresh) {
                p->m->labels[p->m->nlabels].off = off(p, t);
                p->m->labels[p->m->nlabels++].len = (uint32_t)t->len;
                st->label_count++;
            }
            break;
        }
        default:
            break;
        }
        if (w.done && b.role == TC_BODY_CLOSE) {
            st->canon_rename = (uint8_t)finish_rename(&rn, &labels);
            st->labels_known = 1;
            drop_label_uses(p, st, &labels);
            end_stmt(p, st, t);
            p->lx.cur = w.lx.cur;
            p->lx.line = w.lx.line;
        }
    }
    if (!p->failed && rc < 0) {
        if (w.oom)
            oom(p);
        else if (w.lx.err)
            fail(p, w.err_line, "%s", w.lx.err);
        else
            fail(p, open_line, "function body opened here is never closed");
    }
    tc_body_free(&w);
    tc_map_free(&labels);
    tc_map_free(&locs);
    if (!p->failed)
        advance(p);
}

static void parse_function(parser *p, tc_tok first, tc_linkage linkage)
{
    tc_ptx_stmt *st = new_stmt(p, TC_STMT_FUNC, &first);
    if (!st)
        return;
    p->seen_function = 1;
    size_t si = p->m->nstmts - 1;
    st->linkage = (uint8_t)linkage;
    st->is_entry = tc_tok_is(&p->tok, ".entry");
    advance(p);
    /* .attribute(...) may precede the return list / name */
    while (!p->failed && tc_tok_is(&p->tok, ".attribute")) {
        advance(p);
        if (!tc_tok_punct(&p->tok, '(')) {
            fail(p, p->tok.line, "expected '(' after .attribute");
            return;
        }
        int d = 0;
        do {
            if (tc_tok_punct(&p->tok, '('))
                d++;
            else if (tc_tok_punct(&p->tok, ')'))
                d--;
            else if (p->tok.kind == TK_EOF) {
                fail(p, first.line, "unterminated .attribute");
                return;
            }
            advance(p);
        } while (d > 0 && !p->failed);
    }
    if (!st->is_entry && tc_tok_punct(&p->tok, '('))
        parse_params(p, st, 0); /* return parameter list */
    if (p->failed)
        return;
    if (p->tok.kind != TK_IDENT || p->tok.p[0] == '.') {
        fail(p, p->tok.line, "expected a name after %s", st->is_entry ? ".entry" : ".func");
        return;
    }
    tc_tok name = p->tok;
    st->proto_end = off(p, &name) + name.len;
    advance(p);
    st->param_begin = (uint32_t)p->m->nparams;
    if (tc_tok_punct(&p->tok, '(')) {
        parse_params(p, st, st->is_entry);
        if (p->failed)
            return;
        st->proto_end = off(p, &p->tok); /* just past ')' */
    }
    /* performance directives up to '{' or ';'; those that belong to the
     * prototype (a declaration must repeat them: they set the calling
     * convention) extend proto_end */
    int after_other = 0; /* a directive that is not the prototype's came first */
    for (;;) {
        if (p->failed)
            return;
        tc_tok t = p->tok;
        if (t.kind == TK_EOF) {
            fail(p, first.line, "function '%.*s' has neither a body nor ';'",
                 (int)name.len, name.p);
            return;
        }
        if (tc_tok_punct(&t, ';')) {
            end_stmt(p, st, &t);
            advance(p);
            declare(p, si, &name, TC_SYM_FUNC, 0);
            break;
        }
        if (tc_tok_punct(&t, '{')) {
            st->has_body = 1;
            st->body = off(p, &t);
            declare(p, si, &name, TC_SYM_FUNC, 1);
            if (p->failed)
                return;
            scan_body(p, st, si);
            break;
        }
        if (tc_tok_is(&t, ".maxntid"))
            parse_dims(p, st->perf.maxntid);
        else if (tc_tok_is(&t, ".reqntid"))
            parse_dims(p, st->perf.reqntid);
        else if (tc_tok_is(&t, ".reqnctapercluster"))
            parse_dims(p, st->perf.reqnctapercluster);
        else if (tc_tok_is(&t, ".minnctapersm"))
            st->perf.minnctapersm = parse_one(p);
        else if (tc_tok_is(&t, ".maxnreg"))
            st->perf.maxnreg = parse_one(p);
        else if (tc_tok_is(&t, ".maxclusterrank"))
            st->perf.maxclusterrank = parse_one(p);
        else if (tc_tok_is(&t, ".explicitcluster")) {
            st->perf.explicitcluster = 1;
            advance(p);
        } else if (tc_tok_is(&t, ".noreturn") || tc_tok_is(&t, ".abi_preserve") ||
                   tc_tok_is(&t, ".abi_preserve_control")) {
            tc_tok last = t;
            st->perf.noreturn |= tc_tok_is(&t, ".noreturn");
            advance(p);
            if (!tc_tok_is(&t, ".noreturn") && p->tok.kind == TK_NUM) {
                last = p->tok; /* the register count */
                advance(p);
            }
            st->proto_end = off(p, &last) + last.len;
            if (after_other)
                whole(p->m, "the prototype of '%.*s' goes on after other directives (line %u)",
                      (int)(name.len > 64 ? 64 : name.len), name.p, t.line);
            continue;
        } else if (tc_tok_is(&t, ".pragma")) {
            advance(p);
            while (!p->failed && p->tok.kind != TK_EOF && !tc_tok_punct(&p->tok, ';') &&
                   !tc_tok_punct(&p->tok, '{'))
                advance(p);
            if (tc_tok_punct(&p->tok, ';'))
                advance(p);
        } else if (t.kind == TK_PUNCT && t.p[0] == '}') {
            fail(p, t.line, "unexpected '}' in the header of '%.*s'", (int)name.len, name.p);
            return;
        } else {
            advance(p);
        }
        after_other = 1;
    }
    if (p->failed)
        return;
    if (st->is_entry) {
        p->m->syms[st->sym].is_entry = 1;
        if (st->has_body)
            p->m->nentries++;
    }
}

/* A parameter named like a module symbol (one of the function's, or a
 * .param a call site declares in the body) hides it in the function, but
 * ptxas 13.0 resolves the name to the module symbol when another function
 * follows: what the module means then depends on the order of its
 * functions, which units change. Such modules are compiled whole. So is
 * one with a module symbol named with the prefix canonical texts give
 * labels and .local variables: a renamed label of one function would meet
 * it in a unit. */
static void check_hidden_names(parser *p)
{
    size_t plen = sizeof TC_CANON_PREFIX - 1;
    for (size_t i = 0; i < p->m->nsyms; i++) {
        const tc_ptx_sym *y = &p->m->syms[i];
        if (y->len >= plen && !memcmp(y->name, TC_CANON_PREFIX, plen)) {
            whole(p->m, "'%.*s' is named with the prefix %s, which taskcache gives the labels "
                        "of units", (int)(y->len > 64 ? 64 : y->len), y->name, TC_CANON_PREFIX);
            return;
        }
    }
    for (size_t i = 0; i < p->nparams_seen; i++) {
        const tc_tok *t = &p->params_seen[i];
        if (find_sym(p, t->p, t->len) >= 0) {
            whole(p->m, "parameter '%.*s' at line %u is named like a module symbol, which "
                        "ptxas resolves differently depending on the functions that follow",
                  (int)(t->len > 64 ? 64 : t->len), t->p, t->line);
            p->m->may_crash_compiler = 1;
            return;
        }
    }
}

/* ---- module level ------------------------------------------------------- */

/* Gives each function the .debug_str entries its .loc directives name
 * (once each, in m->inforefs), and each entry the name units write it
 * under: from its bytes, so that a new inlined function, which renumbers
 * nvcc's $L__info_stringN after it, changes no other unit's text. */
static void resolve_infos(parser *p)
{
    tc_ptx_module *m = p->m;
    if (m->whole_reason[0])
        return;
    uint32_t *seen = calloc(m->ninfos ? m->ninfos : 1, sizeof *seen);
    if (!seen) {
        oom(p);
        return;
    }
    for (size_t i = 0; i < p->ninfo_uses && !p->failed; i++) {
        const struct info_use *u = &p->info_uses[i];
        uint32_t *idx = tc_map_get(&m->infomap, u->label.p, u->label.len);
        if (!idx) {
            whole(m, "line %u names '%.*s' as an inlined function, which no .debug_str entry "
                     "defines", u->label.line, (int)(u->label.len > 64 ? 64 : u->label.len),
                  u->label.p);
            break;
        }
        tc_ptx_stmt *st = &m->stmts[u->stmt];
        if (!st->info_count)
            st->info_begin = (uint32_t)m->ninforefs;
        if (seen[*idx] == u->stmt + 1)
            continue;
        seen[*idx] = u->stmt + 1;
        if (GROW(m->inforefs, m->ninforefs, m->cap_inforefs) != 0) {
            oom(p);
            break;
        }
        m->inforefs[m->ninforefs++] = *idx;
        st->info_count++;
    }
    free(seen);
    tc_sb bytes = TC_SB_INIT;
    for (size_t i = 0; i < m->ninfos && !p->failed; i++) {
        tc_ptx_info *in = &m->infos[i];
        tc_lexer lx;
        tc_lex_init(&lx, m->src + in->data, in->data_end - in->data, in->line);
        tc_sb_reset(&bytes);
        for (tc_tok t = tc_lex_next(&lx); t.kind != TK_EOF && t.kind != TK_ERROR;
             t = tc_lex_next(&lx))
            if (t.kind == TK_NUM) {
                tc_sb_append(&bytes, t.p, t.len);
                tc_sb_putc(&bytes, ',');
            }
        if (bytes.oom) {
            oom(p);
            break;
        }
        tc_digest d;
        char hex[TC_DIGEST_HEX_LEN + 1];
        tc_digest_of(bytes.data, bytes.len, &d);
        tc_digest_hex(&d, hex);
        snprintf(in->canon, sizeof in->canon, TC_CANON_PREFIX "S%.24s", hex);
    }
    tc_sb_free(&bytes);
}

static void parse_module(parser *p)
{
    advance(p);
    while (!p->failed && p->tok.kind != TK_EOF) {
        tc_tok first = p->tok;
        /* PTX requires .version first and .target right after it */
        size_t n = p->m->nstmts;
        if (n == 0 && !tc_tok_is(&first, ".version")) {
            char d[64];
            fail(p, first.line, "a module must start with .version (found %s)",
                 describe(&first, d));
            return;
        }
        if (n == 1 && !tc_tok_is(&first, ".target")) {
            char d[64];
            fail(p, first.line, ".target must follow .version (found %s)", describe(&first, d));
            return;
        }
        if (first.kind != TK_IDENT) {
            char d[64];
            if (tc_tok_punct(&first, '}'))
                fail(p, first.line, "'}' without a matching '{'");
            else if (tc_tok_punct(&first, '@'))
                fail(p, first.line, "unsupported module-level '@' directive (old-style "
                                    "@@DWARF debug information)");
            else
                fail(p, first.line, "unexpected %s at module level", describe(&first, d));
            return;
        }
        if (tc_tok_is(&first, ".version")) {
            parse_version(p, first);
            continue;
        }
        if (tc_tok_is(&first, ".target")) {
            parse_target(p, first);
            continue;
        }
        if (tc_tok_is(&first, ".address_size")) {
            parse_address_size(p, first);
            continue;
        }
        if (tc_tok_is(&first, ".file")) {
            parse_file(p, first);
            continue;
        }
        if (tc_tok_is(&first, ".section")) {
            parse_section(p, first);
            continue;
        }
        if (tc_tok_is(&first, ".pragma")) {
            parse_pragma(p, first);
            continue;
        }
        if (tc_tok_is(&first, ".alias")) {
            parse_alias(p, first);
            continue;
        }
        tc_linkage linkage = TC_LINK_INTERNAL;
        for (;;) {
            if (tc_tok_is(&p->tok, ".visible"))
                linkage = TC_LINK_VISIBLE;
            else if (tc_tok_is(&p->tok, ".extern"))
                linkage = TC_LINK_EXTERN;
            else if (tc_tok_is(&p->tok, ".weak"))
                linkage = TC_LINK_WEAK;
            else if (tc_tok_is(&p->tok, ".common"))
                linkage = TC_LINK_COMMON;
            else
                break;
            advance(p);
        }
        if (p->failed)
            return;
        if (tc_tok_is(&p->tok, ".func") || tc_tok_is(&p->tok, ".entry")) {
            parse_function(p, first, linkage);
        } else if (space_of(&p->tok) != TC_SPACE_NONE) {
            parse_variable(p, first, linkage);
        } else if (p->tok.kind == TK_IDENT && p->tok.p[0] == '.') {
            fail(p, p->tok.line, "unknown module-level directive '%.*s'", (int)p->tok.len,
                 p->tok.p);
        } else {
            char d[64];
            fail(p, p->tok.line, "unexpected %s at module level", describe(&p->tok, d));
        }
    }
    if (p->failed)
        return;
    resolve_infos(p);
    check_hidden_names(p);
    if (p->m->version_stmt < 0)
        fail(p, p->tok.line, "missing .version directive (the input is empty)");
    else if (p->m->target_stmt < 0)
        fail(p, p->tok.line, "missing .target directive");
}

size_t tc_ptx_text_len(const char *src, size_t len)
{
    const char *nul = len ? memchr(src, '\0', len) : NULL;
    return nul ? (size_t)(nul - src) : len;
}

int tc_ptx_parse(const char *src, size_t len, tc_ptx_module *m, tc_ptx_error *err)
{
    memset(m, 0, sizeof *m);
    memset(err, 0, sizeof *err);
    m->src = src;
    m->len = len;
    m->version_stmt = m->target_stmt = m->addrsize_stmt = -1;
    m->section_stmt = -1;
    parser p;
    memset(&p, 0, sizeof p);
    p.m = m;
    p.err = err;
    tc_lex_init(&p.lx, src, len, 1);
    parse_module(&p);
    free(p.mark);
    free(p.pos);
    free(p.params_seen);
    free(p.info_uses);
    if (p.failed) {
        tc_ptx_module_free(m); /* callers free only what parsed */
        return -1;
    }
    return 0;
}

void tc_ptx_module_free(tc_ptx_module *m)
{
    free(m->stmts);
    free(m->syms);
    free(m->refs);
    free(m->params);
    free(m->locfiles);
    free(m->labels);
    free(m->infos);
    free(m->inforefs);
    tc_map_free(&m->symtab);
    tc_map_free(&m->infomap);
    memset(m, 0, sizeof *m);
}
