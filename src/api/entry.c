/* entry: the per-kernel metadata (tc_entry_info) kept in records and
 * handed to callers: name, parameter layout, performance directives from
 * the parsed PTX, the compiler's resource figures and -v lines. This file
 * owns how an entry's memory is laid out: everything that makes, copies or
 * frees one is here. */
#include <stdlib.h>
#include <string.h>

#include "api/handles.h"
#include "compile/ptxas.h"
#include "store/record.h"
#include "util/map.h"

/* The most bytes of -v lines an entry's record may hold (a kernel that
 * calls many functions has a line pair for each). */
#define TC_VERBOSE_MAX ((size_t)64 << 20)

/* The parameter array and its type strings live in one allocation. */
static tc_param_info *alloc_params(uint32_t n, char **types)
{
    size_t bytes = (size_t)n * (sizeof(tc_param_info) + 12);
    tc_param_info *p = calloc(1, bytes ? bytes : 1);
    if (p)
        *types = (char *)(p + n);
    return p;
}

static const char empty_key[] = "";

int tc_entry_from_stmt(const tc_ptx_module *m, const tc_ptx_stmt *st, tc_entry_info *e)
{
    memset(e, 0, sizeof *e);
    const tc_ptx_sym *y = &m->syms[st->sym];
    char *name = malloc(y->len + 1);
    char *types = NULL;
    tc_param_info *params = alloc_params(st->param_count, &types);
    if (!name || !params) {
        free(name);
        free(params);
        return -1;
    }
    memcpy(name, y->name, y->len);
    name[y->len] = '\0';
    e->name = name;
    for (uint32_t i = 0; i < st->param_count; i++) {
        const tc_ptx_param *src = &m->params[st->param_begin + i];
        memcpy(types + 12 * i, src->type, 12);
        types[12 * i + 11] = '\0';
        params[i].type = types + 12 * i;
        params[i].offset = src->offset;
        params[i].size = src->size;
        params[i].align = src->align;
    }
    e->params = params;
    e->param_count = st->param_count;
    e->param_bytes = st->param_bytes;
    memcpy(e->maxntid, st->perf.maxntid, sizeof e->maxntid);
    memcpy(e->reqntid, st->perf.reqntid, sizeof e->reqntid);
    memcpy(e->reqnctapercluster, st->perf.reqnctapercluster, sizeof e->reqnctapercluster);
    e->minnctapersm = st->perf.minnctapersm;
    e->maxnreg = st->perf.maxnreg;
    e->maxclusterrank = st->perf.maxclusterrank;
    e->registers = e->shared_bytes = e->stack_bytes = -1;
    e->spill_store_bytes = e->spill_load_bytes = -1;
    e->unit_key = e->slice_key = empty_key;
    /* ptxas reports a module's kernels last defined first (a whole compile's
     * log gives its own order: tc_entries_take_report) */
    e->verbose_rank = (uint32_t)(m->nstmts - (size_t)(st - m->stmts));
    return 0;
}

static void free_key(const char *k)
{
    if (k && k != empty_key)
        free((char *)k);
}

void tc_entry_clear(tc_entry_info *e)
{
    free((char *)e->name);
    free((void *)e->params);
    free_key(e->unit_key);
    free_key(e->slice_key);
    free((char *)e->verbose_head);
    free((char *)e->verbose);
    memset(e, 0, sizeof *e);
}

void tc_entries_free(tc_entry_info *entries, size_t n)
{
    for (size_t i = 0; entries && i < n; i++)
        tc_entry_clear(&entries[i]);
    free(entries);
}

int tc_entry_set_key(const char **field, const char *hex)
{
    char *k = strdup(hex);
    if (!k)
        return -1;
    free_key(*field);
    *field = k;
    return 0;
}

void tc_entry_encode(const tc_entry_info *e, tc_sb *out)
{
    tc_sb_put_blob(out, e->name, strlen(e->name));
    tc_sb_put_u32(out, e->param_count);
    tc_sb_put_u32(out, e->param_bytes);
    for (uint32_t i = 0; i < e->param_count; i++) {
        tc_sb_put_u32(out, e->params[i].offset);
        tc_sb_put_u32(out, e->params[i].size);
        tc_sb_put_u32(out, e->params[i].align);
        tc_sb_put_blob(out, e->params[i].type, strlen(e->params[i].type));
    }
    const uint32_t dirs[] = {e->maxntid[0], e->maxntid[1], e->maxntid[2], e->reqntid[0],
                             e->reqntid[1], e->reqntid[2], e->minnctapersm, e->maxnreg,
                             e->reqnctapercluster[0], e->reqnctapercluster[1],
                             e->reqnctapercluster[2], e->maxclusterrank};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        tc_sb_put_u32(out, dirs[i]);
    const int32_t res[] = {e->registers, e->shared_bytes, e->stack_bytes, e->spill_store_bytes,
                           e->spill_load_bytes};
    for (size_t i = 0; i < sizeof res / sizeof res[0]; i++)
        tc_sb_put_u32(out, (uint32_t)res[i]);
    tc_sb_put_blob(out, e->unit_key, strlen(e->unit_key));
    tc_sb_put_u32(out, e->unit);
    /* the -v lines, when known: an entry of an earlier version ends above */
    if (e->verbose) {
        const char *head = e->verbose_head ? e->verbose_head : "";
        tc_sb_put_blob(out, head, strlen(head));
        tc_sb_put_blob(out, e->verbose, strlen(e->verbose));
        tc_sb_put_u32(out, e->verbose_rank);
    }
}

static char *dup_blob(tc_reader *r, size_t max)
{
    size_t n;
    const unsigned char *p = tc_read_blob(r, &n);
    if (!p || n > max || memchr(p, '\0', n)) {
        r->bad = 1;
        return NULL;
    }
    char *s = malloc(n + 1);
    if (!s) {
        r->bad = 1;
        return NULL;
    }
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

int tc_entry_decode(const void *data, size_t n, tc_entry_info *e)
{
    memset(e, 0, sizeof *e);
    e->unit_key = e->slice_key = empty_key;
    tc_reader r;
    tc_reader_init(&r, data, n);
    e->name = dup_blob(&r, 1 << 20);
    uint32_t np = tc_read_u32(&r);
    e->param_bytes = tc_read_u32(&r);
    /* each parameter takes at least 20 bytes: bounds the allocation */
    if (r.bad || np > (size_t)(r.end - r.p) / 20) {
        tc_entry_clear(e);
        return -1;
    }
    char *types = NULL;
    tc_param_info *params = alloc_params(np, &types);
    if (!params) {
        tc_entry_clear(e);
        return -1;
    }
    e->params = params;
    e->param_count = np;
    for (uint32_t i = 0; i < np && !r.bad; i++) {
        params[i].offset = tc_read_u32(&r);
        params[i].size = tc_read_u32(&r);
        params[i].align = tc_read_u32(&r);
        size_t tl;
        const unsigned char *t = tc_read_blob(&r, &tl);
        if (!t || tl > 11)
            r.bad = 1;
        else
            memcpy(types + 12 * i, t, tl);
        params[i].type = types + 12 * i;
    }
    uint32_t *dirs[] = {&e->maxntid[0], &e->maxntid[1], &e->maxntid[2], &e->reqntid[0],
                        &e->reqntid[1], &e->reqntid[2], &e->minnctapersm, &e->maxnreg,
                        &e->reqnctapercluster[0], &e->reqnctapercluster[1],
                        &e->reqnctapercluster[2], &e->maxclusterrank};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        *dirs[i] = tc_read_u32(&r);
    int32_t *res[] = {&e->registers, &e->shared_bytes, &e->stack_bytes, &e->spill_store_bytes,
                      &e->spill_load_bytes};
    for (size_t i = 0; i < sizeof res / sizeof res[0]; i++)
        *res[i] = (int32_t)tc_read_u32(&r);
    char *key = dup_blob(&r, 64);
    e->unit = tc_read_u32(&r);
    if (key && !r.bad && *key)
        e->unit_key = key;
    else
        free(key);
    if (!r.bad && r.p != r.end) {
        char *head = dup_blob(&r, TC_VERBOSE_MAX);
        e->verbose = dup_blob(&r, TC_VERBOSE_MAX);
        e->verbose_rank = tc_read_u32(&r);
        if (head && *head)
            e->verbose_head = head;
        else
            free(head);
    }
    if (r.bad || r.p != r.end) {
        tc_entry_clear(e);
        return -1;
    }
    return 0;
}

/* ---- the compiler's -v report ------------------------------------------------------ */

static char *dup_sb(const tc_sb *sb)
{
    return strdup(sb->data ? sb->data : "");
}

/* Gives e what the compiler said of its kernel k. */
static int take_kernel(tc_entry_info *e, const tc_ptxas_kernel *k)
{
    char *body = dup_sb(&k->body), *head = k->head.len ? dup_sb(&k->head) : NULL;
    if (!body || (k->head.len && !head)) {
        free(body);
        free(head);
        return -1;
    }
    e->registers = k->res.registers;
    e->shared_bytes = k->res.shared_bytes;
    e->stack_bytes = k->res.stack_bytes;
    e->spill_store_bytes = k->res.spill_store_bytes;
    e->spill_load_bytes = k->res.spill_load_bytes;
    free((char *)e->verbose);
    free((char *)e->verbose_head);
    e->verbose = body;
    e->verbose_head = head;
    return 0;
}

int tc_entries_take_report(tc_entry_info *entries, size_t n, const char *log, size_t len,
                           int ranked)
{
    tc_map names = {0};  /* entry name -> index */
    uint8_t *named = calloc(n ? n : 1, 1);
    tc_ptxas_report rep;
    int rc = named ? 0 : -1;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (tc_map_put(&names, entries[i].name, strlen(entries[i].name), (uint32_t)i) < 0)
            rc = -1;
    if (rc == 0 && (rc = tc_ptxas_parse_report(log, len, &rep)) == 0) {
        for (size_t k = 0; k < rep.n && rc == 0; k++) {
            const tc_ptxas_kernel *pk = &rep.kernels[k];
            uint32_t *i = tc_map_get(&names, pk->name, strlen(pk->name));
            if (!i)
                continue; /* not one of these kernels */
            rc = take_kernel(&entries[*i], pk);
            entries[*i].verbose_rank = ranked ? (uint32_t)k : entries[*i].verbose_rank;
            named[*i] = 1;
        }
        /* a kernel the whole compile did not name: after those it did */
        for (size_t i = 0; i < n && ranked; i++) {
            uint64_t rank = (uint64_t)entries[i].verbose_rank + rep.n;
            if (!named[i])
                entries[i].verbose_rank = rank > UINT32_MAX ? UINT32_MAX : (uint32_t)rank;
        }
        tc_ptxas_report_free(&rep);
    }
    tc_map_free(&names);
    free(named);
    return rc;
}

int tc_entries_take_resources(tc_entry_info *entries, size_t n, const char *log, size_t len)
{
    return tc_entries_take_report(entries, n, log, len, 0);
}
