/* canon_memo: the canonical texts of a module's functions across builds
 * (see canon_memo.h).
 *
 * The memo's payload: one TC_F_CANON_TEXT field per function, holding
 *   32 bytes  the function's key (tc_slicer_function_key)
 *   u32       n, the lines of its text
 *   n x u32   the input line of each, relative to the function's first
 *   ...       the text: n lines, each ending in '\n'
 * (integers little-endian, as tc_sb_put_u32 writes them). */
#include "pipeline/canon_memo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/record.h"
#include "util/map.h"

/* The memo is rewritten when 1/REWRITE_SHARE of the functions or more
 * were not in it: an edit or two makes one or two texts, not worth a
 * rewrite of all of them (some milliseconds for a 1 MB module). */
#define REWRITE_SHARE 8

typedef struct memo_text {
    const unsigned char *key;
    const unsigned char *lines; /* n little-endian u32 */
    uint32_t nlines;
    const char *text;
    size_t len;
} memo_text;

struct tc_canon_memo {
    tc_session *s;
    const tc_slicer *sl;
    int use;            /* a store with the unit tier: read, and maybe write */
    int check;          /* TASKCACHE_TEST_CANON_MEMO=check (tests) */
    tc_digest lineage;  /* what the memo is filed under */
    tc_digest context;  /* tc_slicer_memo_context */
    char *payload;      /* the memo read, or NULL */
    memo_text *texts;
    size_t ntexts;
    tc_map index;       /* function key -> index into texts */
    size_t n;           /* functions */
    tc_digest *keys;    /* per function */
    uint8_t *made;      /* per function: made here, not taken from the memo */
    uint8_t *differs;   /* check: the memo's text was not the one made */
};

/* The input lines of t, relative to its function's first line. */
static void read_lines(const memo_text *t, uint32_t *out)
{
    tc_reader r;
    tc_reader_init(&r, t->lines, 4 * (size_t)t->nlines);
    for (size_t k = 0; k < t->nlines; k++)
        out[k] = tc_read_u32(&r);
}

/* The texts of a payload, pointing into it: 0, or -1 when malformed (a
 * text whose lines are not the count it states is malformed too: the line
 * map of every unit holding it would be off). */
static int decode(const char *payload, size_t len, memo_text **out, size_t *count)
{
    tc_reader r;
    tc_reader_init(&r, payload, len);
    memo_text *t = NULL;
    size_t n = 0, cap = 0;
    uint32_t tag;
    const unsigned char *p;
    size_t flen;
    int rc; /* left at 1 by a break: a text that does not hold refuses the payload whole */
    while ((rc = tc_field_next(&r, &tag, &p, &flen)) == 1) {
        if (tag != TC_F_CANON_TEXT)
            continue;
        if (flen < TC_DIGEST_LEN + 4)
            break;
        tc_reader head_r;
        tc_reader_init(&head_r, p + TC_DIGEST_LEN, 4);
        uint32_t nlines = tc_read_u32(&head_r);
        size_t head = TC_DIGEST_LEN + 4;
        if (nlines == 0 || (flen - head) / 4 < nlines)
            break;
        const char *text = (const char *)p + head + 4 * (size_t)nlines;
        size_t tlen = flen - head - 4 * (size_t)nlines;
        size_t newlines = 0;
        for (const char *c = text; (c = memchr(c, '\n', tlen - (size_t)(c - text))) != NULL; c++)
            newlines++;
        if (newlines != nlines || text[tlen - 1] != '\n')
            break;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            memo_text *g = realloc(t, nc * sizeof *g);
            if (!g)
                break;
            t = g;
            cap = nc;
        }
        t[n++] = (memo_text){p, p + head, nlines, text, tlen};
    }
    if (rc != 0) {
        free(t);
        return -1;
    }
    *out = t;
    *count = n;
    return 0;
}

int tc_canon_memo_check_payload(const char *payload, size_t len, size_t *n)
{
    memo_text *t = NULL;
    if (decode(payload, len, &t, n) != 0)
        return -1;
    free(t);
    return 0;
}

/* The memo is filed under the names of the module's kernels, in name
 * order: an edited copy of the module finds it, another module does not
 * (and would only miss). */
static int lineage(const tc_ptx_module *mod, const tc_slicer *sl, tc_digest *out)
{
    tc_hash *h = tc_hash_new();
    if (!h)
        return -1;
    tc_hash_field_str(h, "memo", "canonical texts 1");
    for (size_t i = 0; i < tc_slicer_entry_count(sl); i++) {
        const tc_ptx_sym *y = &mod->syms[tc_slicer_entry(sl, i)->sym];
        tc_hash_field(h, "kernel", y->name, y->len);
    }
    tc_hash_final(h, out);
    tc_hash_free(h);
    return 0;
}

static void read_memo(tc_canon_memo *m)
{
    tc_session *s = m->s;
    char *payload = NULL;
    size_t len = 0;
    int bad = 0;
    /* local only (canon_memo.h); a bad record is counted as every other
     * kind is, and rewritten */
    if (!tc_store_get(s->store, s->o->arch, TC_REC_CANON, &m->lineage, 0, NULL, &payload, &len,
                      &bad)) {
        if (bad && s->call != TC_CALL_EXPLAIN)
            tc_session_count(s, TC_C_BAD_RECORDS, 1);
        return;
    }
    if (decode(payload, len, &m->texts, &m->ntexts) != 0) {
        free(payload);
        if (s->call != TC_CALL_EXPLAIN)
            tc_session_count(s, TC_C_BAD_RECORDS, 1);
        return;
    }
    m->payload = payload;
    for (size_t i = 0; i < m->ntexts; i++)
        if (tc_map_put(&m->index, (const char *)m->texts[i].key, TC_DIGEST_LEN, (uint32_t)i) < 0)
            break; /* out of memory: what is indexed still serves */
}

tc_canon_memo *tc_canon_memo_open(tc_session *s, const tc_ptx_module *mod, const tc_slicer *sl)
{
    tc_canon_memo *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->s = s;
    m->sl = sl;
    m->n = tc_slicer_function_count(sl);
    m->keys = calloc(m->n ? m->n : 1, sizeof *m->keys);
    m->made = calloc(m->n ? m->n : 1, 1);
    m->differs = calloc(m->n ? m->n : 1, 1);
    if (!m->keys || !m->made || !m->differs) {
        tc_canon_memo_free(m);
        return NULL;
    }
    const char *test = getenv("TASKCACHE_TEST_CANON_MEMO");
    m->check = test && !strcmp(test, "check");
    m->use = s->store && s->o->unit_tier && tc_slicer_memo_context(sl, &m->context) == 0 &&
             lineage(mod, sl, &m->lineage) == 0;
    if (m->use)
        read_memo(m);
    return m;
}

/* Whether the text made for function i is the memo's t. */
static int same_text(const tc_canon_memo *m, size_t i, const memo_text *t)
{
    uint32_t first;
    const tc_piece *p = tc_slicer_function_text(m->sl, i, &first);
    if (!p || p->text.len != t->len || memcmp(p->text.data, t->text, t->len) ||
        p->nlines != t->nlines)
        return 0;
    uint32_t *lines = malloc(t->nlines * sizeof *lines);
    int same = lines != NULL;
    if (lines)
        read_lines(t, lines);
    for (size_t k = 0; same && k < p->nlines; k++)
        same = p->lines[k] - first == lines[k];
    free(lines);
    return same;
}

int tc_canon_memo_fill(tc_canon_memo *m, size_t i)
{
    const memo_text *t = NULL;
    if (m->use) {
        if (tc_slicer_function_key(m->sl, i, &m->context, &m->keys[i]) != 0)
            return -1;
        uint32_t *v = tc_map_get(&m->index, (const char *)m->keys[i].b, TC_DIGEST_LEN);
        t = v ? &m->texts[*v] : NULL;
    }
    if (t && !m->check) {
        uint32_t *lines = malloc(t->nlines * sizeof *lines);
        if (!lines)
            return -1;
        read_lines(t, lines);
        int rc = tc_slicer_set_function_text(m->sl, i, t->text, t->len, lines, t->nlines);
        free(lines);
        return rc;
    }
    m->made[i] = !t;
    int rc = tc_slicer_canon_function(m->sl, i);
    if (rc == 0 && t)
        m->differs[i] = !same_text(m, i, t);
    return rc;
}

void tc_canon_memo_save(tc_canon_memo *m)
{
    if (!m || !m->use)
        return;
    size_t made = 0, differs = 0;
    for (size_t i = 0; i < m->n; i++) {
        made += m->made[i];
        differs += m->differs[i];
    }
    if (m->check) /* what a test needs to know */
        tc_sb_printf(&m->s->r->diag,
                     "taskcache: test: canonical texts: %zu from the memo, %zu made, %zu of "
                     "the memo's differ from the text made\n",
                     m->n - made, made, differs);
    if (m->s->call != TC_CALL_BUILD || !made || (m->payload && made * REWRITE_SHARE < m->n))
        return;
    tc_sb payload = TC_SB_INIT;
    for (size_t i = 0; i < m->n; i++) {
        uint32_t first;
        const tc_piece *p = tc_slicer_function_text(m->sl, i, &first);
        int below = 0;
        for (size_t k = 0; p && k < p->nlines; k++)
            below |= p->lines[k] < first;
        if (!p || !p->nlines || below)
            continue; /* made again next time */
        tc_sb f = TC_SB_INIT;
        tc_sb_append(&f, m->keys[i].b, TC_DIGEST_LEN);
        tc_sb_put_u32(&f, (uint32_t)p->nlines);
        for (size_t k = 0; k < p->nlines; k++)
            tc_sb_put_u32(&f, p->lines[k] - first);
        tc_sb_append(&f, p->text.data, p->text.len);
        if (f.oom)
            payload.oom = 1;
        else
            tc_field_put(&payload, TC_F_CANON_TEXT, f.data, f.len);
        tc_sb_free(&f);
    }
    tc_session_write_record(m->s, TC_REC_CANON, &m->lineage, &payload);
    tc_sb_free(&payload);
}

void tc_canon_memo_free(tc_canon_memo *m)
{
    if (!m)
        return;
    tc_map_free(&m->index);
    free(m->texts);
    free(m->payload);
    free(m->keys);
    free(m->made);
    free(m->differs);
    free(m);
}
