/* libFuzzer target: the PTX parser and slicer. Any input must parse or
 * fail cleanly; a parsed module must slice, group and emit every unit and
 * the module data without crashing, leaking or hanging, and every emitted
 * unit must itself parse (the slicer only produces well-formed PTX). Text
 * is canonical: a unit sliced again, as one unit of all its kernels, gives
 * back the same text. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx/body.h"
#include "ptx/module.h"
#include "ptx/slice.h"
#include "ptx/units.h"
#include "util/hash.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_reparses(const tc_text *t)
{
    tc_ptx_module again;
    tc_ptx_error err;
    if (tc_ptx_parse(t->text.data, t->text.len, &again, &err) == 0)
        tc_ptx_module_free(&again);
    else if (err.line) { /* out of memory is not a finding */
        fprintf(stderr, "emitted text does not parse: line %u: %s\n--- text ---\n%.*s\n",
                err.line, err.message, (int)t->text.len, t->text.data);
        abort();
    }
}

/* Whether a function names a module symbol declared only after it. PTX
 * forbids it (ptxas rejects the module) and the parser, reading in one
 * pass, does not count it as a reference; in a unit the declaration may
 * come first, so such inputs are no fixed points, and no concern. */
static int names_later_symbol(const tc_ptx_module *m)
{
    for (size_t i = 0; i < m->nstmts; i++) {
        const tc_ptx_stmt *st = &m->stmts[i];
        if (st->kind != TC_STMT_FUNC || !st->has_body)
            continue;
        tc_body w;
        tc_body_init(&w, m->src + st->start, st->end - st->start, st->line);
        tc_body_tok b;
        int later = 0;
        while (!later && tc_body_next(&w, &b) == 1) {
            uint32_t *v;
            if ((b.role == TC_BODY_NAME || b.role == TC_BODY_CALLEE) && !b.local &&
                (v = tc_map_get(&m->symtab, b.tok.p, b.tok.len)) != NULL)
                later = m->syms[*v].decl > (int32_t)i;
        }
        tc_body_free(&w);
        if (later)
            return 1;
    }
    return 0;
}

/* Canonical text is a fixed point: slicing a unit again, all its kernels
 * in one unit, changes nothing. */
static void check_fixed_point(const tc_text *t)
{
    tc_ptx_module again;
    tc_ptx_error err;
    if (tc_ptx_parse(t->text.data, t->text.len, &again, &err) != 0)
        return;
    tc_slicer *s = NULL;
    char why[256];
    if (tc_slicer_create(&again, &s, why, sizeof why) == 0) {
        size_t n = tc_slicer_entry_count(s);
        uint32_t *idx = malloc((n + 1) * sizeof *idx);
        for (size_t i = 0; idx && i < n; i++)
            idx[i] = (uint32_t)i;
        tc_text u;
        memset(&u, 0, sizeof u);
        int whole_program;
        if (idx && tc_slicer_emit_unit(s, idx, n, &u, &whole_program) == 0 &&
            (u.text.len != t->text.len || memcmp(u.text.data, t->text.data, u.text.len))) {
            fprintf(stderr, "canonical text is not a fixed point\n--- unit ---\n%s\n"
                            "--- sliced again ---\n%s\n", t->text.data, u.text.data);
            abort();
        }
        tc_text_free(&u);
        free(idx);
        tc_slicer_free(s);
    }
    tc_ptx_module_free(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tc_ptx_module m;
    tc_ptx_error err;
    if (tc_ptx_parse((const char *)data, size, &m, &err) != 0)
        return 0;
    tc_slicer *s = NULL;
    char why[256];
    if (tc_slicer_create(&m, &s, why, sizeof why) == 0) {
        int forward = names_later_symbol(&m);
        size_t n = tc_slicer_entry_count(s);
        uint32_t *cost = malloc((n + 1) * sizeof *cost), *first = malloc((n + 1) * sizeof *first);
        uint64_t *hash = malloc((n + 1) * sizeof *hash);
        uint32_t *idx = malloc((n + 1) * sizeof *idx);
        for (size_t i = 0; i < n; i++) {
            const tc_ptx_stmt *st = tc_slicer_entry(s, i);
            tc_digest d;
            tc_digest_of(m.syms[st->sym].name, m.syms[st->sym].len, &d);
            hash[i] = tc_digest_u64(&d);
            cost[i] = tc_slicer_entry_cost(s, i);
        }
        size_t k = tc_plan_units(cost, hash, n, 64, first);
        /* relocatable units, then whole-program units (which may declare
         * the module's .const variables) */
        for (int mode = 0; mode < 2; mode++) {
            char hazard[256];
            if (tc_slicer_set_whole_program(s, mode) != 0 ||
                tc_slicer_relocatable_hazard(s, hazard, sizeof hazard) < 0)
                abort();
            const char *name;
            size_t len;
            uint64_t off, prev = 0;
            for (size_t i = 0; tc_slicer_const_var(s, i, &name, &len, &off) == 0; i++) {
                if (!len || off < prev) /* offsets only grow, in module order */
                    abort();
                prev = off;
            }
            for (size_t u = 0; u < k; u++) {
                size_t end = u + 1 < k ? first[u + 1] : n, c = 0;
                for (size_t i = first[u]; i < end; i++)
                    idx[c++] = (uint32_t)i;
                tc_text t;
                memset(&t, 0, sizeof t);
                int whole_program;
                if (tc_slicer_emit_unit(s, idx, c, &t, &whole_program) == 0) {
                    check_reparses(&t);
                    /* relocatable units only: a whole-program unit
                     * declares the module's .const variables first, in the
                     * module's order, which its own text no longer tells
                     * (sliced again, they sort by name) */
                    if (mode == 0 && !forward)
                        check_fixed_point(&t);
                }
                tc_text_free(&t);
            }
        }
        if (tc_slicer_has_module_data(s)) {
            tc_text t;
            memset(&t, 0, sizeof t);
            if (tc_slicer_emit_module_data(s, &t) == 0)
                check_reparses(&t);
            tc_text_free(&t);
        }
        free(cost);
        free(first);
        free(hash);
        free(idx);
        tc_slicer_free(s);
    }
    tc_ptx_module_free(&m);
    return 0;
}
