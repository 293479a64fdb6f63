/* tasks: tc_build_tasks, a module built from a host JIT's tasks. The
 * host keys each task by the bytes that determine it, before its own
 * codegen; only tasks the cache lacks are generated (the host's callback,
 * on the pool's threads) and compiled. Task records carry everything a
 * loader needs, the host's metadata included. Also the task set that
 * group.c shares. */
#define _GNU_SOURCE
#include "pipeline/tasks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline/payload.h"
#include "util/pool.h"
#include "store/record.h"
#include "util/fs.h"

void tc_codegen_set_ptx(tc_codegen *g, const void *ptx, size_t size)
{
    /* the text ends at the first NUL, as for tc_build: a JIT's PTX string
     * often comes with its terminator */
    tc_sb_reset(&g->ptx);
    tc_sb_append(&g->ptx, ptx, ptx ? tc_ptx_text_len(ptx, size) : 0);
}

void tc_codegen_set_metadata(tc_codegen *g, const void *data, size_t size)
{
    if (!data && size) { /* a host's mistake fails its task, not its process */
        char why[96];
        snprintf(why, sizeof why, "tc_codegen_set_metadata: no data for %zu bytes", size);
        tc_codegen_fail(g, why);
        return;
    }
    tc_sb_reset(&g->meta);
    tc_sb_append(&g->meta, data, size);
    g->have_meta = 1;
}

void tc_codegen_fail(tc_codegen *g, const char *message)
{
    free(g->error);
    g->error = strdup(message && *message ? message : "codegen failed");
}

void tc_codegen_cancel(tc_codegen *g) { g->cancel = 1; }

/* The build whose codegen the current thread is running, if any: a build
 * started from inside codegen is nested in it. */
static _Thread_local const tc_taskset *in_codegen;

/* ---- the task set ------------------------------------------------------------------ */

int tc_taskset_init(tc_taskset *t, tc_session *s, size_t n)
{
    memset(t, 0, sizeof *t);
    t->s = s;
    t->n = n;
    t->inited = 1;
    pthread_mutex_init(&t->codegen_lock, NULL);
    t->units = calloc(n ? n : 1, sizeof *t->units);
    t->todo = calloc(n ? n : 1, sizeof *t->todo);
    return t->units && t->todo ? 0 : -1;
}

static void task_unit_free(tc_task_unit *x)
{
    tc_unit_free(&x->u);
    free(x->name);
    tc_sb_free(&x->gen.ptx);
    tc_sb_free(&x->gen.meta);
    free(x->gen.error);
}

void tc_taskset_free(tc_taskset *t)
{
    if (!t->inited)
        return;
    for (size_t i = 0; t->units && i < t->n; i++)
        task_unit_free(&t->units[i]);
    free(t->units);
    free(t->todo);
    free(t->keys);
    tc_serial_release(t->serial);
    pthread_mutex_destroy(&t->codegen_lock);
}

int tc_taskset_module_key(tc_taskset *t, const char *version)
{
    if (!t->keys && !(t->keys = malloc(t->n * sizeof *t->keys)))
        return -1;
    for (size_t i = 0; i < t->n; i++)
        t->keys[i] = t->units[i].u.key;
    return tc_key_task_module(&t->s->kc, t->s->linker.id, version, t->keys, t->n,
                              &t->module_key);
}

/* What a task contributes to a build: its object and its host metadata.
 * A task's key stands for them, except after regenerate_cached, which
 * stores other code under the same key; a module record names these
 * digests too, so that it never serves an image linked from other code
 * than the task records now hold (their metadata comes with the image). */
static tc_digest *task_contents(const tc_taskset *t)
{
    tc_digest *d = malloc((t->n ? t->n : 1) * sizeof *d);
    tc_hash *h = d ? tc_hash_new() : NULL;
    if (!h) {
        free(d);
        return NULL;
    }
    for (size_t i = 0; i < t->n; i++) {
        const tc_unit *u = &t->units[i].u;
        uint64_t sizes[3] = {u->object.len, (uint64_t)u->have_meta, u->meta.len};
        tc_hash_update(h, sizes, sizeof sizes);
        tc_hash_update(h, u->object.data ? u->object.data : "", u->object.len);
        tc_hash_update(h, u->meta.data ? u->meta.data : "", u->meta.len);
        tc_hash_final(h, &d[i]);
    }
    tc_hash_free(h);
    return d;
}

static int decode_module_image(void *ctx, char **payload, size_t len)
{
    tc_taskset *t = ctx;
    tc_result *r = t->s->r;
    tc_digest *contents = task_contents(t);
    int rc = contents ? tc_payload_decode_task_module(payload, len, t->keys, contents, t->n,
                                                      &r->image, &r->image_len)
                      : -1;
    free(contents);
    return rc;
}

static void undo_module_image(void *ctx)
{
    tc_result *r = ((tc_taskset *)ctx)->s->r;
    free(r->image);
    r->image = NULL;
    r->image_len = 0;
}

int tc_taskset_module_hit(tc_taskset *t)
{
    return tc_session_read_record(t->s, TC_REC_MODULE, &t->module_key, 1, decode_module_image,
                                  undo_module_image, t);
}

static tc_unit *unit_at(void *ctx, size_t i) { return &((tc_taskset *)ctx)->units[i].u; }

tc_status tc_taskset_link(tc_taskset *t) { return tc_session_link(t->s, unit_at, t, t->n); }

int tc_taskset_read(tc_taskset *t)
{
    return tc_payload_read_units(t->s, TC_REC_TASK, unit_at, t, t->n);
}

void tc_taskset_store_module(tc_taskset *t)
{
    tc_digest *contents = task_contents(t);
    if (!contents)
        return; /* out of memory: the module is not stored, nothing else lost */
    tc_sb p = TC_SB_INIT;
    tc_payload_encode_task_module(t->s->r->image, t->s->r->image_len, t->keys, contents, t->n,
                                  &p);
    tc_session_write_record(t->s, TC_REC_MODULE, &t->module_key, &p);
    tc_sb_free(&p);
    free(contents);
}

tc_status tc_taskset_fill_result(tc_taskset *t)
{
    tc_result *r = t->s->r;
    size_t total = 0;
    for (size_t i = 0; i < t->n; i++)
        total += t->units[i].u.nentries;
    r->entries = calloc(total ? total : 1, sizeof *r->entries);
    r->tasks = calloc(t->n, sizeof *r->tasks);
    if (!r->entries || !r->tasks)
        return TC_ERR_NOMEM;
    for (size_t i = 0; i < t->n; i++) {
        tc_task_unit *x = &t->units[i];
        tc_unit *u = &x->u;
        tc_task_info *ti = &r->tasks[i];
        ti->first_entry = (uint32_t)r->nentries;
        ti->entry_count = (uint32_t)u->nentries;
        for (size_t k = 0; k < u->nentries; k++) {
            tc_entry_info *e = &r->entries[r->nentries++];
            *e = u->entries[k];
            memset(&u->entries[k], 0, sizeof u->entries[k]);
            e->unit = (uint32_t)i;
            e->cached = u->hit;
            if (tc_entry_set_key(&e->unit_key, u->hex) != 0)
                return TC_ERR_NOMEM;
        }
        u->nentries = 0;
        r->ntasks = i + 1;
        ti->name = strdup(x->name);
        ti->key = strdup(u->hex);
        ti->cached = u->hit;
        ti->codegen_ran = x->codegen_ran;
        if (u->have_meta) {
            void *m = malloc(u->meta.len ? u->meta.len : 1);
            if (!m)
                return TC_ERR_NOMEM;
            memcpy(m, u->meta.data, u->meta.len);
            ti->metadata = m;
            ti->metadata_size = u->meta.len;
        }
        if (!ti->name || !ti->key)
            return TC_ERR_NOMEM;
    }
    r->report.entries = (uint32_t)r->nentries;
    r->report.units = (uint32_t)t->n;
    r->report.split = 1;
    r->report.in_process = t->s->in_process;
    r->report.nvjitlink = t->s->linker.kind == TC_LINKER_NVJITLINK;
    return TC_OK;
}

/* ---- generating and compiling misses ---------------------------------------------- */

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const tc_entry_info *)a)->name, ((const tc_entry_info *)b)->name);
}

/* The functions a PTX text may declare .extern without another object
 * defining them: the device runtime's system calls, which the compiler
 * itself resolves (printf in Warp's deterministic mode, assert, malloc). */
static const char *const system_calls[] = {"vprintf", "malloc", "free", "__assertfail"};

/* Whether an .extern declaration names nothing another object defines:
 * a system call, or dynamic .shared memory (an array of no size). */
static int extern_is_nobodys(const tc_ptx_module *m, const tc_ptx_stmt *st)
{
    if (st->sym < 0)
        return 0;
    const tc_ptx_sym *y = &m->syms[st->sym];
    if (st->kind == TC_STMT_VAR)
        return st->space == TC_SPACE_SHARED &&
               memmem(m->src + st->start, st->end - st->start, "[]", 2) != NULL;
    for (size_t i = 0; i < sizeof system_calls / sizeof system_calls[0]; i++)
        if (y->len == strlen(system_calls[i]) && !memcmp(y->name, system_calls[i], y->len))
            return 1;
    return 0;
}

/* Whether a task's parsed text can be compiled as a whole program (ptxas
 * -ewp) and linked with other objects. Not when it holds what such code
 * cannot carry into a link: .const data or texture, surface and sampler
 * references (read at fixed offsets with no relocation: another object's
 * data moves them; src/ptx/slice.c, whole-program units), calls through a
 * register or a function's address taken (../shared/repro/ewp_fnptr.cu),
 * declarations of what another object defines, or symbols it shares with
 * the others (a whole program keeps them to itself, so a symbol two tasks
 * define would no longer fail the link): only kernels may be visible. Nor
 * when the parser was unsure of the text (m->whole_reason). */
static int whole_program_safe(const tc_ptx_module *m)
{
    if (m->whole_reason[0])
        return 0;
    for (size_t i = 0; i < m->nstmts; i++) {
        const tc_ptx_stmt *st = &m->stmts[i];
        if (st->own_const || st->indirect_call)
            return 0;
        if (st->kind != TC_STMT_VAR && st->kind != TC_STMT_FUNC)
            continue;
        if (st->linkage == TC_LINK_WEAK || st->linkage == TC_LINK_COMMON ||
            (st->linkage == TC_LINK_VISIBLE && !st->is_entry) ||
            (st->linkage == TC_LINK_EXTERN && !extern_is_nobodys(m, st)))
            return 0;
        if (st->kind == TC_STMT_VAR && st->space == TC_SPACE_CONST)
            return 0;
    }
    /* textures, surfaces and samplers, wherever declared (module scope,
     * kernel parameters, .tex space) */
    static const char *const handles[] = {".tex", ".surf", ".sampler"};
    for (size_t i = 0; i < sizeof handles / sizeof handles[0]; i++)
        if (memmem(m->src, m->len, handles[i], strlen(handles[i])))
            return 0;
    for (size_t i = 0; i < m->nrefs; i++)
        if ((m->refs[i].how & TC_REF_USE) && m->syms[m->refs[i].sym].kind == TC_SYM_FUNC)
            return 0;
    return 1;
}

/* The kernels of a task's PTX, name order, with their metadata; and
 * whether it may compile as a whole program (one parse for both). */
static int task_entries(tc_task_unit *x, tc_sb *diag)
{
    tc_ptx_module m;
    tc_ptx_error perr;
    if (tc_ptx_parse(x->gen.ptx.data, x->gen.ptx.len, &m, &perr) != 0) {
        if (perr.line)
            tc_sb_printf(diag, "%s:%u: error: %s\n", x->name, perr.line, perr.message);
        return -1;
    }
    tc_unit *u = &x->u;
    int rc = 0;
    x->whole_program_safe = whole_program_safe(&m);
    u->entries = calloc(m.nentries ? m.nentries : 1, sizeof *u->entries);
    for (size_t i = 0; u->entries && i < m.nsyms && rc == 0; i++) {
        const tc_ptx_sym *y = &m.syms[i];
        if (y->is_entry && y->def >= 0) {
            rc = tc_entry_from_stmt(&m, &m.stmts[y->def], &u->entries[u->nentries]);
            if (rc == 0)
                u->nentries++;
        }
    }
    if (!u->entries)
        rc = -1;
    else
        qsort(u->entries, u->nentries, sizeof *u->entries, cmp_entry);
    tc_ptx_module_free(&m);
    return rc;
}

/* A codegen call of the host is running in an enclosing build, suspended
 * until this one returns. */
static int nested_in_host(const tc_taskset *t)
{
    for (const tc_taskset *p = t->parent; p; p = p->parent)
        if (p->serial == t->serial)
            return 1;
    return 0;
}

/* Serialized codegen runs one call at a time per host across every build
 * of the process. A build started from inside a codegen call of the same
 * host cannot wait for that call (it waits for the build): its calls take
 * turns among themselves while the enclosing call is suspended. */
static void run_codegen(tc_taskset *t, size_t i, tc_task_unit *x)
{
    tc_serial *host_turn = NULL;
    pthread_mutex_t *call_turn = NULL;
    if (t->host->serialize_codegen) {
        if (t->serial && !nested_in_host(t))
            host_turn = t->serial;
        else
            call_turn = &t->codegen_lock; /* nested, or no memory for the registry */
    }
    if (host_turn)
        tc_serial_lock(host_turn);
    else if (call_turn)
        pthread_mutex_lock(call_turn);
    const tc_taskset *outer = in_codegen;
    in_codegen = t;
    double t0 = tc_now();
    t->host->codegen(t->host->user, i, &t->tasks[i], &x->gen);
    tc_session_event(t->s, "codegen", x->name, t0);
    in_codegen = outer;
    if (host_turn)
        tc_serial_unlock(host_turn);
    else if (call_turn)
        pthread_mutex_unlock(call_turn);
}

/* The host cancelled: through a codegen call, or its flag. */
static int cancelled(void *ctx)
{
    tc_taskset *t = ctx;
    return __atomic_load_n(&t->cancelled, __ATOMIC_RELAXED) || tc_options_cancelled(t->s->o);
}

/* How a task's text is compiled: as a whole program (ptxas -ewp) where
 * whole-program units link (libnvJitLink) and whole_program_safe, so that
 * its kernels get the code a whole-module build gives them (Warp's
 * per-kernel PTX compiled relocatable took 2 to 6 registers more than in
 * Warp's own module, or 3 fewer), else relocatable (-c). The choice follows
 * from the text, so the key (which names only the rules: tc_taskset_mode)
 * still names one image. */
static tc_out_kind task_kind(const tc_session *s, const tc_task_unit *x)
{
    return s->unit_code == TC_UNIT_CODE_WHOLE_PROGRAM && x->whole_program_safe ? TC_OUT_EWP
                                                                               : TC_OUT_OBJECT;
}

const char *tc_taskset_mode(const tc_session *s, char *buf, size_t n)
{
    char mode[96];
    int whole = s->unit_code == TC_UNIT_CODE_WHOLE_PROGRAM;
    /* the rules of task_kind, numbered: records of other rules are not this
     * build's (a text judged safe before may not be now) */
    snprintf(buf, n, "%s", whole ? "whole programs where safe (rules 3): " : "relocatable: ");
    size_t used = strlen(buf);
    snprintf(buf + used, n - used, "%s",
             tc_session_unit_mode(s, whole ? TC_OUT_EWP : TC_OUT_OBJECT, "", 0, mode,
                                  sizeof mode));
    return buf;
}

static void generate_and_compile_task(tc_taskset *t, size_t i)
{
    tc_session *s = t->s;
    tc_task_unit *x = &t->units[i];
    tc_unit *u = &x->u;
    run_codegen(t, i, x);
    x->codegen_ran = 1;
    if (x->gen.cancel)
        __atomic_store_n(&t->cancelled, 1, __ATOMIC_RELAXED);
    if (cancelled(t))
        return; /* nothing of a cancelled build is compiled or stored */
    if (x->gen.error || !x->gen.ptx.len || x->gen.ptx.oom) {
        if (!x->gen.error)
            x->gen.error = strdup(x->gen.ptx.oom ? "out of memory" : "codegen produced no PTX");
        x->failed = 1;
        return;
    }
    if (task_entries(x, &u->log) != 0) {
        x->failed = 1;
        return;
    }
    char name[48];
    snprintf(name, sizeof name, "task%zu.ptx", i);
    char *path = s->in_process ? NULL : tc_path_join(s->scratch, name);
    if ((!s->in_process && (!path || tc_write_file(path, x->gen.ptx.data, x->gen.ptx.len) != 0)) ||
        tc_session_compile(s, task_kind(s, x), x->name,
                           x->gen.ptx.data, x->gen.ptx.len, path, &u->object, &u->log,
                           &u->exit_code) != 0) {
        tc_sb_printf(&u->log, "%s: error: cannot run the compiler: %s\n", x->name,
                     strerror(errno ? errno : EIO));
        x->failed = 1;
    } else if (u->exit_code != 0) {
        x->failed = 1;
    } else {
        tc_sb_free(&u->meta); /* a regenerated task's, read from its record */
        u->meta = x->gen.meta;
        u->have_meta = x->gen.have_meta;
        memset(&x->gen.meta, 0, sizeof x->gen.meta);
        if (tc_entries_take_resources(u->entries, u->nentries, u->log.data ? u->log.data : "",
                                      u->log.len) != 0)
            x->failed = 1;
    }
    if (path && !s->in_process)
        unlink(path);
    free(path);
}

static tc_pool_step generate_and_compile(void *ctx, size_t i)
{
    tc_taskset *t = ctx;
    generate_and_compile_task(t, i);
    tc_session_progress_step(t->s);
    return TC_POOL_DONE;
}

/* Generates and compiles todo[next, ntodo): the misses, or later the
 * cached tasks being regenerated. */
static tc_status run_misses(tc_taskset *t)
{
    tc_session *s = t->s;
    size_t from = t->next, count = t->ntodo - t->next;
    if (count)
        tc_linker_prewarm(&s->linker, s->o->arch); /* the linker's first use, meanwhile */
    double start = tc_now();
    tc_session_progress_begin(s, count);
    tc_pool_work w = {t->todo + from, count, s->o->jobs, generate_and_compile, cancelled, t};
    if (tc_pool_run(&w) != 0)
        return TC_ERR_NOMEM;
    t->next = t->ntodo;
    s->r->report.seconds_compile += tc_now() - start;
    if (cancelled(t)) {
        size_t ran = 0;
        for (size_t k = from; k < t->ntodo; k++)
            ran += t->units[t->todo[k]].codegen_ran;
        s->r->report.codegen_calls += (uint32_t)ran;
        s->delta.v[TC_C_CODEGEN] += ran;
        return tc_session_fail(s, TC_ERR_CANCELLED, "the host cancelled the build");
    }
    s->r->report.units_compiled = (uint32_t)t->ntodo;
    s->r->report.codegen_calls = (uint32_t)t->ntodo;
    s->delta.v[TC_C_CODEGEN] += count;
    tc_status st = TC_OK;
    for (size_t k = from; k < t->ntodo; k++) {
        tc_task_unit *x = &t->units[t->todo[k]];
        tc_unit *u = &x->u;
        if (x->gen.error) {
            tc_sb_printf(&s->r->diag, "%s: error: codegen: %s\n", x->name, x->gen.error);
            st = TC_ERR_COMPILE;
            continue;
        }
        if (x->codegen_ran && x->gen.ptx.len)
            s->delta.v[TC_C_COMPILES]++;
        size_t errors = tc_ptxas_diagnostics(u->log.data ? u->log.data : "", u->log.len, NULL,
                                             x->name, &s->r->diag);
        if (x->failed) {
            /* parse errors were written into the log as diagnostics already */
            if (!errors && u->log.len && strstr(u->log.data, ": error: "))
                tc_sb_append(&s->r->diag, u->log.data, u->log.len);
            else if (!errors)
                tc_sb_printf(&s->r->diag, "%s: error: compile failed\n", x->name);
            st = TC_ERR_COMPILE;
        }
    }
    return st;
}

/* ---- tc_build_tasks --------------------------------------------------------------- */

/* The link failed and some tasks came from the cache. A record is never
 * wrong for its key, but a host key can leave out something the task's
 * code depends on (a symbol another task defines, say), and a missing or
 * stale record must never be an error: generate the cached tasks again,
 * once, and link again. The first link's messages are dropped either way:
 * what is reported is the link of what was built last. */
static tc_status regenerate_cached(tc_taskset *t, size_t diag_mark)
{
    tc_result *r = t->s->r;
    size_t first = t->ntodo;
    for (size_t i = 0; i < t->n; i++) {
        tc_unit *u = &t->units[i].u;
        if (!u->hit)
            continue;
        tc_unit_clear(u);
        u->hit = 0;
        t->todo[t->ntodo++] = i;
    }
    size_t count = t->ntodo - first;
    if (!count)
        return TC_ERR_LINK;
    if (r->diag.data) {
        r->diag.len = diag_mark;
        r->diag.data[diag_mark] = '\0';
    }
    r->report.unit_hits -= (uint32_t)count;
    tc_status st = run_misses(t);
    free(r->image);
    r->image = NULL;
    r->image_len = 0;
    if (st == TC_OK && (st = tc_taskset_link(t)) == TC_OK)
        tc_sb_printf(&r->diag,
                     "%s: note: the %zu cached task%s did not link with the others; "
                     "regenerated %s\n",
                     t->s->name, count, count == 1 ? "" : "s", count == 1 ? "it" : "them");
    return st;
}

/* A task is its name and its key bytes. Hosts name the kernels they emit
 * after their tasks, so the name is part of the key: a record is never
 * served to a task of another name. Length-prefixed, so no two (name,
 * key) pairs hash the same bytes. */
static int task_key(tc_session *s, const char *version, const tc_task *task, tc_digest *out)
{
    const char *name = task->name ? task->name : "";
    size_t nl = strlen(name);
    char head[32];
    size_t hl = (size_t)snprintf(head, sizeof head, "%zu:", nl);
    size_t len = hl + nl + task->key_size;
    char *buf = malloc(len);
    if (!buf)
        return -1;
    memcpy(buf, head, hl);
    memcpy(buf + hl, name, nl);
    if (task->key_size)
        memcpy(buf + hl + nl, task->key, task->key_size);
    char mode[160];
    int rc = tc_key_task(&s->kc, tc_taskset_mode(s, mode, sizeof mode), version, buf, len, out);
    free(buf);
    return rc;
}

typedef struct keyed {
    tc_digest key;
    size_t index;
} keyed;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    int c = memcmp(x->key.b, y->key.b, TC_DIGEST_LEN);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Two tasks of one group with one key would share one record (the last
 * write wins) and define the same kernels twice: refuse before any work,
 * naming both. */
static tc_status check_distinct(tc_taskset *t)
{
    keyed *k = malloc(t->n * sizeof *k);
    if (!k)
        return TC_ERR_NOMEM;
    for (size_t i = 0; i < t->n; i++) {
        k[i].key = t->units[i].u.key;
        k[i].index = i;
    }
    qsort(k, t->n, sizeof *k, cmp_keyed);
    tc_status st = TC_OK;
    for (size_t i = 1; i < t->n && st == TC_OK; i++)
        if (!memcmp(k[i - 1].key.b, k[i].key.b, TC_DIGEST_LEN))
            st = tc_session_fail(t->s, TC_ERR_INVALID,
                                 "task %zu (%s) and task %zu (%s) have the same name and key: a "
                                 "group holds each task once, and a task's key must cover "
                                 "everything its PTX depends on",
                                 k[i - 1].index, t->units[k[i - 1].index].name, k[i].index,
                                 t->units[k[i].index].name);
    free(k);
    return st;
}

/* Names and keys every task; reads every task record (hit or not for the
 * module, each one is verified). */
static tc_status key_and_look_up(tc_taskset *t)
{
    tc_session *s = t->s;
    for (size_t i = 0; i < t->n; i++) {
        tc_task_unit *x = &t->units[i];
        const tc_task *task = &t->tasks[i];
        char fallback[32];
        snprintf(fallback, sizeof fallback, "task %zu", i);
        x->name = strdup(task->name && *task->name ? task->name : fallback);
        if (!x->name || task_key(s, t->host->version, task, &x->u.key) != 0)
            return TC_ERR_NOMEM;
        tc_digest_hex(&x->u.key, x->u.hex);
    }
    tc_status st = check_distinct(t);
    if (st != TC_OK)
        return st;
    if (tc_taskset_module_key(t, t->host->version) != 0)
        return TC_ERR_NOMEM;
    int use_cache = s->store && s->o->unit_tier;
    if (use_cache && tc_taskset_read(t) != 0)
        return TC_ERR_NOMEM;
    for (size_t i = 0; i < t->n; i++) {
        tc_unit *u = &t->units[i].u;
        if (u->hit) {
            s->delta.v[TC_C_TASK_HITS]++;
            s->r->report.unit_hits++;
        } else {
            t->todo[t->ntodo++] = i;
            if (use_cache)
                s->delta.v[TC_C_TASK_MISSES]++;
        }
    }
    return TC_OK;
}

/* Stores what this call made: task records, the module, the manifest. */
static tc_status store_results(tc_taskset *t, int module_hit)
{
    tc_session *s = t->s;
    const tc_host *host = t->host;
    for (size_t k = 0; s->o->unit_tier && k < t->ntodo; k++) {
        tc_task_unit *x = &t->units[t->todo[k]];
        tc_payload_write_unit(s, TC_REC_TASK, x->name, &x->u);
    }
    if (!module_hit && s->o->module_tier)
        tc_taskset_store_module(t);
    /* a manifest names task records: it lives and dies with their tier */
    if (host->group_key && s->o->unit_tier) {
        tc_digest g;
        char mode[160];
        if (tc_key_group(&s->kc, tc_taskset_mode(s, mode, sizeof mode), host->version,
                         host->group_key, host->group_key_size, &g) != 0)
            return TC_ERR_NOMEM;
        char **names = malloc(t->n * sizeof *names);
        if (names) {
            for (size_t i = 0; i < t->n; i++)
                names[i] = t->units[i].name;
            tc_sb p = TC_SB_INIT;
            tc_payload_encode_group(t->keys, names, t->n, &p);
            tc_session_write_record(s, TC_REC_GROUP, &g, &p);
            tc_sb_free(&p);
        }
        free(names);
    }
    return TC_OK;
}

static tc_status build_tasks(tc_taskset *t)
{
    tc_session *s = t->s;
    if (cancelled(t))
        return tc_session_fail(s, TC_ERR_CANCELLED, "the host cancelled the build");
    tc_status st = tc_session_prepare(s, 1); /* tasks always link */
    if (st == TC_OK)
        st = key_and_look_up(t);
    if (st != TC_OK)
        return st;
    if (t->ntodo) {
        if (!t->host->codegen)
            return tc_session_fail(s, TC_ERR_INVALID,
                                   "tasks are missing and no codegen was given");
        if (!tc_session_files_ready(s))
            return TC_ERR_IO;
        if ((st = run_misses(t)) != TC_OK)
            return st;
    }
    int module_hit = !t->ntodo && s->store && s->o->module_tier && tc_taskset_module_hit(t);
    if (module_hit) {
        s->r->report.module_hit = 1;
        s->delta.v[TC_C_MODULE_HITS]++;
    } else {
        if (s->store && s->o->module_tier)
            s->delta.v[TC_C_MODULE_MISSES]++;
        if (!tc_session_files_ready(s))
            return TC_ERR_IO;
        if (cancelled(t))
            return tc_session_fail(s, TC_ERR_CANCELLED, "the host cancelled the build");
        size_t mark = s->r->diag.len;
        if ((st = tc_taskset_link(t)) == TC_ERR_LINK && t->host->codegen)
            st = regenerate_cached(t, mark);
        if (st != TC_OK)
            return st;
    }
    if (s->store && (st = store_results(t, module_hit)) != TC_OK)
        return st;
    return tc_taskset_fill_result(t);
}

tc_status tc_build_tasks(tc_cache *cache, const tc_options *opts, const tc_host *host,
                         const tc_task *tasks, size_t ntasks, tc_result **out)
{
    if (!out)
        return TC_ERR_INVALID;
    *out = NULL;
    /* tasks always link one image: an object of a task set is not offered */
    if (!opts || !host || !tasks || !ntasks || !host->version || opts->output != TC_OUTPUT_IMAGE)
        return TC_ERR_INVALID;
    for (size_t i = 0; i < ntasks; i++)
        if (!tasks[i].key && tasks[i].key_size)
            return TC_ERR_INVALID;
    tc_session s;
    if (tc_session_begin(&s, TC_CALL_BUILD, cache, opts, "tasks") != 0)
        return TC_ERR_NOMEM;
    tc_taskset t;
    tc_status st = tc_taskset_init(&t, &s, ntasks) == 0 ? TC_OK : TC_ERR_NOMEM;
    t.host = host;
    t.tasks = tasks;
    t.parent = in_codegen;
    if (host->serialize_codegen && host->codegen)
        t.serial = tc_serial_acquire(host->codegen, host->user);
    if (st == TC_OK)
        st = build_tasks(&t);
    tc_taskset_free(&t);
    *out = tc_session_finish(&s, st);
    return st;
}
