/* canon: canonical text of statements (see canon.h). Functions are walked
 * with the body walker, so renaming follows PTX's scopes: a .local buffer
 * declared in an inner block is renamed there and only there, and a name
 * declared inside a function never takes a module constant's new name. */
#define _GNU_SOURCE /* memmem */
#include "ptx/canon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx/body.h"
#include "ptx/lex.h"
#include "util/hash.h"
#include "util/map.h"

void tc_piece_free(tc_piece *p)
{
    tc_sb_free(&p->text);
    free(p->lines);
    memset(p, 0, sizeof *p);
}

void tc_piece_reset(tc_piece *p)
{
    tc_sb_reset(&p->text);
    p->nlines = 0;
}

static void piece_line(tc_piece *p, uint32_t in_line)
{
    if (p->nlines == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 64;
        uint32_t *l = realloc(p->lines, nc * sizeof *l);
        if (!l) {
            p->text.oom = 1;
            return;
        }
        p->lines = l;
        p->cap = nc;
    }
    p->lines[p->nlines++] = in_line;
}

/* ---- tokens and separators ------------------------------------------------ */

typedef struct writer {
    tc_piece *out;
    const tc_ptx_module *m;
    const tc_canon_name *names;
    const tc_ptx_stmt *st;
    int link;
    int prefix;         /* still before the statement's first non-linkage token */
    tc_tok prev;        /* last token written, as it stands in the input */
    int have_prev;
    int space_after;    /* the last token was an opcode */
} writer;

static int is_word(const tc_tok *t)
{
    return t->kind == TK_IDENT || t->kind == TK_NUM || t->kind == TK_STR;
}

static int is_operator(const tc_tok *t)
{
    return t->kind == TK_PUNCT && t->p[0] && strchr("+-*/%<>=!&|^~", t->p[0]) != NULL;
}

static int need_space(const writer *w, const tc_tok *t)
{
    const tc_tok *p = &w->prev;
    if (tc_tok_punct(t, ';') || tc_tok_punct(t, ','))
        return 0;
    if (w->space_after || tc_tok_punct(p, ','))
        return 1;
    if ((is_word(p) || tc_tok_punct(p, ')')) && (is_word(t) || tc_tok_punct(t, '(')))
        return 1;
    if ((tc_tok_punct(p, '=') && !is_operator(t)) || (tc_tok_punct(t, '=') && !is_operator(p)))
        return 1; /* "x = 5" */
    return is_operator(p) && is_operator(t) && t->p > p->p + p->len;
}

/* Writes token t as `text`, on a new line when new_line. */
static void put(writer *w, const tc_tok *t, const char *text, size_t len, int new_line)
{
    tc_piece *o = w->out;
    if (!w->have_prev) {
        piece_line(o, t->line);
    } else if (new_line) {
        tc_sb_putc(&o->text, '\n');
        piece_line(o, t->line);
    } else if (need_space(w, t)) {
        tc_sb_putc(&o->text, ' ');
    }
    tc_sb_append(&o->text, text, len);
    w->prev = *t;
    w->have_prev = 1;
    w->space_after = 0;
}

static int is_linkage_tok(const tc_tok *t)
{
    return t->kind == TK_IDENT && (tc_tok_is(t, ".visible") || tc_tok_is(t, ".extern") ||
                                   tc_tok_is(t, ".weak") || tc_tok_is(t, ".common"));
}

/* Rewrites the linkage at the start of a statement; returns 1 when t was
 * consumed (a linkage token kept or dropped). */
static int linkage(writer *w, const tc_tok *t)
{
    if (!w->prefix)
        return 0;
    if (is_linkage_tok(t)) {
        if (w->link == TC_CANON_KEEP || w->link == TC_CANON_VISIBLE)
            put(w, t, t->p, t->len, 0);
        return 1;
    }
    w->prefix = 0;
    static const tc_tok vis = {TK_IDENT, 0, ".visible", 8}, ext = {TK_IDENT, 0, ".extern", 7};
    const tc_tok *add = w->link == TC_CANON_EXTERN ? &ext
                        : w->link == TC_CANON_VISIBLE && w->st->linkage == TC_LINK_INTERNAL
                            ? &vis
                            : NULL;
    if (add) {
        tc_tok a = *add;
        a.line = t->line;
        put(w, &a, a.p, a.len, 0);
    }
    return 0;
}

/* The name a module symbol is written under, or NULL for its own. */
static const char *module_name(const writer *w, const tc_tok *t)
{
    if (!w->names || t->kind != TK_IDENT)
        return NULL;
    uint32_t *v = tc_map_get(&w->m->symtab, t->p, t->len);
    return v && w->names[*v][0] ? w->names[*v] : NULL;
}

/* The name a .debug_str label is written under, or NULL for another name. */
static const char *info_name(const tc_ptx_module *m, const tc_tok *t)
{
    if (!m->ninfos || t->kind != TK_IDENT)
        return NULL;
    uint32_t *v = tc_map_get(&m->infomap, t->p, t->len);
    return v && m->infos[*v].canon[0] ? m->infos[*v].canon : NULL;
}

/* Tokens of st in [st->start, cut), one line. */
static void put_tokens(writer *w, size_t cut, const tc_ptx_sym *blank)
{
    tc_lexer lx;
    tc_lex_init(&lx, w->m->src + w->st->start, cut - w->st->start, w->st->line);
    for (;;) {
        tc_tok t = tc_lex_next(&lx);
        if (t.kind == TK_EOF || t.kind == TK_ERROR)
            break;
        if (linkage(w, &t))
            continue;
        const char *n = module_name(w, &t);
        if (blank && t.p == blank->name)
            put(w, &t, "$", 1, 0);
        else if (n)
            put(w, &t, n, strlen(n), 0);
        else
            put(w, &t, t.p, t.len, 0);
    }
}

/* ---- functions ------------------------------------------------------------ */

/* Labels of a function in order of definition, and whether renaming is
 * safe: no name that keeps its own spelling (a register, parameter, module
 * symbol) may start with the reserved prefix. The parser finds both as it
 * walks the body (module.h), so writing a function is one walk. */
typedef struct labels {
    tc_map map;
    int rename;
} labels;

/* The labels of function st in [st->start, cut). Only a whole function
 * with a body has any: a prototype, or a function without a body, is its
 * header, which defines no label and declares nothing renamed (parameters
 * keep their names), so renaming is moot there. */
static int function_labels(const tc_ptx_module *m, const tc_ptx_stmt *st, size_t cut, labels *l)
{
    if (!st->labels_known || cut != st->end)
        return 0;
    l->rename = st->canon_rename;
    for (uint32_t i = 0; i < st->label_count; i++) {
        const tc_ptx_label *x = &m->labels[st->label_begin + i];
        if (tc_map_put(&l->map, m->src + x->off, x->len, i) < 0)
            return -1;
    }
    return 0;
}

/* Tokens of function st in [st->start, cut): the whole function, or its
 * prototype for a declaration. */
static void put_function(writer *w, size_t cut)
{
    const tc_ptx_stmt *st = w->st;
    labels l;
    memset(&l, 0, sizeof l);
    if (function_labels(w->m, st, cut, &l) != 0) {
        w->out->text.oom = 1;
        tc_map_free(&l.map);
        return;
    }
    tc_body b;
    tc_body_init(&b, w->m->src + st->start, cut - st->start, st->line);
    tc_body_tok k;
    char name[32];
    while (tc_body_next(&b, &k) == 1) {
        const tc_tok *t = &k.tok;
        if (k.role == TC_BODY_HEADER && linkage(w, t))
            continue;
        const char *text = t->p;
        size_t len = t->len;
        uint32_t *v;
        int named = k.role == TC_BODY_LABEL || k.role == TC_BODY_DECL ||
                    k.role == TC_BODY_NAME || k.role == TC_BODY_CALLEE;
        if (l.rename && k.local && named && tc_canon_renamed_space(k.space)) {
            len = (size_t)snprintf(name, sizeof name, TC_CANON_PREFIX "V%u", k.decl);
            text = name;
        } else if (l.rename && !k.local &&
                   (k.role == TC_BODY_LABEL || k.role == TC_BODY_NAME) &&
                   (v = tc_map_get(&l.map, t->p, t->len)) != NULL) {
            len = (size_t)snprintf(name, sizeof name, TC_CANON_PREFIX "L%u", *v);
            text = name;
        } else if (k.inlined && (text = info_name(w->m, t)) != NULL) {
            len = strlen(text); /* an inlined function's name in a .loc directive */
        } else if (!k.local && (k.role == TC_BODY_NAME || k.role == TC_BODY_CALLEE) &&
                   (text = module_name(w, t)) != NULL) {
            len = strlen(text);
        } else {
            text = t->p;
        }
        put(w, t, text, len, k.stmt_start);
        w->space_after = k.role == TC_BODY_OPCODE;
    }
    if (b.oom)
        w->out->text.oom = 1;
    tc_body_free(&b);
    tc_map_free(&l.map);
}

/* ---- statements ------------------------------------------------------------ */

static void writer_init(writer *w, const tc_ptx_module *m, const tc_canon_name *names,
                        const tc_ptx_stmt *st, int link, tc_piece *out)
{
    memset(w, 0, sizeof *w);
    w->out = out;
    w->m = m;
    w->names = names;
    w->st = st;
    w->link = link;
    w->prefix = 1;
}

int tc_canon_stmt(const tc_ptx_module *m, const tc_canon_name *names, const tc_ptx_stmt *st,
                  int link, const tc_ptx_sym *blank, tc_piece *out)
{
    writer w;
    writer_init(&w, m, names, st, link, out);
    if (st->kind == TC_STMT_FUNC)
        put_function(&w, st->end);
    else
        put_tokens(&w, st->end, blank);
    tc_sb_putc(&out->text, '\n');
    return out->text.oom ? -1 : 0;
}

int tc_canon_decl(const tc_ptx_module *m, const tc_canon_name *names, const tc_ptx_stmt *st,
                  size_t cut, int link, tc_piece *out)
{
    writer w;
    writer_init(&w, m, names, st, link, out);
    if (st->kind == TC_STMT_FUNC)
        put_function(&w, cut);
    else
        put_tokens(&w, cut, NULL);
    tc_sb_puts(&out->text, ";\n");
    return out->text.oom ? -1 : 0;
}

/* ---- .debug_str entries ------------------------------------------------------- */

int tc_canon_infos(const tc_ptx_module *m, const uint32_t *idx, size_t n, tc_piece *out)
{
    uint32_t line = m->section_stmt >= 0 ? m->stmts[m->section_stmt].line : 1;
    piece_line(out, line);
    tc_sb_puts(&out->text, ".section .debug_str\n");
    piece_line(out, line);
    tc_sb_puts(&out->text, "{\n");
    for (size_t i = 0; i < n; i++) {
        const tc_ptx_info *in = &m->infos[idx[i]];
        piece_line(out, in->line);
        tc_sb_printf(&out->text, "%s:\n", in->canon);
        tc_lexer lx;
        tc_lex_init(&lx, m->src + in->data, in->data_end - in->data, in->line);
        size_t on_line = 0;
        for (tc_tok t = tc_lex_next(&lx); t.kind != TK_EOF && t.kind != TK_ERROR;
             t = tc_lex_next(&lx)) {
            if (t.kind != TK_NUM)
                continue;
            if (on_line == 40) { /* nvcc's lines: 40 bytes */
                tc_sb_putc(&out->text, '\n');
                on_line = 0;
            }
            if (!on_line) {
                piece_line(out, t.line);
                tc_sb_puts(&out->text, ".b8 ");
            } else {
                tc_sb_putc(&out->text, ',');
            }
            tc_sb_append(&out->text, t.p, t.len);
            on_line++;
        }
        tc_sb_putc(&out->text, '\n');
    }
    piece_line(out, line);
    tc_sb_puts(&out->text, "}\n");
    return out->text.oom ? -1 : 0;
}

/* ---- compiler-named constants ------------------------------------------------ */

/* Only .global and .const variables: they alone take initializers, and a
 * unit keeps their linkage (a .shared variable's is dropped there, which
 * would make a .visible one anonymous in the unit but not in the module). */
static int is_anonymous(const tc_ptx_module *m, const tc_ptx_sym *y)
{
    if (y->kind != TC_SYM_VAR || y->def < 0 ||
        (m->stmts[y->def].space != TC_SPACE_GLOBAL && m->stmts[y->def].space != TC_SPACE_CONST) ||
        m->stmts[y->def].linkage != TC_LINK_INTERNAL ||
        (y->decl >= 0 && m->stmts[y->decl].linkage != TC_LINK_INTERNAL))
        return 0;
    return y->name[0] == '$' || (y->len > 10 && !memcmp(y->name, "__unnamed_", 10));
}

/* Compilers name private constants by their position in the module
 * (nvcc's $str, $str$1, ...; LLVM's __unnamed_1, ...), so adding a kernel
 * with a printf would rename every later string and change the keys of
 * every kernel using one. Such a constant is named after its declaration
 * and initializer, its own name blanked (nvcc merges equal strings, so
 * this name alone is unique in its output). Generators that repeat equal
 * constants get names that also hold the constant's owner, the first
 * symbol in name order whose statement refers to it (other than such a
 * constant), and among equal
 * constants of one owner their order: an equal constant added for another
 * kernel then leaves the existing names alone, except when it is the
 * first repetition of a constant that was unique. */
/* The constant statement i defines, or NULL. */
static const tc_ptx_sym *constant_at(const tc_ptx_module *m, size_t i)
{
    const tc_ptx_stmt *st = &m->stmts[i];
    if (st->kind != TC_STMT_VAR || st->sym < 0 || m->syms[st->sym].def != (int32_t)i ||
        !is_anonymous(m, &m->syms[st->sym]))
        return NULL;
    return &m->syms[st->sym];
}

/* Digest of a constant's canonical text with its own name blanked. */
static int content_digest(const tc_ptx_module *m, const tc_canon_name *names, size_t i,
                          tc_piece *text, tc_digest *out)
{
    tc_piece_reset(text);
    if (tc_canon_stmt(m, names, &m->stmts[i], TC_CANON_KEEP, constant_at(m, i), text) != 0)
        return -1;
    tc_digest_of(text->text.data, text->text.len, out);
    return 0;
}

int tc_canon_name_constants(const tc_ptx_module *m, const uint32_t *rank, tc_canon_name **out)
{
    *out = NULL;
    size_t count = 0;
    for (size_t i = 0; i < m->nsyms; i++) {
        const tc_ptx_sym *y = &m->syms[i];
        if (is_anonymous(m, y))
            count++;
    }
    /* A name of the kind given here anywhere in the text (a symbol, but
     * also a register or parameter, which would capture a reference to the
     * renamed constant): the constants keep their own names. */
    if (memmem(m->src, m->len, TC_CANON_PREFIX "A", sizeof TC_CANON_PREFIX "A" - 1))
        return 0;
    if (!count)
        return 0;
    const uint32_t none = UINT32_MAX;
    tc_canon_name *names = calloc(m->nsyms, sizeof *names);
    uint32_t *owner = malloc(m->nsyms * sizeof *owner);
    tc_digest *content = malloc(m->nsyms * sizeof *content);
    tc_hash *h = tc_hash_new();
    tc_piece text;
    memset(&text, 0, sizeof text);
    tc_map repeats = {0}; /* content -> how many constants have it */
    tc_map given = {0};   /* name -> how many constants were given it */
    int rc = -1;
    if (!names || !owner || !content || !h)
        goto done;
    for (size_t i = 0; i < m->nsyms; i++)
        owner[i] = none;
    for (size_t i = 0; i < m->nstmts; i++) {
        const tc_ptx_stmt *st = &m->stmts[i];
        if (st->sym < 0 || is_anonymous(m, &m->syms[st->sym]))
            continue; /* owners have names of their own */
        for (uint32_t r = 0; r < st->ref_count; r++) {
            uint32_t y = m->refs[st->ref_begin + r].sym;
            if (owner[y] == none || rank[st->sym] < rank[owner[y]])
                owner[y] = (uint32_t)st->sym;
        }
    }
    for (size_t i = 0; i < m->nstmts; i++) {
        const tc_ptx_sym *y = constant_at(m, i);
        if (!y)
            continue;
        uint32_t sym = (uint32_t)(y - m->syms);
        if (content_digest(m, NULL, i, &text, &content[sym]) != 0)
            goto done;
        uint32_t *v = tc_map_get(&repeats, (const char *)content[sym].b, TC_DIGEST_LEN);
        if (v)
            (*v)++;
        else if (tc_map_put(&repeats, (const char *)content[sym].b, TC_DIGEST_LEN, 1) < 0)
            goto done;
    }
    /* in module order: an initializer that names an earlier constant uses
     * its new name */
    for (size_t i = 0; i < m->nstmts; i++) {
        const tc_ptx_sym *y = constant_at(m, i);
        if (!y)
            continue;
        uint32_t sym = (uint32_t)(y - m->syms);
        int repeated = *tc_map_get(&repeats, (const char *)content[sym].b, TC_DIGEST_LEN) > 1;
        tc_digest d;
        if (content_digest(m, names, i, &text, &d) != 0)
            goto done;
        if (repeated) {
            tc_hash_field(h, "constant", d.b, TC_DIGEST_LEN);
            if (owner[sym] != none)
                tc_hash_field(h, "owner", m->syms[owner[sym]].name, m->syms[owner[sym]].len);
            tc_hash_final(h, &d);
        }
        char hex[TC_DIGEST_HEX_LEN + 1];
        tc_digest_hex(&d, hex);
        int n = snprintf(names[sym], sizeof names[0], TC_CANON_PREFIX "A%.16s", hex);
        uint32_t k = 0, *v = tc_map_get(&given, names[sym], (size_t)n);
        if (v)
            k = (*v)++;
        else if (tc_map_put(&given, names[sym], (size_t)n, 1) < 0)
            goto done;
        if (k) /* equal constants of one owner, in their order */
            snprintf(names[sym] + n, sizeof names[0] - (size_t)n, "_%u", k);
    }
    rc = 0;
done:
    tc_piece_free(&text);
    tc_map_free(&repeats);
    tc_map_free(&given);
    tc_hash_free(h);
    free(owner);
    free(content);
    if (rc == 0)
        *out = names;
    else
        free(names);
    return rc;
}
