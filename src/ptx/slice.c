/* slice: reference-graph analysis and canonical emission of units and of
 * the module-data object (see slice.h). The graph is the per-statement
 * reference lists built by the parser; each unit is one walk over it, so
 * total work is linear in the size of what is emitted. */
#include "ptx/slice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx/canon.h"
#include "ptx/lex.h"
#include "util/hash.h"

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

/* Starts a map segment: output line out_line is input line in_line. */
static int text_seg(tc_text *t, uint32_t out_line, uint32_t in_line)
{
    if (t->nsegs == t->cap_segs) {
        size_t nc = t->cap_segs ? t->cap_segs * 2 : 32;
        tc_line_seg *p = realloc(t->segs, nc * sizeof *p);
        if (!p) {
            t->text.oom = 1;
            return -1;
        }
        t->segs = p;
        t->cap_segs = nc;
    }
    t->segs[t->nsegs].out_line = out_line;
    t->segs[t->nsegs].in_line = in_line;
    t->segs[t->nsegs].count = 1;
    t->nsegs++;
    return 0;
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
    uint32_t *info_stamp; /* the same per .debug_str entry */
    uint32_t gen;
    int has_md;
    u32vec md_funcs;     /* module-data functions, name order */
    u32vec header_stmts; /* .pragma and .file statements, in order */
    /* .file statements by number: (number << 32 | statement), sorted; a
     * unit's header holds the ones its .loc directives name (file_stamp) */
    uint64_t *files;
    uint32_t *file_stamp;
    size_t nfiles;
    /* Canonical text of each function as units hold it (entries as they
     * are, other functions with internal linkage), made on first use or
     * ahead of it (tc_slicer_canon_function): helpers appear in many
     * units but are canonicalized once. */
    tc_piece *memo;
    u32vec funcs;        /* statements units hold from the memo: entries, copies */
    /* Canonical names of compiler-named constants, or NULL (canon.h). */
    tc_canon_name *names;
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
    u32vec infos;    /* .debug_str entries the .loc directives name */
    u32vec stack;    /* statements still to walk */
    int indirect_call;
    uint64_t cost;
} closure;

static void closure_free(closure *c)
{
    vfree(&c->vars);
    vfree(&c->shared);
    vfree(&c->efuncs);
    vfree(&c->copies);
    vfree(&c->infos);
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

/* The name a symbol is emitted under. */
static const char *emitted_name(const tc_ptx_module *m, const tc_canon_name *names, uint32_t i,
                                size_t *len)
{
    if (names && names[i][0]) {
        *len = strlen(names[i]);
        return names[i];
    }
    *len = m->syms[i].len;
    return m->syms[i].name;
}

static int cmp_name(const tc_ptx_module *m, const tc_canon_name *names, uint32_t a, uint32_t b)
{
    size_t la, lb;
    const char *x = emitted_name(m, names, a, &la), *y = emitted_name(m, names, b, &lb);
    int c = memcmp(x, y, la < lb ? la : lb);
    if (c)
        return c;
    return (la > lb) - (la < lb);
}

/* Merge sort of symbol ids by emitted name (no qsort_r in C11). */
static void sort_by_name(const tc_ptx_module *m, const tc_canon_name *names, uint32_t *a,
                         uint32_t *tmp, size_t n)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    sort_by_name(m, names, a, tmp, h);
    sort_by_name(m, names, a + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = cmp_name(m, names, a[i], a[j]) <= 0 ? a[i++] : a[j++];
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

/* Sorts a set of symbols into name order (precomputed ranks), or with
 * in_input_order into the order of their statements in the input: ptxas
 * lays module-scope .shared variables out in the order they are declared
 * (alignment padding included), so a unit declares those in the input's
 * order (by name, a 1 KB-aligned array after a word made a block's static
 * shared memory 3072 bytes instead of 2064). */
static int sort_set(const tc_slicer *s, u32vec *set, int in_input_order)
{
    if (set->n < 2)
        return 0;
    uint64_t *k = malloc(set->n * sizeof *k);
    if (!k)
        return -1;
    for (size_t i = 0; i < set->n; i++) {
        uint64_t order = in_input_order ? (uint64_t)(sym_stmt(s->m, set->v[i]) - s->m->stmts)
                                        : s->rank[set->v[i]];
        k[i] = order << 32 | set->v[i];
    }
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
        c->indirect_call |= st->indirect_call;
        for (uint32_t k = 0; k < st->info_count; k++) {
            uint32_t info = m->inforefs[st->info_begin + k];
            if (s->info_stamp[info] != s->gen) {
                s->info_stamp[info] = s->gen;
                if (vpush(&c->infos, info))
                    return -1;
            }
        }
        for (uint32_t k = 0; k < st->loc_count; k++) {
            uint64_t key = (uint64_t)m->locfiles[st->loc_begin + k] << 32;
            size_t lo = 0, hi = s->nfiles; /* first file numbered at least key */
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (s->files[mid] < key)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo < s->nfiles && s->files[lo] >> 32 == key >> 32)
                s->file_stamp[lo] = s->gen;
        }
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
 * taken (any non-call reference), alias targets, exported functions no
 * kernel calls (kept so the output has every symbol of the input), and
 * functions that declare static storage. Returns
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
            if (l == TC_LINK_VISIBLE || l == TC_LINK_WEAK) {
                s->md[i] = 1;
            } else if (!s->md[i]) {
                /* In no unit's closure, it would be compiled nowhere, and
                 * an error in it, which fails the whole-module build,
                 * would pass unseen. Generators do not leave such
                 * functions (none in the real-world corpus). */
                free(called);
                return why(whybuf, whylen, "function '%.*s' is never called or referenced "
                           "(split, it would be compiled, and checked, nowhere)",
                           (int)y->len, y->name);
            }
        }
        /* Variables a function declares in .global, .const or .shared
         * are one object per module (per block for .shared), shared by
         * every caller: two copies of the function would make two. */
        if (y->kind == TC_SYM_FUNC && !y->is_entry && y->def >= 0 &&
            m->stmts[y->def].static_vars)
            s->md[i] = 1;
    }
    free(called);
    return 0;
}

static int cmp_u64_plain(const void *a, const void *b) { return cmp_u64(a, b); }

/* The .file statements by number, for the unit headers. */
static int index_files(tc_slicer *s)
{
    const tc_ptx_module *m = s->m;
    size_t n = 0;
    for (size_t i = 0; i < s->header_stmts.n; i++)
        n += m->stmts[s->header_stmts.v[i]].kind == TC_STMT_FILE;
    s->files = malloc((n ? n : 1) * sizeof *s->files);
    s->file_stamp = calloc(n ? n : 1, sizeof *s->file_stamp);
    if (!s->files || !s->file_stamp)
        return -1;
    for (size_t i = 0; i < s->header_stmts.n; i++) {
        const tc_ptx_stmt *st = &m->stmts[s->header_stmts.v[i]];
        if (st->kind == TC_STMT_FILE)
            s->files[s->nfiles++] = (uint64_t)st->loc_begin << 32 | s->header_stmts.v[i];
    }
    qsort(s->files, s->nfiles, sizeof *s->files, cmp_u64_plain);
    return 0;
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
    s->info_stamp = calloc(m->ninfos ? m->ninfos : 1, sizeof *s->info_stamp);
    uint32_t *order = malloc(ns * sizeof *order), *tmp = malloc(ns * sizeof *tmp);
    int rc = -1;
    closure c;
    memset(&c, 0, sizeof c);
    if (!s->rank || !s->md || !s->stamp || !s->entries || !s->cost || !s->memo ||
        !s->info_stamp || !order || !tmp)
        goto done;
    /* Everything is emitted in name order, compiler-named constants by the
     * names canon.h gives them (their own are positions in the module). */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < m->nsyms; i++)
            order[i] = (uint32_t)i;
        sort_by_name(m, s->names, order, tmp, m->nsyms);
        for (size_t i = 0; i < m->nsyms; i++)
            s->rank[order[i]] = (uint32_t)i;
        if (pass == 0 && tc_canon_name_constants(m, s->rank, &s->names) != 0)
            goto done;
        if (!s->names)
            break;
    }
    for (size_t i = 0; i < m->nsyms; i++) {
        const tc_ptx_sym *y = &m->syms[order[i]];
        if (y->kind == TC_SYM_FUNC && y->is_entry && y->def >= 0)
            s->entries[s->nentries++] = (uint32_t)y->def;
    }
    for (size_t i = 0; i < m->nstmts; i++)
        if ((m->stmts[i].kind == TC_STMT_PRAGMA || m->stmts[i].kind == TC_STMT_FILE) &&
            vpush(&s->header_stmts, (uint32_t)i))
            goto done;
    if (index_files(s) != 0)
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
    /* every function some unit copies is in some entry's closure */
    memset(tmp, 0, ns * sizeof *tmp);
    for (size_t i = 0; i < s->nentries; i++) {
        closure_free(&c);
        uint32_t idx = (uint32_t)i;
        if (collect_entries(s, &idx, 1, &c) || vpush(&s->funcs, s->entries[i]))
            goto oom;
        s->cost[i] = c.cost > UINT32_MAX ? UINT32_MAX : (uint32_t)c.cost;
        for (size_t k = 0; k < c.copies.n; k++)
            if (!tmp[c.copies.v[k]]++ && vpush(&s->funcs, (uint32_t)m->syms[c.copies.v[k]].def))
                goto oom;
    }
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
    free(s->info_stamp);
    free(s->entries);
    free(s->cost);
    for (size_t i = 0; s->memo && i < s->m->nstmts; i++)
        tc_piece_free(&s->memo[i]);
    free(s->memo);
    free(s->names);
    free(s->files);
    free(s->file_stamp);
    vfree(&s->md_funcs);
    vfree(&s->funcs);
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
                if (!(al = tc_tok_integer(&v)))
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
        uint64_t k = tc_tok_integer(&d);
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
    if (s->names && s->names[sym][0]) {
        *name = s->names[sym];
        *len = strlen(s->names[sym]);
    } else {
        *name = s->m->syms[sym].name;
        *len = s->m->syms[sym].len;
    }
    *offset = s->const_offset[i];
    return 0;
}

/* ---- emission ----------------------------------------------------------- */

/* Appends a canonical piece to the text, mapping its lines to the input
 * (runs of consecutive lines share one segment). */
static int text_piece(tc_text *out, const tc_piece *p)
{
    if (out->line == 0)
        out->line = 1;
    for (size_t k = 0; k < p->nlines; k++) {
        uint32_t o = out->line + (uint32_t)k;
        tc_line_seg *g = out->nsegs ? &out->segs[out->nsegs - 1] : NULL;
        if (g && g->out_line + g->count == o && g->in_line + g->count == p->lines[k])
            g->count++;
        else if (text_seg(out, o, p->lines[k]) != 0)
            return -1;
    }
    tc_sb_append(&out->text, p->text.data, p->text.len);
    out->line += (uint32_t)p->nlines;
    return out->text.oom ? -1 : 0;
}

/* Copies a statement into the text, canonical. */
static int emit_stmt(const tc_slicer *s, tc_text *out, const tc_ptx_stmt *st, int link)
{
    tc_piece p;
    memset(&p, 0, sizeof p);
    int rc = tc_canon_stmt(s->m, s->names, st, link, NULL, &p);
    if (rc == 0)
        rc = text_piece(out, &p);
    tc_piece_free(&p);
    return rc;
}

/* The memo of a function as units hold it, made if need be. */
static const tc_piece *memo_function(const tc_slicer *s, const tc_ptx_stmt *st)
{
    tc_piece *p = &s->memo[st - s->m->stmts];
    if (!p->text.len &&
        tc_canon_stmt(s->m, s->names, st, st->is_entry ? TC_CANON_KEEP : TC_CANON_DROP, NULL,
                      p) != 0) {
        tc_piece_free(p);
        return NULL;
    }
    return p;
}

static int emit_function(tc_slicer *s, tc_text *out, const tc_ptx_stmt *st)
{
    const tc_piece *p = memo_function(s, st);
    return p ? text_piece(out, p) : -1;
}

size_t tc_slicer_function_count(const tc_slicer *s) { return s->funcs.n; }

int tc_slicer_canon_function(const tc_slicer *s, size_t i)
{
    return memo_function(s, &s->m->stmts[s->funcs.v[i]]) ? 0 : -1;
}

/* ---- the canonical texts of functions across processes -------------------------- */

/* Part of every memo key: a change of the rules of canon.c changes it. */
#define CANON_MEMO_RULES "canon-memo-1"

int tc_slicer_memo_context(const tc_slicer *s, tc_digest *out)
{
    const tc_ptx_module *m = s->m;
    tc_hash *h = tc_hash_new();
    if (!h)
        return -1;
    tc_hash_field_str(h, "rules", CANON_MEMO_RULES);
    /* a function's text names module symbols by these names (canon.c:
     * module_name) and inlined functions by those (info_name) */
    for (size_t i = 0; s->names && i < m->nsyms; i++) {
        if (s->names[i][0]) {
            tc_hash_field(h, "symbol", m->syms[i].name, m->syms[i].len);
            tc_hash_field_str(h, "named", s->names[i]);
        }
    }
    for (size_t i = 0; i < m->ninfos; i++) {
        tc_hash_field(h, "info", m->infos[i].label, m->infos[i].len);
        tc_hash_field_str(h, "named", m->infos[i].canon);
    }
    tc_hash_final(h, out);
    tc_hash_free(h);
    return 0;
}

int tc_slicer_function_key(const tc_slicer *s, size_t i, const tc_digest *context,
                           tc_digest *out)
{
    const tc_ptx_module *m = s->m;
    const tc_ptx_stmt *st = &m->stmts[s->funcs.v[i]];
    tc_hash *h = tc_hash_new();
    if (!h)
        return -1;
    /* everything tc_canon_stmt reads of the function besides its bytes:
     * the linkage memo_function asks for, and what the parser found in
     * the body (derived from the same bytes, hashed all the same) */
    const uint8_t flags[3] = {st->is_entry, st->labels_known, st->canon_rename};
    tc_hash_field(h, "context", context->b, TC_DIGEST_LEN);
    tc_hash_field(h, "flags", flags, sizeof flags);
    for (uint32_t k = 0; st->labels_known && k < st->label_count; k++) {
        const tc_ptx_label *x = &m->labels[st->label_begin + k];
        const uint64_t where[2] = {(uint64_t)(x->off - st->start), x->len};
        tc_hash_field(h, "label", where, sizeof where);
    }
    tc_hash_field(h, "text", m->src + st->start, st->end - st->start);
    tc_hash_final(h, out);
    tc_hash_free(h);
    return 0;
}

const tc_piece *tc_slicer_function_text(const tc_slicer *s, size_t i, uint32_t *first_line)
{
    const tc_ptx_stmt *st = &s->m->stmts[s->funcs.v[i]];
    const tc_piece *p = &s->memo[s->funcs.v[i]];
    *first_line = st->line;
    return p->text.len ? p : NULL;
}

int tc_slicer_set_function_text(const tc_slicer *s, size_t i, const char *text, size_t len,
                                const uint32_t *lines, size_t nlines)
{
    const tc_ptx_stmt *st = &s->m->stmts[s->funcs.v[i]];
    tc_piece *p = &s->memo[s->funcs.v[i]];
    tc_piece_reset(p);
    tc_sb_append(&p->text, text, len);
    if (nlines > p->cap) {
        uint32_t *l = realloc(p->lines, nlines * sizeof *l);
        if (!l) {
            tc_piece_free(p);
            return -1;
        }
        p->lines = l;
        p->cap = nlines;
    }
    for (size_t k = 0; k < nlines; k++)
        p->lines[k] = st->line + lines[k];
    p->nlines = nlines;
    if (p->text.oom) {
        tc_piece_free(p);
        return -1;
    }
    return 0;
}

/* A one-line declaration made of the start of a statement up to `cut`. */
static int emit_decl(const tc_slicer *s, tc_text *out, const tc_ptx_stmt *st, size_t cut,
                     int link)
{
    tc_piece p;
    memset(&p, 0, sizeof p);
    int rc = tc_canon_decl(s->m, s->names, st, cut, link, &p);
    if (rc == 0)
        rc = text_piece(out, &p);
    tc_piece_free(&p);
    return rc;
}

static size_t var_decl_cut(const tc_ptx_stmt *st) { return st->init ? st->init : st->end - 1; }

static int cmp_info(const tc_ptx_module *m, uint32_t a, uint32_t b)
{
    return strcmp(m->infos[a].canon, m->infos[b].canon);
}

/* The .debug_str entries a unit's functions name, in order of their
 * canonical names, each once (equal bytes, one name). */
static int emit_infos(const tc_slicer *s, tc_text *out, u32vec *infos)
{
    const tc_ptx_module *m = s->m;
    if (!infos->n)
        return 0;
    for (size_t i = 1; i < infos->n; i++) { /* insertion sort: a unit names few */
        uint32_t x = infos->v[i];
        size_t j = i;
        for (; j > 0 && cmp_info(m, infos->v[j - 1], x) > 0; j--)
            infos->v[j] = infos->v[j - 1];
        infos->v[j] = x;
    }
    size_t n = 0;
    for (size_t i = 0; i < infos->n; i++)
        if (!n || cmp_info(m, infos->v[n - 1], infos->v[i]))
            infos->v[n++] = infos->v[i];
    tc_piece p;
    memset(&p, 0, sizeof p);
    int rc = tc_canon_infos(m, infos->v, n, &p);
    if (rc == 0)
        rc = text_piece(out, &p);
    tc_piece_free(&p);
    return rc;
}

/* The module header: .version, .target, .address_size, the module's
 * .pragma directives, and the .file directives that the .loc directives
 * of what was just collected name. */
static int emit_header(const tc_slicer *s, tc_text *out)
{
    const tc_ptx_module *m = s->m;
    if (out->line == 0)
        out->line = 1;
    if (emit_stmt(s, out, &m->stmts[m->version_stmt], TC_CANON_KEEP) ||
        emit_stmt(s, out, &m->stmts[m->target_stmt], TC_CANON_KEEP))
        return -1;
    if (m->addrsize_stmt >= 0 && emit_stmt(s, out, &m->stmts[m->addrsize_stmt], TC_CANON_KEEP))
        return -1;
    size_t f = 0;
    for (size_t i = 0; i < s->header_stmts.n; i++) {
        const tc_ptx_stmt *st = &m->stmts[s->header_stmts.v[i]];
        int want = st->kind == TC_STMT_PRAGMA;
        for (f = 0; !want && f < s->nfiles; f++)
            want = (uint32_t)s->files[f] == s->header_stmts.v[i] && s->file_stamp[f] == s->gen;
        if (want && emit_stmt(s, out, st, TC_CANON_KEEP))
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
                           TC_CANON_EXTERN);
        else if (y->def >= 0)
            rc = emit_decl(s, out, &m->stmts[y->def], m->stmts[y->def].proto_end, TC_CANON_EXTERN);
        else
            rc = emit_decl(s, out, &m->stmts[y->decl], m->stmts[y->decl].proto_end, TC_CANON_KEEP);
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
        if (emit_decl(s, out, st, st->proto_end, TC_CANON_DROP))
            return -1;
    }
    for (size_t i = 0; i < copies->n; i++)
        if (emit_function(s, out, &m->stmts[m->syms[copies->v[i]].def]))
            return -1;
    return 0;
}

/* Whether a unit of entries idx[0..n), with closure c, may be compiled
 * -ewp; *const_prefix: how many of the module's .const variables it then
 * declares first (see above). */
static int ewp_possible(const tc_slicer *s, const uint32_t *idx, size_t n, const closure *c,
                        size_t *const_prefix)
{
    const tc_ptx_module *m = s->m;
    /* ptxas -ewp code that calls through a register stopped with an
     * illegal instruction on the H200 when the target was compiled -c in
     * the module data (../shared/repro/ewp_fnptr.cu): such units stay
     * relocatable. */
    int ok = !c->indirect_call;
    /* A kernel's own .const data (declared in its body) sits at offset 0
     * of bank 3 in a -ewp object, with no relocation; linked with other
     * units' .const data it moves, and the code would read another
     * kernel's table. -c objects carry relocations for it. */
    for (size_t i = 0; i < n; i++)
        if (m->stmts[s->entries[idx[i]]].own_const)
            ok = 0;
    for (size_t i = 0; i < c->efuncs.n; i++)
        if (m->syms[c->efuncs.v[i]].def >= 0) /* defined in the module data */
            ok = 0;
    /* ptxas -ewp emits no relocation for a read of an extern .const
     * variable (it does for .global ones: readelf -r), so the bank offset
     * it assumes must be the one the linked image has: with const_layout
     * the unit declares the module's .const variables in the module's order
     * (see above); otherwise a unit reading .const stays relocatable (on the
     * H200 such units computed wrong results: tests/gpu/specs/constant_mem).
     * Other spaces (.tex, ...) keep a unit relocatable. */
    *const_prefix = 0;
    for (size_t i = 0; i < c->vars.n; i++) {
        const tc_ptx_stmt *st = sym_stmt(m, c->vars.v[i]);
        if (st->space == TC_SPACE_CONST && s->whole_program && s->const_layout) {
            size_t pos = s->const_pos[c->vars.v[i]];
            *const_prefix = pos > *const_prefix ? pos : *const_prefix;
        } else if (st->space != TC_SPACE_GLOBAL) {
            ok = 0;
        }
    }
    return ok;
}

/* The alignment a variable's declaration states (.align N), 0 if none. */
static uint64_t stated_align(const tc_ptx_module *m, const tc_ptx_stmt *st)
{
    tc_lexer lx;
    tc_lex_init(&lx, m->src + st->start, var_decl_cut(st) - st->start, st->line);
    for (tc_tok t = tc_lex_next(&lx); t.kind == TK_IDENT; t = tc_lex_next(&lx))
        if (tc_tok_is(&t, ".align")) {
            tc_tok v = tc_lex_next(&lx);
            return tc_tok_integer(&v);
        }
    return 0;
}

/* What in a unit's code ptxas -c would not compile as the whole module
 * does, or NULL: the linker aligns an .extern .shared array of a -c object
 * to 16 bytes only (the whole build to its .align: TMA and wgmma need 128
 * and 1024), -c drops setmaxnreg ("ignored to maintain compatibility
 * across compilation units") and refuses .pragma "enable_smem_spilling"
 * ("not allowed for per-function compilation modes"). */
static const char *ewp_only_reason(uint8_t bits)
{
    return bits & TC_EWP_SETMAXNREG ? "setmaxnreg"
           : bits                   ? "the pragma enable_smem_spilling"
                                    : NULL;
}

/* A dynamic .shared array the linker would misalign in a -c object. */
static int overaligned_extern_shared(const tc_ptx_module *m, const tc_ptx_stmt *st)
{
    return st->linkage == TC_LINK_EXTERN && st->space == TC_SPACE_SHARED &&
           stated_align(m, st) > 16;
}

static const char *needs_ewp(const tc_slicer *s, const uint32_t *idx, size_t n,
                             const closure *c)
{
    const tc_ptx_module *m = s->m;
    for (size_t i = 0; i < c->shared.n; i++)
        if (overaligned_extern_shared(m, sym_stmt(m, c->shared.v[i])))
            return "a dynamic .shared array aligned above 16 bytes";
    const char *why_not = NULL;
    for (size_t i = 0; i < n && !why_not; i++)
        why_not = ewp_only_reason(m->stmts[s->entries[idx[i]]].ewp_only);
    for (size_t i = 0; i < c->copies.n && !why_not; i++)
        why_not = ewp_only_reason(m->stmts[m->syms[c->copies.v[i]].def].ewp_only);
    return why_not;
}

int tc_slicer_relocatable_hazard(tc_slicer *s, char *whybuf, size_t whylen)
{
    const tc_ptx_module *m = s->m;
    int candidate = 0; /* most modules have neither: no walk then */
    for (size_t i = 0; i < m->nstmts && !candidate; i++) {
        const tc_ptx_stmt *st = &m->stmts[i];
        candidate = (st->kind == TC_STMT_FUNC && st->ewp_only) ||
                    (st->kind == TC_STMT_VAR && overaligned_extern_shared(m, st));
    }
    if (!candidate)
        return 0;
    /* Kernels are grouped into units by cost: a kernel that needs -ewp and
     * one that forces -c may share one, so both anywhere in the module
     * count. */
    const char *need = NULL;
    size_t needer = SIZE_MAX, forcer = SIZE_MAX; /* entry indices */
    for (size_t i = 0; i < s->nentries && (!need || forcer == SIZE_MAX); i++) {
        closure c;
        uint32_t idx = (uint32_t)i;
        if (collect_entries(s, &idx, 1, &c) != 0) {
            closure_free(&c);
            return -1;
        }
        size_t prefix;
        const char *what = needs_ewp(s, &idx, 1, &c);
        if (what && !need) {
            need = what;
            needer = i;
        }
        if (forcer == SIZE_MAX && (!s->whole_program || !ewp_possible(s, &idx, 1, &c, &prefix)))
            forcer = i;
        closure_free(&c);
    }
    if (!need || forcer == SIZE_MAX)
        return 0;
    const tc_ptx_sym *a = &m->syms[m->stmts[s->entries[needer]].sym];
    const tc_ptx_sym *b = &m->syms[m->stmts[s->entries[forcer]].sym];
    char other[96] = "";
    if (s->whole_program && forcer != needer)
        snprintf(other, sizeof other, "kernel '%.*s' ", (int)(b->len > 64 ? 64 : b->len), b->name);
    return s->whole_program
               ? why(whybuf, whylen,
                     "kernel '%.*s' uses %s, which a relocatable (-c) unit does not compile as "
                     "the whole module does, and %sneeds a relocatable unit",
                     (int)(a->len > 64 ? 64 : a->len), a->name, need, other)
               : why(whybuf, whylen,
                     "kernel '%.*s' uses %s, which relocatable (-c) units do not compile as the "
                     "whole module does",
                     (int)(a->len > 64 ? 64 : a->len), a->name, need);
}

int tc_slicer_emit_unit(tc_slicer *s, const uint32_t *idx, size_t n, tc_text *out,
                        int *whole_program)
{
    const tc_ptx_module *m = s->m;
    closure c;
    int rc = -1;
    if (collect_entries(s, idx, n, &c) || sort_set(s, &c.vars, 0) || sort_set(s, &c.shared, 1) ||
        sort_set(s, &c.efuncs, 0) || sort_set(s, &c.copies, 0))
        goto done;
    if (emit_header(s, out))
        goto done;
    size_t const_prefix = 0;
    *whole_program = ewp_possible(s, idx, n, &c, &const_prefix);
    for (size_t i = 0; i < const_prefix; i++) {
        const tc_ptx_stmt *st = sym_stmt(m, s->consts.v[i]);
        if (emit_decl(s, out, st, var_decl_cut(st), TC_CANON_EXTERN))
            goto done;
    }
    for (size_t i = 0; i < c.vars.n; i++) {
        const tc_ptx_stmt *st = sym_stmt(m, c.vars.v[i]);
        if (const_prefix && st->space == TC_SPACE_CONST)
            continue; /* declared above */
        if (emit_decl(s, out, st, var_decl_cut(st), TC_CANON_EXTERN))
            goto done;
    }
    if (emit_efuncs(s, out, &c.efuncs))
        goto done;
    for (size_t i = 0; i < c.shared.n; i++) {
        const tc_ptx_stmt *st = sym_stmt(m, c.shared.v[i]);
        if (emit_stmt(s, out, st, st->linkage == TC_LINK_EXTERN ? TC_CANON_KEEP : TC_CANON_DROP))
            goto done;
    }
    if (emit_copies(s, out, &c.copies))
        goto done;
    for (size_t i = 0; i < n; i++)
        if (emit_function(s, out, &m->stmts[s->entries[idx[i]]]))
            goto done;
    if (emit_infos(s, out, &c.infos))
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
    if (walk(s, &c, 1) || emit_header(s, out))
        goto done;
    /* Everything the module data holds is stamped now; emitting it in the
     * input's own order keeps every declaration before its first use. */
    for (size_t i = 0; i < m->nstmts; i++) {
        const tc_ptx_stmt *st = &m->stmts[i];
        int link = -1;
        if (st->kind == TC_STMT_VAR && !is_local_space(st->space)) {
            link = TC_CANON_VISIBLE;
        } else if (st->kind == TC_STMT_ALIAS) {
            link = TC_CANON_KEEP;
        } else if (st->kind == TC_STMT_FUNC && st->sym >= 0 && s->stamp[st->sym] == s->gen) {
            const tc_ptx_sym *y = &m->syms[st->sym];
            if (s->md[st->sym] || y->kind == TC_SYM_ALIAS)
                link = TC_CANON_VISIBLE;
            else if (y->def >= 0)
                link = TC_CANON_DROP; /* an internal copy of a callee */
            else
                link = TC_CANON_KEEP; /* defined nowhere, e.g. vprintf */
        }
        if (link >= 0 && emit_stmt(s, out, st, link))
            goto done;
    }
    if (emit_infos(s, out, &c.infos))
        goto done;
    rc = 0;
done:
    closure_free(&c);
    return rc;
}
