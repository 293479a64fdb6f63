/* slice: reference-graph analysis and canonical emission of units and of
 * the module-data object (see slice.h). The graph is the per-statement
 * reference lists built by the parser; each unit is one walk over it, so
 * total work is linear in the size of what is emitted. */
#include "slice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/hash.h"
#include "lex.h"

/* How a copied statement's linkage is rewritten. */
enum { LINK_KEEP, LINK_DROP, LINK_VISIBLE, LINK_EXTERN };

/* ---- growable arrays ---------------------------------------------------- */

typedef struct u32vec {
    uint32_t *v;
    size_t n, cap;
} u32vec;

static int vpush(u32vec *a, uint32_t x)
{
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 16;
        uint32_t *p = realloc(a->v, nc * sizeof *p);
        if (!p)
            return -1;
        a->v = p;
        a->cap = nc;
    }
    a->v[a->n++] = x;
    return 0;
}

static void vfree(u32vec *a)
{
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

/* ---- emitted text with a line map -------------------------------------- */

void tc_text_free(tc_text *t)
{
    tc_sb_free(&t->text);
    free(t->segs);
    memset(t, 0, sizeof *t);
}

uint32_t tc_text_map_line(const tc_text *t, uint32_t out_line)
{
    for (size_t i = 0; i < t->nsegs; i++) {
        const tc_line_seg *g = &t->segs[i];
        if (out_line >= g->out_line && out_line < g->out_line + g->count)
            return g->in_line + (out_line - g->out_line);
    }
    return 0;
}

static void text_put(tc_text *t, const char *p, size_t n)
{
    tc_sb_append(&t->text, p, n);
    for (size_t i = 0; i < n; i++)
        if (p[i] == '\n')
            t->line++;
}

static void text_puts(tc_text *t, const char *s) { text_put(t, s, strlen(s)); }

static void text_newline_if_needed(tc_text *t)
{
    if (t->line == 0)
        t->line = 1;
    if (t->text.len && t->text.data[t->text.len - 1] != '\n')
        text_put(t, "\n", 1);
}

static void text_seg(tc_text *t, uint32_t in_line, uint32_t count)
{
    if (t->nsegs == t->cap_segs) {
        size_t nc = t->cap_segs ? t->cap_segs * 2 : 32;
        tc_line_seg *p = realloc(t->segs, nc * sizeof *p);
        if (!p) {
            t->text.oom = 1;
            return;
        }
        t->segs = p;
        t->cap_segs = nc;
    }
    t->segs[t->nsegs].out_line = t->line;
    t->segs[t->nsegs].in_line = in_line;
    t->segs[t->nsegs].count = count;
    t->nsegs++;
}

/* ---- the slicer --------------------------------------------------------- */

struct tc_slicer {
    const tc_ptx_module *m;
    uint32_t *rank;      /* per symbol: position in name order */
    uint8_t *md;         /* per symbol: function defined in the module data */
    uint32_t *entries;   /* entry definition statements, name order */
    size_t nentries;
    uint32_t *cost;      /* per entry (name order) */
    uint32_t *stamp;     /* per symbol: generation that last collected it */
    uint32_t gen;
    int rename;          /* canonical renaming of local labels */
    int has_md;
    u32vec md_funcs;     /* module-data functions, name order */
    u32vec header_stmts; /* .pragma and .file statements, in order */
    /* Canonical text of each function as units hold it (entries as they
     * are, other functions with internal linkage), made on first use:
     * helpers appear in many units but are canonicalized once. */
    char **memo;
    uint32_t *memo_len;
    /* Canonical names of anonymous variables (see name_anonymous), or
     * NULL when the module has none. */
    char (*anon)[40];
    /* Whole-program units (tc_slicer_set_whole_program): the module's
     * .const variables in input order with the bank-3 offsets ptxas -ewp
     * gives them, when units may read them (const_layout). */
    int whole_program;
    int const_layout;
    u32vec consts;
    uint32_t *const_offset; /* per entry of consts */
    uint32_t *const_pos;    /* per symbol: 1 + its index in consts, or 0 */
};

typedef struct closure {
    u32vec vars;     /* variables declared .extern */
    u32vec shared;   /* .shared/.local variables copied */
    u32vec efuncs;   /* functions declared, defined elsewhere */
    u32vec copies;   /* functions copied with internal linkage */
    u32vec stack;    /* statements still to walk */
    int uses_loc;
    uint64_t cost;
} closure;

static void closure_free(closure *c)
{
    vfree(&c->vars);
    vfree(&c->shared);
    vfree(&c->efuncs);
    vfree(&c->copies);
    vfree(&c->stack);
}

static int is_local_space(uint8_t space)
{
    return space == TC_SPACE_SHARED || space == TC_SPACE_LOCAL;
}

static const tc_ptx_stmt *sym_stmt(const tc_ptx_module *m, uint32_t sym)
{
    const tc_ptx_sym *s = &m->syms[sym];
    return &m->stmts[s->def >= 0 ? s->def : s->decl];
}

static int cmp_name(const tc_ptx_module *m, uint32_t a, uint32_t b)
{
    const tc_ptx_sym *x = &m->syms[a], *y = &m->syms[b];
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->name, y->name, n);
    if (c)
        return c;
    return (x->len > y->len) - (x->len < y->len);
}

/* Merge sort of symbol ids by name (no qsort_r in C11). */
static void sort_by_name(const tc_ptx_module *m, uint32_t *a, uint32_t *tmp, size_t n)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    sort_by_name(m, a, tmp, h);
    sort_by_name(m, a + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = cmp_name(m, a[i], a[j]) <= 0 ? a[i++] : a[j++];
    while (i < h)
        tmp[k++] = a[i++];
    while (j < n)
        tmp[k++] = a[j++];
    memcpy(a, tmp, n * sizeof *a);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sorts a set of symbols into name order using precomputed ranks. */
static int sort_set(const tc_slicer *s, u32vec *set)
{
    if (set->n < 2)
        return 0;
    uint64_t *k = malloc(set->n * sizeof *k);
    if (!k)
        return -1;
    for (size_t i = 0; i < set->n; i++)
        k[i] = (uint64_t)s->rank[set->v[i]] << 32 | set->v[i];
    qsort(k, set->n, sizeof *k, cmp_u64);
    for (size_t i = 0; i < set->n; i++)
        set->v[i] = (uint32_t)k[i];
    free(k);
    return 0;
}

/* Walks the references of the statements on c->stack, collecting what a
 * unit holding them needs. Returns -1 out of memory. */
static int walk(tc_slicer *s, closure *c, int in_module_data)
{
    const tc_ptx_module *m = s->m;
    while (c->stack.n) {
        const tc_ptx_stmt *st = &m->stmts[c->stack.v[--c->stack.n]];
        c->cost += st->cost + 1;
        c->uses_loc |= st->uses_loc;
        for (uint32_t r = 0; r < st->ref_count; r++) {
            uint32_t sym = m->refs[st->ref_begin + r].sym;
            if (s->stamp[sym] == s->gen)
                continue;
            const tc_ptx_sym *y = &m->syms[sym];
            int rc = 0;
            if (y->kind == TC_SYM_VAR) {
                s->stamp[sym] = s->gen;
                if (is_local_space(sym_stmt(m, sym)->space))
                    rc = vpush(&c->shared, sym);
                else if (!in_module_data)
                    rc = vpush(&c->vars, sym);
            } else if (y->kind == TC_SYM_ALIAS) {
                s->stamp[sym] = s->gen;
                if (!in_module_data)
                    rc = vpush(&c->efuncs, sym);
            } else if (s->md[sym]) {
                s->stamp[sym] = s->gen;
                if (!in_module_data)
                    rc = vpush(&c->efuncs, sym);
            } else if (y->def < 0) {
                s->stamp[sym] = s->gen;
                rc = vpush(&c->efuncs, sym);
            } else if (!y->is_entry) {
                s->stamp[sym] = s->gen;
                rc = vpush(&c->copies, sym);
                if (!rc)
                    rc = vpush(&c->stack, (uint32_t)y->def);
            }
            if (rc)
                return -1;
        }
    }
    return 0;
}

static int collect_entries(tc_slicer *s, const uint32_t *idx, size_t n, closure *c)
{
    memset(c, 0, sizeof *c);
    s->gen++;
    for (size_t i = 0; i < n; i++) {
        const tc_ptx_stmt *st = &s->m->stmts[s->entries[idx[i]]];
        s->stamp[st->sym] = s->gen;
        if (vpush(&c->stack, s->entries[idx[i]]))
            return -1;
    }
    return walk(s, c, 0);
}

/* ---- analysis ----------------------------------------------------------- */

static int why(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#include <stdarg.h>
static int why(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    return 1;
}

/* Decides which functions live in the module data: those whose address is
 * taken (any non-call reference), alias targets, and exported functions no
 * kernel calls (kept so the output has every symbol of the input). Returns
 * 1 with a reason when the module cannot be split. */
static int classify(tc_slicer *s, char *whybuf, size_t whylen)
{
    const tc_ptx_module *m = s->m;
    uint8_t *called = calloc(m->nsyms ? m->nsyms : 1, 1);
    if (!called)
        return -1;
    for (size_t i = 0; i < m->nstmts; i++) {
        const tc_ptx_stmt *st = &m->stmts[i];
        for (uint32_t r = 0; r < st->ref_count; r++) {
            const tc_ptx_ref *ref = &m->refs[st->ref_begin + r];
            const tc_ptx_sym *y = &m->syms[ref->sym];
            if (y->is_entry) {
                free(called);
                return why(whybuf, whylen,
                           "kernel '%.*s' is referenced at line %u (device-side launch or "
                           "address taken)", (int)y->len, y->name, st->line);
            }
            if (y->kind == TC_SYM_FUNC && (ref->how & TC_REF_USE) && y->def >= 0)
                s->md[ref->sym] = 1;
            if (y->kind == TC_SYM_FUNC && (ref->how & TC_REF_CALL))
                called[ref->sym] = 1;
        }
    }
    for (size_t i = 0; i < m->nsyms; i++) {
        const tc_ptx_sym *y = &m->syms[i];
        if (y->kind == TC_SYM_ALIAS && y->alias_of >= 0) {
            if (m->syms[y->alias_of].def < 0) {
                free(called);
                return why(whybuf, whylen, "'%.*s' aliases a function without a body",
                           (int)y->len, y->name);
            }
            s->md[y->alias_of] = 1;
        }
        if (y->kind == TC_SYM_FUNC && !y->is_entry && y->def >= 0 && !called[i]) {
            uint8_t l = m->stmts[y->def].linkage;
            if (l == TC_LINK_VISIBLE || l == TC_LINK_WEAK)
                s->md[i] = 1;
        }
    }
    free(called);
    return 0;
}

static int canon_stmt(const tc_slicer *s, const tc_ptx_stmt *st, int link, int canon,
                      const tc_ptx_sym *blank, tc_sb *out);

static int is_anonymous(const tc_ptx_module *m, const tc_ptx_sym *y)
{
    if (y->kind != TC_SYM_VAR || y->def < 0 || m->stmts[y->def].linkage != TC_LINK_INTERNAL ||
        (y->decl >= 0 && m->stmts[y->decl].linkage != TC_LINK_INTERNAL))
        return 0;
    return y->name[0] == '$' || (y->len > 10 && !memcmp(y->name, "__unnamed_", 10));
}

/* Compilers name private constants by their position in the module
 * (nvcc's $str, $str$1, ...; LLVM's __unnamed_1, ...), so adding a kernel
 * with a printf renames every later string and would change the keys of
 * every kernel using one. Such internal, compiler-named variables get a
 * name derived from their own declaration and initializer instead; equal
 * constants are told apart by their order among themselves. */
static int name_anonymous(tc_slicer *s)
{
    const tc_ptx_module *m = s->m;
    size_t count = 0;
    for (size_t i = 0; i < m->nsyms; i++)
        count += is_anonymous(m, &m->syms[i]);
    if (!count)
        return 0;
    s->anon = calloc(m->nsyms, sizeof *s->anon);
    tc_digest *d = calloc(m->nsyms, sizeof *d);
    if (!s->anon || !d) {
        free(d);
        return -1;
    }
    tc_sb text = TC_SB_INIT;
    tc_map seen = {0};
    int rc = 0;
    for (size_t i = 0; i < m->nstmts && !rc; i++) {
        const tc_ptx_stmt *st = &m->stmts[i];
        if (st->kind != TC_STMT_VAR || st->sym < 0 || m->syms[st->sym].def != (int32_t)i ||
            !is_anonymous(m, &m->syms[st->sym]))
            continue;
        const tc_ptx_sym *y = &m->syms[st->sym];
        tc_sb_reset(&text);
        /* the name token is blanked: only the content counts */
        rc = canon_stmt(s, st, LINK_KEEP, 0, y, &text);
        if (rc)
            break;
        tc_digest_of(text.data, text.len, &d[st->sym]);
        /* seen counts the constants with this content so far */
        uint32_t dup = 0, *v = tc_map_get(&seen, (const char *)d[st->sym].b, TC_DIGEST_LEN);
        if (v)
            dup = (*v)++;
        else if (tc_map_put(&seen, (const char *)d[st->sym].b, TC_DIGEST_LEN, 1) < 0)
            rc = -1;
        char hex[TC_DIGEST_HEX_LEN + 1];
        tc_digest_hex(&d[st->sym], hex);
        if (dup)
            snprintf(s->anon[st->sym], sizeof s->anon[0], TC_CANON_PREFIX "A%.16s_%u", hex, dup);
        else
            snprintf(s->anon[st->sym], sizeof s->anon[0], TC_CANON_PREFIX "A%.16s", hex);
    }
    tc_sb_free(&text);
    tc_map_free(&seen);
    free(d);
    return rc;
}

int tc_slicer_create(const tc_ptx_module *m, tc_slicer **out, char *whybuf, size_t whylen)
{
    *out = NULL;
    if (m->whole_reason[0])
        return why(whybuf, whylen, "%s", m->whole_reason);
    if (m->nentries == 0)
        return why(whybuf, whylen, "the module defines no kernels");
    tc_slicer *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->m = m;
    size_t ns = m->nsyms ? m->nsyms : 1;
    s->rank = malloc(ns * sizeof *s->rank);
    s->md = calloc(ns, 1);
    s->stamp = calloc(ns, sizeof *s->stamp);
    s->entries = malloc(m->nentries * sizeof *s->entries);
    s->cost = malloc(m->nentries * sizeof *s->cost);
    s->memo = calloc(m->nstmts ? m->nstmts : 1, sizeof *s->memo);
    s->memo_len = calloc(m->nstmts ? m->nstmts : 1, sizeof *s->memo_len);
    uint32_t *order = malloc(ns * sizeof *order), *tmp = malloc(ns * sizeof *tmp);
    int rc = -1;
    closure c;
    memset(&c, 0, sizeof c);
    if (!s->rank || !s->md || !s->stamp || !s->entries || !s->cost || !s->memo ||
        !s->memo_len || !order || !tmp)
        goto done;
    for (size_t i = 0; i < m->nsyms; i++)
        order[i] = (uint32_t)i;
    sort_by_name(m, order, tmp, m->nsyms);
    for (size_t i = 0; i < m->nsyms; i++)
        s->rank[order[i]] = (uint32_t)i;
    for (size_t i = 0; i < m->nsyms; i++) {
        const tc_ptx_sym *y = &m->syms[order[i]];
        if (y->kind == TC_SYM_FUNC && y->is_entry && y->def >= 0)
            s->entries[s->nentries++] = (uint32_t)y->def;
    }
    for (size_t i = 0; i < m->nstmts; i++)
        if ((m->stmts[i].kind == TC_STMT_PRAGMA || m->stmts[i].kind == TC_STMT_FILE) &&
            vpush(&s->header_stmts, (uint32_t)i))
            goto done;
    rc = classify(s, whybuf, whylen);
    if (rc)
        goto done;
    /* The module-data closure must not touch per-block or per-thread
     * module variables: those are copied into each unit, and a function
     * reached through a pointer would see a different copy. */
    s->gen++;
    for (size_t i = 0; i < m->nsyms; i++)
        if (s->md[order[i]]) {
            if (vpush(&s->md_funcs, order[i]) || vpush(&c.stack, (uint32_t)m->syms[order[i]].def))
                goto oom;
            s->stamp[order[i]] = s->gen;
        }
    if (walk(s, &c, 1))
        goto oom;
    if (c.shared.n) {
        const tc_ptx_sym *y = &m->syms[c.shared.v[0]];
        rc = why(whybuf, whylen,
                 "module-scope %s variable '%.*s' is used by a function whose address is "
                 "taken", sym_stmt(m, c.shared.v[0])->space == TC_SPACE_SHARED ? ".shared"
                                                                               : ".local",
                 (int)y->len, y->name);
        goto done;
    }
    s->has_md = s->md_funcs.n > 0;
    for (size_t i = 0; i < m->nstmts && !s->has_md; i++)
        if (m->stmts[i].kind == TC_STMT_VAR && !is_local_space(m->stmts[i].space))
            s->has_md = 1;
    for (size_t i = 0; i < s->nentries; i++) {
        closure_free(&c);
        uint32_t idx = (uint32_t)i;
        if (collect_entries(s, &idx, 1, &c))
            goto oom;
        s->cost[i] = c.cost > UINT32_MAX ? UINT32_MAX : (uint32_t)c.cost;
    }
    s->rename = !m->reserved_prefix_seen;
    if (s->rename && name_anonymous(s) != 0)
        goto oom;
    rc = 0;
    goto done;
oom:
    rc = -1;
done:
    closure_free(&c);
    free(order);
    free(tmp);
    if (rc == 0)
        *out = s;
    else
        tc_slicer_free(s);
    return rc;
}

void tc_slicer_free(tc_slicer *s)
{
    if (!s)
        return;
    free(s->rank);
    free(s->md);
    free(s->stamp);
    free(s->entries);
    free(s->cost);
    for (size_t i = 0; s->memo && i < s->m->nstmts; i++)
        free(s->memo[i]);
    free(s->memo);
    free(s->memo_len);
    free(s->anon);
    vfree(&s->md_funcs);
    vfree(&s->header_stmts);
    vfree(&s->consts);
    free(s->const_offset);
    free(s->const_pos);
    free(s);
}

size_t tc_slicer_entry_count(const tc_slicer *s) { return s->nentries; }

const tc_ptx_stmt *tc_slicer_entry(const tc_slicer *s, size_t i)
{
    return &s->m->stmts[s->entries[i]];
}

uint32_t tc_slicer_entry_cost(const tc_slicer *s, size_t i) { return s->cost[i]; }

int tc_slicer_has_module_data(const tc_slicer *s) { return s->has_md; }

static size_t var_decl_cut(const tc_ptx_stmt *st);

/* ---- whole-program units and .const data ------------------------------ *
 *
 * ptxas -ewp gives no relocation to a read of an extern .const variable: it
 * lays the unit's extern .const declarations out in bank 3 in declaration
 * order, each at the next offset aligned for it, starting at 0, and writes
 * the resulting offsets into the code. ptxas -ewp lays a module-data object
 * that defines those variables out the same way (ptxas -c does not: its
 * order differs). So when the module data is compiled -ewp and every unit
 * that reads .const declares the module's .const variables in the module's
 * order (up to the last one it reads), the offsets agree; the build checks
 * the linked image against const_offset (tc_slicer_const_var). */

/* Element sizes of PTX fundamental types that variables use. */
static uint32_t type_size(const tc_tok *t)
{
    static const struct {
        const char *name;
        uint32_t size;
    } types[] = {{".b8", 1},     {".u8", 1},      {".s8", 1},     {".b16", 2},  {".u16", 2},
                 {".s16", 2},    {".f16", 2},     {".bf16", 2},   {".b32", 4},  {".u32", 4},
                 {".s32", 4},    {".f32", 4},     {".f16x2", 4},  {".bf16x2", 4},
                 {".b64", 8},    {".u64", 8},     {".s64", 8},    {".f64", 8},  {".b128", 16}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (tc_tok_is(t, types[i].name))
            return types[i].size;
    return 0;
}

static uint64_t tok_number(const tc_tok *t)
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

/* Size and alignment of a variable from its declaration
 * ([linkage] .const [.align N] [.vN] .type name[d]...): 0 when they cannot
 * be told (an array of unstated size, a list of names, an unknown type). */
static int var_layout(const tc_ptx_module *m, const tc_ptx_stmt *st, uint64_t *size,
                      uint64_t *align)
{
    tc_lexer lx;
    tc_lex_init(&lx, m->src + st->start, var_decl_cut(st) - st->start, st->line);
    uint64_t elem = 0, vec = 1, al = 0, n = 1;
    int named = 0;
    for (;;) {
        tc_tok t = tc_lex_next(&lx);
        if (t.kind == TK_EOF)
            break;
        if (t.kind == TK_ERROR)
            return 0;
        if (!named && t.kind == TK_IDENT && t.p[0] == '.') {
            if (tc_tok_is(&t, ".align")) {
                tc_tok v = tc_lex_next(&lx);
                if (!(al = tok_number(&v)))
                    return 0;
            } else if (tc_tok_is(&t, ".v2") || tc_tok_is(&t, ".v4") || tc_tok_is(&t, ".v8")) {
                vec = (uint64_t)(t.p[2] - '0');
            } else if (type_size(&t)) {
                elem = type_size(&t);
            }
            continue; /* linkage and state space */
        }
        if (!named && t.kind == TK_IDENT) {
            named = 1;
            continue;
        }
        if (!named || !tc_tok_punct(&t, '['))
            return 0;
        tc_tok d = tc_lex_next(&lx), close = tc_lex_next(&lx);
        uint64_t k = tok_number(&d);
        if (!k || !tc_tok_punct(&close, ']') || n > UINT32_MAX / k)
            return 0;
        n *= k;
    }
    if (!named || !elem)
        return 0;
    *align = al ? al : elem * vec;
    *size = elem * vec * n;
    return *align <= 4096 && (*align & (*align - 1)) == 0;
}

int tc_slicer_set_whole_program(tc_slicer *s, int on)
{
    const tc_ptx_module *m = s->m;
    s->whole_program = on;
    s->const_layout = 0;
    s->consts.n = 0;
    if (!on || s->md_funcs.n)
        return 0; /* ptxas -ewp compiles no function a unit could call */
    for (size_t i = 0; i < m->nsyms; i++)
        if (m->syms[i].kind == TC_SYM_ALIAS)
            return 0;
    if (!s->const_pos && !(s->const_pos = calloc(m->nsyms ? m->nsyms : 1, sizeof *s->const_pos)))
        return -1;
    memset(s->const_pos, 0, (m->nsyms ? m->nsyms : 1) * sizeof *s->const_pos);
    uint64_t off = 0;
    for (size_t i = 0; i < m->nstmts; i++) {
        const tc_ptx_stmt *st = &m->stmts[i];
        if (st->kind != TC_STMT_VAR || is_local_space(st->space))
            continue;
        if (st->ref_count)
            return 0; /* addresses in initializers: left to -c */
        if (st->space != TC_SPACE_CONST)
            continue;
        uint64_t size, align;
        const tc_ptx_sym *y = st->sym >= 0 ? &m->syms[st->sym] : NULL;
        if (!y || y->def != (int32_t)i || y->decl != (int32_t)i ||
            st->linkage == TC_LINK_EXTERN || !var_layout(m, st, &size, &align))
            return 0; /* defined elsewhere, declared twice, or of unknown size */
        off = (off + align - 1) & ~(align - 1);
        if (off > UINT32_MAX || vpush(&s->consts, (uint32_t)st->sym))
            return off > UINT32_MAX ? 0 : -1;
        uint32_t *p = realloc(s->const_offset, s->consts.n * sizeof *p);
        if (!p)
            return -1;
        s->const_offset = p;
        p[s->consts.n - 1] = (uint32_t)off;
        s->const_pos[st->sym] = (uint32_t)s->consts.n;
        off += size;
    }
    s->const_layout = s->consts.n > 0;
    return 0;
}

int tc_slicer_module_data_whole_program(const tc_slicer *s) { return s->const_layout; }

int tc_slicer_const_var(const tc_slicer *s, size_t i, const char **name, size_t *len,
                        uint64_t *offset)
{
    if (!s->const_layout || i >= s->consts.n)
        return -1;
    uint32_t sym = s->consts.v[i];
    if (s->anon && s->anon[sym][0]) {
        *name = s->anon[sym];
        *len = strlen(s->anon[sym]);
    } else {
        *name = s->m->syms[sym].name;
        *len = s->m->syms[sym].len;
    }
    *offset = s->const_offset[i];
    return 0;
}

/* ---- emission ----------------------------------------------------------- */

static int is_linkage_tok(const tc_tok *t)
{
    return t->kind == TK_IDENT && (tc_tok_is(t, ".visible") || tc_tok_is(t, ".extern") ||
                                   tc_tok_is(t, ".weak") || tc_tok_is(t, ".common"));
}

/* Local labels and .local names of a function body, renamed canonically in
 * order of definition: nvcc numbers them by the function's position in the
 * module ($L__BB12_3, __local_depot12), which would otherwise make a key
 * depend on unrelated functions. */
static int collect_renames(const tc_slicer *s, const tc_ptx_stmt *st, tc_map *map)
{
    tc_lexer lx;
    tc_lex_init(&lx, s->m->src + st->body, st->end - st->body, st->line);
    int at_start = 1, have_held = 0, want_local_name = 0, operand_braces = 0;
    uint32_t next = 0, loc_line = 0;
    tc_tok held = {0};
    for (;;) {
        tc_tok t = tc_lex_next(&lx);
        if (t.kind == TK_EOF || t.kind == TK_ERROR)
            return 0;
        if (loc_line && t.line != loc_line) { /* .loc ends with its line */
            loc_line = 0;
            at_start = 1;
        }
        if (have_held) {
            have_held = 0;
            if (tc_tok_is(&held, ".loc") && t.line == held.line)
                loc_line = held.line;
            else if (tc_tok_is(&held, ".loc"))
                at_start = 1;
            if (tc_tok_punct(&t, ':') && held.kind == TK_IDENT && held.p[0] != '.') {
                if (tc_map_put(map, held.p, held.len, next) < 0)
                    return -1;
                next++;
                at_start = 1;
                continue;
            }
            want_local_name = tc_tok_is(&held, ".local");
        }
        if (t.kind == TK_PUNCT && ((t.p[0] == '{' && !at_start) ||
                                   (t.p[0] == '}' && operand_braces))) {
            operand_braces += t.p[0] == '{' ? 1 : -1; /* vector operand */
            continue;
        }
        if (t.kind == TK_PUNCT && (t.p[0] == ';' || t.p[0] == '{' || t.p[0] == '}')) {
            at_start = 1;
            want_local_name = 0;
            operand_braces = 0;
            continue;
        }
        if (at_start && t.kind == TK_IDENT) {
            at_start = 0;
            held = t;
            have_held = 1;
            continue;
        }
        if (at_start && tc_tok_punct(&t, '@')) {
            /* predicate: the register that follows is not a statement start */
            tc_tok r = tc_lex_next(&lx);
            if (tc_tok_punct(&r, '!'))
                r = tc_lex_next(&lx);
            continue;
        }
        at_start = 0;
        if (want_local_name && t.kind == TK_IDENT && t.p[0] != '.') {
            want_local_name = 0;
            if (tc_map_put(map, t.p, t.len, next) < 0)
                return -1;
            next++;
        }
    }
}

/* The name a module symbol is emitted under, or NULL for its own. */
static const char *anon_name(const tc_slicer *s, const tc_tok *t)
{
    if (!s->anon || t->kind != TK_IDENT)
        return NULL;
    uint32_t *v = tc_map_get(&s->m->symtab, t->p, t->len);
    return v && s->anon[*v][0] ? s->anon[*v] : NULL;
}

/* Canonical text of a statement (ending in a newline, with as many lines
 * as the statement has in the input), its linkage rewritten per `link`. */
static int canon_stmt(const tc_slicer *s, const tc_ptx_stmt *st, int link, int canon,
                      const tc_ptx_sym *blank, tc_sb *out)
{
    tc_map renames = {0};
    if (canon && s->rename && st->has_body && collect_renames(s, st, &renames) < 0)
        return -1;
    tc_lexer lx;
    tc_lex_init(&lx, s->m->src + st->start, st->end - st->start, st->line);
    const char *prev = NULL;
    int prefix = 1;
    char name[32];
    for (;;) {
        tc_tok t = tc_lex_next(&lx);
        if (t.kind == TK_EOF || t.kind == TK_ERROR)
            break;
        if (prev)
            tc_lex_copy_gap(out, prev, t.p);
        prev = t.p + t.len;
        if (prefix) {
            if (is_linkage_tok(&t)) {
                if (link == LINK_KEEP || link == LINK_VISIBLE)
                    tc_sb_append(out, t.p, t.len);
                continue;
            }
            prefix = 0;
            if (link == LINK_VISIBLE && st->linkage == TC_LINK_INTERNAL)
                tc_sb_puts(out, ".visible ");
        }
        /* labels and local names live in the body only */
        uint32_t *v = renames.cap && t.kind == TK_IDENT && t.p >= s->m->src + st->body
                          ? tc_map_get(&renames, t.p, t.len)
                          : NULL;
        const char *a;
        if (v) {
            int n = snprintf(name, sizeof name, TC_CANON_PREFIX "L%u", *v);
            tc_sb_append(out, name, (size_t)n);
        } else if (blank && t.p == blank->name) {
            tc_sb_putc(out, '$');
        } else if ((a = anon_name(s, &t)) != NULL) {
            tc_sb_puts(out, a);
        } else {
            tc_sb_append(out, t.p, t.len);
        }
    }
    tc_sb_putc(out, '\n');
    tc_map_free(&renames);
    return out->oom ? -1 : 0;
}

static void text_piece(tc_text *out, const tc_ptx_stmt *st, const char *p, size_t n)
{
    text_newline_if_needed(out);
    text_seg(out, st->line, st->last_line - st->line + 1);
    tc_sb_append(&out->text, p, n);
    out->line += st->last_line - st->line + 1;
}

/* Copies a statement into the text, canonicalized, keeping its lines. */
static int emit_stmt(const tc_slicer *s, tc_text *out, const tc_ptx_stmt *st, int link,
                     int canon)
{
    tc_sb piece = TC_SB_INIT;
    int rc = canon_stmt(s, st, link, canon, NULL, &piece);
    if (rc == 0)
        text_piece(out, st, piece.data, piece.len);
    tc_sb_free(&piece);
    return rc == 0 && !out->text.oom ? 0 : -1;
}

/* A function as units hold it, from the memo. */
static int emit_function(tc_slicer *s, tc_text *out, const tc_ptx_stmt *st)
{
    size_t i = (size_t)(st - s->m->stmts);
    if (!s->memo[i]) {
        tc_sb piece = TC_SB_INIT;
        if (canon_stmt(s, st, st->is_entry ? LINK_KEEP : LINK_DROP, 1, NULL, &piece) != 0) {
            tc_sb_free(&piece);
            return -1;
        }
        size_t n;
        s->memo[i] = tc_sb_take(&piece, &n);
        s->memo_len[i] = (uint32_t)n;
        if (!s->memo[i])
            return -1;
    }
    text_piece(out, st, s->memo[i], s->memo_len[i]);
    return out->text.oom ? -1 : 0;
}

/* Emits a one-line declaration built from the start of a statement up to
 * `cut`, with its linkage replaced according to `link`. */
static int emit_decl(const tc_slicer *s, tc_text *out, const tc_ptx_stmt *st, size_t cut,
                     int link)
{
    text_newline_if_needed(out);
    text_seg(out, st->line, 1);
    tc_lexer lx;
    tc_lex_init(&lx, s->m->src + st->start, cut - st->start, st->line);
    const char *prev = NULL;
    int prefix = 1;
    for (;;) {
        tc_tok t = tc_lex_next(&lx);
        if (t.kind == TK_EOF || t.kind == TK_ERROR)
            break;
        if (prev && t.p > prev)
            text_put(out, " ", 1);
        prev = t.p + t.len;
        if (prefix) {
            if (is_linkage_tok(&t)) {
                if (link == LINK_KEEP)
                    text_put(out, t.p, t.len);
                else
                    prev = NULL; /* no separator for a dropped token */
                continue;
            }
            prefix = 0;
            if (link == LINK_EXTERN)
                text_puts(out, ".extern ");
            else if (link == LINK_VISIBLE)
                text_puts(out, ".visible ");
        }
        const char *a = anon_name(s, &t);
        if (a)
            text_puts(out, a);
        else
            text_put(out, t.p, t.len);
    }
    text_puts(out, ";\n");
    return out->text.oom ? -1 : 0;
}

static size_t var_decl_cut(const tc_ptx_stmt *st) { return st->init ? st->init : st->end - 1; }

static int emit_header(const tc_slicer *s, tc_text *out, int uses_loc)
{
    const tc_ptx_module *m = s->m;
    if (out->line == 0)
        out->line = 1;
    if (emit_stmt(s, out, &m->stmts[m->version_stmt], LINK_KEEP, 0) ||
        emit_stmt(s, out, &m->stmts[m->target_stmt], LINK_KEEP, 0))
        return -1;
    if (m->addrsize_stmt >= 0 && emit_stmt(s, out, &m->stmts[m->addrsize_stmt], LINK_KEEP, 0))
        return -1;
    for (size_t i = 0; i < s->header_stmts.n; i++) {
        const tc_ptx_stmt *st = &m->stmts[s->header_stmts.v[i]];
        if ((st->kind == TC_STMT_PRAGMA || uses_loc) && emit_stmt(s, out, st, LINK_KEEP, 0))
            return -1;
    }
    return 0;
}

/* Declarations of functions defined elsewhere: module-data functions and
 * aliases become .extern; functions defined nowhere keep their own
 * declaration (e.g. ".extern .func vprintf"). */
static int emit_efuncs(const tc_slicer *s, tc_text *out, const u32vec *efuncs)
{
    const tc_ptx_module *m = s->m;
    for (size_t i = 0; i < efuncs->n; i++) {
        uint32_t sym = efuncs->v[i];
        const tc_ptx_sym *y = &m->syms[sym];
        int rc;
        if (y->kind == TC_SYM_ALIAS)
            rc = emit_decl(s, out, &m->stmts[y->decl], m->stmts[y->decl].proto_end,
                           LINK_EXTERN);
        else if (y->def >= 0)
            rc = emit_decl(s, out, &m->stmts[y->def], m->stmts[y->def].proto_end, LINK_EXTERN);
        else
            rc = emit_decl(s, out, &m->stmts[y->decl], m->stmts[y->decl].proto_end, LINK_KEEP);
        if (rc)
            return -1;
    }
    return 0;
}

static int emit_copies(tc_slicer *s, tc_text *out, const u32vec *copies)
{
    const tc_ptx_module *m = s->m;
    for (size_t i = 0; i < copies->n; i++) {
        const tc_ptx_stmt *st = &m->stmts[m->syms[copies->v[i]].def];
        if (emit_decl(s, out, st, st->proto_end, LINK_DROP))
            return -1;
    }
    for (size_t i = 0; i < copies->n; i++)
        if (emit_function(s, out, &m->stmts[m->syms[copies->v[i]].def]))
            return -1;
    return 0;
}

int tc_slicer_emit_unit(tc_slicer *s, const uint32_t *idx, size_t n, tc_text *out,
                        int *whole_program)
{
    const tc_ptx_module *m = s->m;
    closure c;
    int rc = -1;
    if (collect_entries(s, idx, n, &c) || sort_set(s, &c.vars) || sort_set(s, &c.shared) ||
        sort_set(s, &c.efuncs) || sort_set(s, &c.copies))
        goto done;
    if (emit_header(s, out, c.uses_loc))
        goto done;
    *whole_program = 1;
    for (size_t i = 0; i < c.efuncs.n; i++)
        if (m->syms[c.efuncs.v[i]].def >= 0) /* defined in the module data */
            *whole_program = 0;
    /* ptxas -ewp emits no relocation for a read of an extern .const
     * variable (it does for .global ones: readelf -r), so the bank offset
     * it assumes must be the one the linked image has: with const_layout
     * the unit declares the module's .const variables in the module's order
     * (see above); otherwise a unit reading .const stays relocatable (on the
     * H200 such units computed wrong results: tests/gpu/specs/constant_mem).
     * Other spaces (.tex, ...) keep a unit relocatable. */
    size_t const_prefix = 0;
    for (size_t i = 0; i < c.vars.n; i++) {
        const tc_ptx_stmt *st = sym_stmt(m, c.vars.v[i]);
        if (st->space == TC_SPACE_CONST && s->whole_program && s->const_layout) {
            size_t pos = s->const_pos[c.vars.v[i]];
            const_prefix = pos > const_prefix ? pos : const_prefix;
        } else if (st->space != TC_SPACE_GLOBAL) {
            *whole_program = 0;
        }
    }
    for (size_t i = 0; i < const_prefix; i++) {
        const tc_ptx_stmt *st = sym_stmt(m, s->consts.v[i]);
        if (emit_decl(s, out, st, var_decl_cut(st), LINK_EXTERN))
            goto done;
    }
    for (size_t i = 0; i < c.vars.n; i++) {
        const tc_ptx_stmt *st = sym_stmt(m, c.vars.v[i]);
        if (const_prefix && st->space == TC_SPACE_CONST)
            continue; /* declared above */
        if (emit_decl(s, out, st, var_decl_cut(st), LINK_EXTERN))
            goto done;
    }
    if (emit_efuncs(s, out, &c.efuncs))
        goto done;
    for (size_t i = 0; i < c.shared.n; i++) {
        const tc_ptx_stmt *st = sym_stmt(m, c.shared.v[i]);
        if (emit_stmt(s, out, st, st->linkage == TC_LINK_EXTERN ? LINK_KEEP : LINK_DROP, 0))
            goto done;
    }
    if (emit_copies(s, out, &c.copies))
        goto done;
    for (size_t i = 0; i < n; i++)
        if (emit_function(s, out, &m->stmts[s->entries[idx[i]]]))
            goto done;
    rc = 0;
done:
    closure_free(&c);
    return rc;
}

int tc_slicer_emit_module_data(tc_slicer *s, tc_text *out)
{
    const tc_ptx_module *m = s->m;
    closure c;
    memset(&c, 0, sizeof c);
    int rc = -1;
    s->gen++;
    for (size_t i = 0; i < s->md_funcs.n; i++) {
        uint32_t sym = s->md_funcs.v[i];
        s->stamp[sym] = s->gen;
        if (vpush(&c.stack, (uint32_t)m->syms[sym].def))
            goto done;
    }
    for (size_t i = 0; i < m->nsyms; i++)
        if (m->syms[i].kind == TC_SYM_ALIAS)
            s->stamp[i] = s->gen;
    /* initializers may take addresses of functions defined nowhere */
    for (size_t i = 0; i < m->nstmts; i++)
        if (m->stmts[i].kind == TC_STMT_VAR && m->stmts[i].ref_count &&
            vpush(&c.stack, (uint32_t)i))
            goto done;
    if (walk(s, &c, 1) || emit_header(s, out, c.uses_loc))
        goto done;
    /* Everything the module data holds is stamped now; emitting it in the
     * input's own order keeps every declaration before its first use. */
    for (size_t i = 0; i < m->nstmts; i++) {
        const tc_ptx_stmt *st = &m->stmts[i];
        int link = -1;
        if (st->kind == TC_STMT_VAR && !is_local_space(st->space)) {
            link = LINK_VISIBLE;
        } else if (st->kind == TC_STMT_ALIAS) {
            link = LINK_KEEP;
        } else if (st->kind == TC_STMT_FUNC && st->sym >= 0 && s->stamp[st->sym] == s->gen) {
            const tc_ptx_sym *y = &m->syms[st->sym];
            if (s->md[st->sym] || y->kind == TC_SYM_ALIAS)
                link = LINK_VISIBLE;
            else if (y->def >= 0)
                link = LINK_DROP; /* an internal copy of a callee */
            else
                link = LINK_KEEP; /* defined nowhere, e.g. vprintf */
        }
        if (link >= 0 && emit_stmt(s, out, st, link, 1))
            goto done;
    }
    rc = 0;
done:
    closure_free(&c);
    return rc;
}
