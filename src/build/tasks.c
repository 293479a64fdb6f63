/* tasks: builds driven by a host JIT (tc_build_tasks, tc_lookup_group).
 * The host keys each task by the bytes that determine it, before its own
 * codegen; only tasks the cache lacks are generated (host callback, on the
 * worker threads) and compiled. Task records carry everything a loader
 * needs, the host's metadata included. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../compile/ptxas.h"
#include "../store/record.h"
#include "../util/fs.h"
#include "build.h"
#include "payload.h"
#include "serial.h"

struct tc_codegen {
    tc_sb ptx;
    tc_sb meta;
    int have_meta;
    char *error;
    int cancel;     /* tc_codegen_cancel */
};

void tc_codegen_set_ptx(tc_codegen *g, const void *ptx, size_t size)
{
    /* the text ends at the first NUL, as for tc_build: a JIT's PTX string
     * often comes with its terminator */
    tc_sb_reset(&g->ptx);
    tc_sb_append(&g->ptx, ptx, ptx ? tc_ptx_text_len(ptx, size) : 0);
}

void tc_codegen_set_metadata(tc_codegen *g, const void *data, size_t size)
{
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

typedef struct slot {
    char *name;
    tc_digest key;
    char hex[TC_DIGEST_HEX_LEN + 1];
    int hit, codegen_ran, failed, exit_code;
    struct tc_codegen gen;    /* codegen output (misses) */
    tc_sb object, log, meta;
    int have_meta;
    tc_entry_info *entries;   /* its kernels, name order */
    size_t nentries;
} slot;

typedef struct job job;
struct job {
    tc_build_ctx *b;
    const tc_host *host;
    const tc_task *tasks;
    slot *slots;
    size_t n;
    size_t *todo, ntodo, next;
    pthread_mutex_t lock, codegen_lock;
    tc_serial *serial;   /* serialize_codegen: the host's turn, across calls */
    int cancelled;       /* a codegen call cancelled the build (atomic) */
    const job *parent;   /* the build whose codegen called this one, if any */
    int inited;
    tc_digest module_key;
};

/* The build whose codegen the current thread is running, if any: a build
 * started from inside codegen is nested in it. */
static _Thread_local const job *in_codegen;

static void slot_free(slot *s)
{
    free(s->name);
    tc_sb_free(&s->gen.ptx);
    tc_sb_free(&s->gen.meta);
    free(s->gen.error);
    tc_sb_free(&s->object);
    tc_sb_free(&s->log);
    tc_sb_free(&s->meta);
    for (size_t i = 0; i < s->nentries; i++)
        tc_entry_clear(&s->entries[i]);
    free(s->entries);
}

/* ---- task records ------------------------------------------------------------ */

static int decode_task(void *ctx, const char *payload, size_t len)
{
    slot *s = ctx;
    tc_object_payload o;
    if (tc_payload_decode_object(payload, len, &o) != 0)
        return -1;
    s->object = o.object;
    s->log = o.log;
    s->meta = o.meta;
    s->have_meta = o.have_meta;
    s->entries = o.entries;
    s->nentries = o.nentries;
    return 0;
}

static void reset_slot_payload(void *ctx)
{
    slot *s = ctx;
    tc_sb_reset(&s->object);
    tc_sb_reset(&s->log);
    tc_sb_reset(&s->meta);
    s->have_meta = 0;
    for (size_t i = 0; i < s->nentries; i++)
        tc_entry_clear(&s->entries[i]);
    free(s->entries);
    s->entries = NULL;
    s->nentries = 0;
}

/* Reads and verifies a task record. 1 hit, 0 miss. */
static int load_task(tc_build_ctx *b, slot *s)
{
    return tc_build_read_record(b, TC_REC_TASK, &s->key, 1, decode_task, reset_slot_payload, s);
}

static void store_task(tc_build_ctx *b, slot *s)
{
    tc_sb p = TC_SB_INIT, e = TC_SB_INIT;
    tc_field_put(&p, TC_F_NAME, s->name, strlen(s->name));
    tc_field_put(&p, TC_F_OBJECT, s->object.data, s->object.len);
    for (size_t i = 0; i < s->nentries; i++) {
        tc_sb_reset(&e);
        tc_entry_encode(&s->entries[i], &e);
        tc_field_put(&p, TC_F_ENTRY, e.data, e.len);
    }
    if (s->have_meta)
        tc_field_put(&p, TC_F_HOST_META, s->meta.data, s->meta.len);
    if (s->log.len)
        tc_field_put(&p, TC_F_LOG, s->log.data, s->log.len);
    if (!p.oom)
        tc_build_count_put(b, tc_store_put(b->store, b->o->arch, TC_REC_TASK, &s->key, p.data,
                                           p.len));
    tc_sb_free(&p);
    tc_sb_free(&e);
}

/* ---- generating and compiling misses ---------------------------------------------- */

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const tc_entry_info *)a)->name, ((const tc_entry_info *)b)->name);
}

/* The kernels of a task's PTX, name order, with their metadata. */
static int task_entries(slot *s, tc_sb *diag)
{
    tc_ptx_module m;
    tc_ptx_error perr;
    if (tc_ptx_parse(s->gen.ptx.data, s->gen.ptx.len, &m, &perr) != 0) {
        if (perr.line)
            tc_sb_printf(diag, "%s:%u: error: %s\n", s->name, perr.line, perr.message);
        return -1;
    }
    int rc = 0;
    s->entries = calloc(m.nentries ? m.nentries : 1, sizeof *s->entries);
    for (size_t i = 0; s->entries && i < m.nsyms && rc == 0; i++) {
        const tc_ptx_sym *y = &m.syms[i];
        if (y->is_entry && y->def >= 0) {
            rc = tc_entry_from_stmt(&m, &m.stmts[y->def], &s->entries[s->nentries]);
            if (rc == 0)
                s->nentries++;
        }
    }
    if (!s->entries)
        rc = -1;
    else
        qsort(s->entries, s->nentries, sizeof *s->entries, cmp_entry);
    tc_ptx_module_free(&m);
    return rc;
}

/* A codegen call of the host is running in an enclosing build, suspended
 * until this one returns. */
static int nested_in_host(const job *j)
{
    for (const job *p = j->parent; p; p = p->parent)
        if (p->serial == j->serial)
            return 1;
    return 0;
}

/* Serialized codegen runs one call at a time per host across every build
 * of the process. A build started from inside a codegen call of the same
 * host cannot wait for that call (it waits for the build): its calls take
 * turns among themselves while the enclosing call is suspended. */
static void run_codegen(job *j, size_t i, slot *s)
{
    tc_serial *host_turn = NULL;
    pthread_mutex_t *call_turn = NULL;
    if (j->host->serialize_codegen) {
        if (j->serial && !nested_in_host(j))
            host_turn = j->serial;
        else
            call_turn = &j->codegen_lock; /* nested, or no memory for the registry */
    }
    if (host_turn)
        tc_serial_lock(host_turn);
    else if (call_turn)
        pthread_mutex_lock(call_turn);
    const job *outer = in_codegen;
    in_codegen = j;
    j->host->codegen(j->host->user, i, &j->tasks[i], &s->gen);
    in_codegen = outer;
    if (host_turn)
        tc_serial_unlock(host_turn);
    else if (call_turn)
        pthread_mutex_unlock(call_turn);
}

/* The host cancelled: through a codegen call, or its flag. */
static int cancelled(job *j)
{
    return __atomic_load_n(&j->cancelled, __ATOMIC_RELAXED) || tc_options_cancelled(j->b->o);
}

static void generate_and_compile(job *j, size_t i)
{
    tc_build_ctx *b = j->b;
    slot *s = &j->slots[i];
    run_codegen(j, i, s);
    s->codegen_ran = 1;
    if (s->gen.cancel)
        __atomic_store_n(&j->cancelled, 1, __ATOMIC_RELAXED);
    if (cancelled(j))
        return; /* nothing of a cancelled build is compiled or stored */
    if (s->gen.error || !s->gen.ptx.len || s->gen.ptx.oom) {
        if (!s->gen.error)
            s->gen.error = strdup(s->gen.ptx.oom ? "out of memory" : "codegen produced no PTX");
        s->failed = 1;
        return;
    }
    if (task_entries(s, &s->log) != 0) {
        s->failed = 1;
        return;
    }
    char name[48];
    snprintf(name, sizeof name, "task%zu.ptx", i);
    char *path = tc_path_join(b->scratch, name);
    if (!path || (!b->in_process && tc_write_file(path, s->gen.ptx.data, s->gen.ptx.len) != 0) ||
        tc_build_compile(b, TC_OUT_OBJECT, s->gen.ptx.data, s->gen.ptx.len, path, &s->object,
                         &s->log,
                         &s->exit_code) != 0) {
        tc_sb_printf(&s->log, "%s: error: cannot run the compiler: %s\n", s->name,
                     strerror(errno ? errno : EIO));
        s->failed = 1;
    } else if (s->exit_code != 0) {
        s->failed = 1;
    } else {
        s->meta = s->gen.meta;
        s->have_meta = s->gen.have_meta;
        memset(&s->gen.meta, 0, sizeof s->gen.meta);
        if (tc_build_resources_from_log(s->entries, s->nentries, s->log.data ? s->log.data : "",
                                        s->log.len) != 0)
            s->failed = 1;
    }
    free(path);
}

static void *worker(void *arg)
{
    job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->lock);
        size_t k = j->next < j->ntodo && !cancelled(j) ? j->todo[j->next++] : (size_t)-1;
        pthread_mutex_unlock(&j->lock);
        if (k == (size_t)-1)
            return NULL;
        generate_and_compile(j, k);
    }
}

/* Generates and compiles todo[j->next, ntodo): the misses, or later the
 * cached tasks being regenerated. */
static tc_status run_misses(job *j)
{
    tc_build_ctx *b = j->b;
    size_t from = j->next, count = j->ntodo - j->next;
    if (count)
        tc_linker_prewarm(&b->linker, b->o->arch); /* the linker's first use, meanwhile */
    size_t nthreads = (size_t)b->o->jobs < count ? (size_t)b->o->jobs : count;
    pthread_t *threads = calloc(nthreads ? nthreads : 1, sizeof *threads);
    size_t started = 0;
    double t = tc_build_now();
    if (threads && nthreads > 1)
        for (; started < nthreads; started++)
            if (pthread_create(&threads[started], NULL, worker, j) != 0)
                break;
    if (started == 0)
        worker(j);
    for (size_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    free(threads);
    b->r->report.seconds_compile += tc_build_now() - t;
    if (cancelled(j)) {
        size_t ran = 0;
        for (size_t k = from; k < j->ntodo; k++)
            ran += j->slots[j->todo[k]].codegen_ran;
        b->r->report.codegen_calls += (uint32_t)ran;
        b->delta.v[TC_C_CODEGEN] += ran;
        return tc_build_fail(b, TC_ERR_CANCELLED, "the host cancelled the build");
    }
    b->r->report.units_compiled = (uint32_t)j->ntodo;
    b->r->report.codegen_calls = (uint32_t)j->ntodo;
    b->delta.v[TC_C_CODEGEN] += count;
    tc_status st = TC_OK;
    for (size_t k = from; k < j->ntodo; k++) {
        slot *s = &j->slots[j->todo[k]];
        if (s->gen.error) {
            tc_sb_printf(&b->r->diag, "%s: error: codegen: %s\n", s->name, s->gen.error);
            st = TC_ERR_COMPILE;
            continue;
        }
        if (s->codegen_ran && s->gen.ptx.len)
            b->delta.v[TC_C_COMPILES]++;
        size_t errors = tc_ptxas_diagnostics(s->log.data ? s->log.data : "", s->log.len, NULL,
                                             s->name, &b->r->diag);
        if (s->failed) {
            /* parse errors were written into the log as diagnostics already */
            if (!errors && s->log.len && strstr(s->log.data, ": error: "))
                tc_sb_append(&b->r->diag, s->log.data, s->log.len);
            else if (!errors)
                tc_sb_printf(&b->r->diag, "%s: error: compile failed\n", s->name);
            st = TC_ERR_COMPILE;
        }
    }
    return st;
}

/* ---- the linked module --------------------------------------------------------- */

static int module_record_image(job *j)
{
    tc_build_ctx *b = j->b;
    char *payload = NULL;
    size_t len = 0;
    int bad = 0;
    if (!tc_store_get(b->store, b->o->arch, TC_REC_MODULE, &j->module_key, &payload, &len, &bad)) {
        b->delta.v[TC_C_BAD_RECORDS] += bad;
        return 0;
    }
    tc_reader rd;
    tc_reader_init(&rd, payload, len);
    uint32_t tag;
    const unsigned char *p;
    size_t n, k = 0;
    int rc, ok = 1;
    const unsigned char *image = NULL;
    size_t image_len = 0;
    while ((rc = tc_field_next(&rd, &tag, &p, &n)) == 1) {
        if (tag == TC_F_IMAGE) {
            image = p;
            image_len = n;
        } else if (tag == TC_F_TASK_KEY) {
            /* the record must name exactly the tasks we verified */
            ok &= k < j->n && n == TC_DIGEST_LEN && !memcmp(p, j->slots[k].key.b, n);
            k++;
        }
    }
    ok &= rc == 0 && image && k == j->n;
    if (ok && (b->r->image = malloc(image_len ? image_len : 1)) != NULL) {
        memcpy(b->r->image, image, image_len);
        b->r->image_len = image_len;
    } else {
        ok = 0;
        b->delta.v[TC_C_BAD_RECORDS] += rc != 0;
    }
    free(payload);
    return ok;
}

static tc_status link_tasks(job *j)
{
    tc_blob *objs = malloc(j->n * sizeof *objs);
    if (!objs)
        return TC_ERR_NOMEM;
    for (size_t i = 0; i < j->n; i++) {
        objs[i].p = j->slots[i].object.data;
        objs[i].n = j->slots[i].object.len;
    }
    tc_status st = tc_build_link(j->b, objs, j->n);
    free(objs);
    return st;
}

static void store_module(job *j)
{
    tc_sb p = TC_SB_INIT;
    tc_field_put(&p, TC_F_IMAGE, j->b->r->image, j->b->r->image_len);
    for (size_t i = 0; i < j->n; i++)
        tc_field_put(&p, TC_F_TASK_KEY, j->slots[i].key.b, TC_DIGEST_LEN);
    if (!p.oom)
        tc_build_count_put(j->b, tc_store_put(j->b->store, j->b->o->arch, TC_REC_MODULE,
                                              &j->module_key, p.data, p.len));
    tc_sb_free(&p);
}

static void store_group(job *j, const tc_digest *group)
{
    tc_sb p = TC_SB_INIT;
    for (size_t i = 0; i < j->n; i++) {
        tc_field_put(&p, TC_F_TASK_KEY, j->slots[i].key.b, TC_DIGEST_LEN);
        tc_field_put(&p, TC_F_NAME, j->slots[i].name, strlen(j->slots[i].name));
    }
    if (!p.oom)
        tc_build_count_put(j->b, tc_store_put(j->b->store, j->b->o->arch, TC_REC_GROUP, group,
                                              p.data, p.len));
    tc_sb_free(&p);
}

/* Moves the slots' entries and task infos into the result. */
static tc_status fill_result(job *j)
{
    tc_result *r = j->b->r;
    size_t total = 0;
    for (size_t i = 0; i < j->n; i++)
        total += j->slots[i].nentries;
    r->entries = calloc(total ? total : 1, sizeof *r->entries);
    r->tasks = calloc(j->n, sizeof *r->tasks);
    if (!r->entries || !r->tasks)
        return TC_ERR_NOMEM;
    for (size_t i = 0; i < j->n; i++) {
        slot *s = &j->slots[i];
        tc_task_info *t = &r->tasks[i];
        t->first_entry = (uint32_t)r->nentries;
        t->entry_count = (uint32_t)s->nentries;
        for (size_t k = 0; k < s->nentries; k++) {
            tc_entry_info *e = &r->entries[r->nentries++];
            *e = s->entries[k];
            memset(&s->entries[k], 0, sizeof s->entries[k]);
            e->unit = (uint32_t)i;
            e->cached = s->hit;
            if (tc_entry_set_key(&e->unit_key, s->hex) != 0)
                return TC_ERR_NOMEM;
        }
        s->nentries = 0;
        r->ntasks = i + 1;
        t->name = strdup(s->name);
        t->key = strdup(s->hex);
        t->cached = s->hit;
        t->codegen_ran = s->codegen_ran;
        if (s->have_meta) {
            void *m = malloc(s->meta.len ? s->meta.len : 1);
            if (!m)
                return TC_ERR_NOMEM;
            memcpy(m, s->meta.data, s->meta.len);
            t->metadata = m;
            t->metadata_size = s->meta.len;
        }
        if (!t->name || !t->key)
            return TC_ERR_NOMEM;
    }
    r->report.entries = (uint32_t)r->nentries;
    r->report.units = (uint32_t)j->n;
    r->report.split = 1;
    r->report.in_process = j->b->in_process;
    return TC_OK;
}

static void job_free(job *j)
{
    if (!j->inited)
        return;
    for (size_t i = 0; j->slots && i < j->n; i++)
        slot_free(&j->slots[i]);
    free(j->slots);
    free(j->todo);
    tc_serial_release(j->serial);
    pthread_mutex_destroy(&j->lock);
    pthread_mutex_destroy(&j->codegen_lock);
}

static int job_init(job *j, tc_build_ctx *b, size_t n)
{
    memset(j, 0, sizeof *j);
    j->b = b;
    j->n = n;
    j->inited = 1;
    pthread_mutex_init(&j->lock, NULL);
    pthread_mutex_init(&j->codegen_lock, NULL);
    j->slots = calloc(n ? n : 1, sizeof *j->slots);
    j->todo = calloc(n ? n : 1, sizeof *j->todo);
    return j->slots && j->todo ? 0 : -1;
}

/* ---- tc_build_tasks --------------------------------------------------------------- */

/* The link failed and some tasks came from the cache. A record is never
 * wrong for its key, but a host key can leave out something the task's
 * code depends on (a symbol another task defines, say), and a missing or
 * stale record must never be an error: generate the cached tasks again,
 * once, and link again. The first link's messages are dropped either way:
 * what is reported is the link of what was built last. */
static tc_status regenerate_cached(job *j, size_t diag_mark)
{
    tc_build_ctx *b = j->b;
    size_t first = j->ntodo;
    for (size_t i = 0; i < j->n; i++) {
        slot *s = &j->slots[i];
        if (!s->hit)
            continue;
        reset_slot_payload(s);
        s->hit = 0;
        j->todo[j->ntodo++] = i;
    }
    size_t count = j->ntodo - first;
    if (!count)
        return TC_ERR_LINK;
    if (b->r->diag.data) {
        b->r->diag.len = diag_mark;
        b->r->diag.data[diag_mark] = '\0';
    }
    b->r->report.unit_hits -= (uint32_t)count;
    tc_status st = run_misses(j);
    free(b->r->image);
    b->r->image = NULL;
    b->r->image_len = 0;
    if (st == TC_OK && (st = link_tasks(j)) == TC_OK)
        tc_sb_printf(&b->r->diag,
                     "%s: note: the %zu cached task%s did not link with the others; "
                     "regenerated %s\n",
                     b->name, count, count == 1 ? "" : "s", count == 1 ? "it" : "them");
    return st;
}

/* A task is its name and its key bytes. Hosts name the kernels they emit
 * after their tasks, so the name is part of the key: a record is never
 * served to a task of another name. Length-prefixed, so no two (name,
 * key) pairs hash the same bytes. */
static int task_key(tc_build_ctx *b, const char *version, const tc_task *t, tc_digest *out)
{
    const char *name = t->name ? t->name : "";
    size_t nl = strlen(name);
    char head[32];
    size_t hl = (size_t)snprintf(head, sizeof head, "%zu:", nl);
    size_t len = hl + nl + t->key_size;
    char *buf = malloc(len);
    if (!buf)
        return -1;
    memcpy(buf, head, hl);
    memcpy(buf + hl, name, nl);
    if (t->key_size)
        memcpy(buf + hl + nl, t->key, t->key_size);
    int rc = tc_key_task(&b->kc, version, buf, len, out);
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
static tc_status check_distinct(job *j)
{
    keyed *k = malloc(j->n * sizeof *k);
    if (!k)
        return TC_ERR_NOMEM;
    for (size_t i = 0; i < j->n; i++) {
        k[i].key = j->slots[i].key;
        k[i].index = i;
    }
    qsort(k, j->n, sizeof *k, cmp_keyed);
    tc_status st = TC_OK;
    for (size_t i = 1; i < j->n && st == TC_OK; i++)
        if (!memcmp(k[i - 1].key.b, k[i].key.b, TC_DIGEST_LEN))
            st = tc_build_fail(j->b, TC_ERR_INVALID,
                               "task %zu (%s) and task %zu (%s) have the same name and key: a "
                               "group holds each task once, and a task's key must cover "
                               "everything its PTX depends on",
                               k[i - 1].index, j->slots[k[i - 1].index].name, k[i].index,
                               j->slots[k[i].index].name);
    free(k);
    return st;
}

static tc_status build_tasks(job *j, const tc_host *host)
{
    tc_build_ctx *b = j->b;
    if (cancelled(j))
        return tc_build_fail(b, TC_ERR_CANCELLED, "the host cancelled the build");
    tc_status st = tc_build_prepare(b);
    if (st != TC_OK)
        return st;
    for (size_t i = 0; i < j->n; i++) {
        slot *s = &j->slots[i];
        const tc_task *t = &j->tasks[i];
        char fallback[32];
        snprintf(fallback, sizeof fallback, "task %zu", i);
        s->name = strdup(t->name && *t->name ? t->name : fallback);
        if (!s->name || task_key(b, host->version, t, &s->key) != 0)
            return TC_ERR_NOMEM;
        tc_digest_hex(&s->key, s->hex);
    }
    if ((st = check_distinct(j)) != TC_OK)
        return st;
    tc_digest *keys = malloc(j->n * sizeof *keys);
    if (!keys)
        return TC_ERR_NOMEM;
    for (size_t i = 0; i < j->n; i++)
        keys[i] = j->slots[i].key;
    int krc = tc_key_task_module(&b->kc, b->linker.id, host->version, keys, j->n, &j->module_key);
    free(keys);
    if (krc != 0)
        return TC_ERR_NOMEM;
    /* every task record is read and verified, hit or not for the module */
    int use_cache = b->store && b->o->unit_tier;
    for (size_t i = 0; i < j->n; i++) {
        slot *s = &j->slots[i];
        if (use_cache && load_task(b, s)) {
            s->hit = 1;
            b->delta.v[TC_C_TASK_HITS]++;
            b->r->report.unit_hits++;
        } else {
            j->todo[j->ntodo++] = i;
            if (use_cache)
                b->delta.v[TC_C_TASK_MISSES]++;
        }
    }
    if (j->ntodo) {
        if (!host->codegen)
            return tc_build_fail(b, TC_ERR_INVALID, "tasks are missing and no codegen was given");
        b->scratch = tc_make_temp_dir("taskcache");
        if (!b->scratch)
            return tc_build_fail(b, TC_ERR_IO, "cannot create a temporary directory: %s",
                                 strerror(errno));
        if ((st = run_misses(j)) != TC_OK)
            return st;
    }
    int module_hit = !j->ntodo && b->store && b->o->module_tier && module_record_image(j);
    if (module_hit) {
        b->r->report.module_hit = 1;
        b->delta.v[TC_C_MODULE_HITS]++;
    } else {
        if (b->store && b->o->module_tier)
            b->delta.v[TC_C_MODULE_MISSES]++;
        if (!b->scratch && !(b->scratch = tc_make_temp_dir("taskcache")))
            return tc_build_fail(b, TC_ERR_IO, "cannot create a temporary directory: %s",
                                 strerror(errno));
        if (cancelled(j))
            return tc_build_fail(b, TC_ERR_CANCELLED, "the host cancelled the build");
        size_t mark = b->r->diag.len;
        if ((st = link_tasks(j)) == TC_ERR_LINK && host->codegen)
            st = regenerate_cached(j, mark);
        if (st != TC_OK)
            return st;
    }
    if (b->store) {
        for (size_t k = 0; b->o->unit_tier && k < j->ntodo; k++)
            store_task(b, &j->slots[j->todo[k]]);
        if (!module_hit && b->o->module_tier)
            store_module(j);
        /* a manifest names task records: it lives and dies with their tier */
        if (host->group_key && b->o->unit_tier) {
            tc_digest g;
            if (tc_key_group(&b->kc, host->version, host->group_key, host->group_key_size, &g) != 0)
                return TC_ERR_NOMEM;
            store_group(j, &g);
        }
    }
    return fill_result(j);
}

tc_status tc_build_tasks(tc_cache *cache, const tc_options *opts, const tc_host *host,
                         const tc_task *tasks, size_t ntasks, tc_result **out)
{
    if (!out)
        return TC_ERR_INVALID;
    *out = NULL;
    if (!opts || !host || !tasks || !ntasks || !host->version)
        return TC_ERR_INVALID;
    for (size_t i = 0; i < ntasks; i++)
        if (!tasks[i].key && tasks[i].key_size)
            return TC_ERR_INVALID;
    tc_build_ctx b;
    if (tc_build_begin(&b, cache, opts, "tasks", 0) != 0)
        return TC_ERR_NOMEM;
    job j;
    tc_status st = job_init(&j, &b, ntasks) == 0 ? TC_OK : TC_ERR_NOMEM;
    j.host = host;
    j.tasks = tasks;
    j.parent = in_codegen;
    if (host->serialize_codegen && host->codegen)
        j.serial = tc_serial_acquire(host->codegen, host->user);
    if (st == TC_OK)
        st = build_tasks(&j, host);
    job_free(&j);
    *out = tc_build_finish(&b, st);
    return st;
}

/* ---- tc_lookup_group ------------------------------------------------------------- */

static tc_status lookup_group(job *j, tc_build_ctx *b, const char *version, const void *key,
                              size_t len)
{
    tc_status st = tc_build_prepare(b);
    if (st != TC_OK)
        return st;
    tc_digest g;
    if (tc_key_group(&b->kc, version, key, len, &g) != 0)
        return TC_ERR_NOMEM;
    char *payload = NULL;
    size_t plen = 0;
    int bad = 0;
    if (!b->store || !b->o->unit_tier)
        return TC_ERR_NOT_FOUND;
    if (!tc_store_get(b->store, b->o->arch, TC_REC_GROUP, &g, &payload, &plen, &bad)) {
        b->delta.v[TC_C_BAD_RECORDS] += bad;
        return TC_ERR_NOT_FOUND;
    }
    /* count, then read the ordered task keys and names */
    tc_reader rd;
    uint32_t tag;
    const unsigned char *p;
    size_t n, ntasks = 0;
    int rc;
    tc_reader_init(&rd, payload, plen);
    while ((rc = tc_field_next(&rd, &tag, &p, &n)) == 1)
        ntasks += tag == TC_F_TASK_KEY;
    if (rc < 0 || !ntasks || job_init(j, b, ntasks) != 0) {
        free(payload);
        b->delta.v[TC_C_BAD_RECORDS] += rc < 0;
        return rc < 0 || !ntasks ? TC_ERR_NOT_FOUND : TC_ERR_NOMEM;
    }
    size_t k = 0, names = 0;
    tc_reader_init(&rd, payload, plen);
    while ((rc = tc_field_next(&rd, &tag, &p, &n)) == 1) {
        if (tag == TC_F_TASK_KEY && n == TC_DIGEST_LEN && k < ntasks) {
            memcpy(j->slots[k].key.b, p, n);
            tc_digest_hex(&j->slots[k].key, j->slots[k].hex);
            k++;
        } else if (tag == TC_F_NAME && names < k) {
            j->slots[names++].name = strndup((const char *)p, n);
        }
    }
    free(payload);
    if (k != ntasks || names != ntasks)
        return TC_ERR_NOT_FOUND;
    /* accepted only once every task record is found and verified */
    for (size_t i = 0; i < ntasks; i++) {
        if (!j->slots[i].name)
            return TC_ERR_NOMEM;
        if (!load_task(b, &j->slots[i]))
            return TC_ERR_NOT_FOUND;
        j->slots[i].hit = 1;
    }
    tc_digest *keys = malloc(ntasks * sizeof *keys);
    if (!keys)
        return TC_ERR_NOMEM;
    for (size_t i = 0; i < ntasks; i++)
        keys[i] = j->slots[i].key;
    int krc = tc_key_task_module(&b->kc, b->linker.id, version, keys, ntasks, &j->module_key);
    free(keys);
    if (krc != 0)
        return TC_ERR_NOMEM;
    b->r->report.unit_hits = (uint32_t)ntasks;
    b->r->report.group_hit = 1;
    if (b->o->module_tier && module_record_image(j)) {
        b->r->report.module_hit = 1;
    } else {
        /* all tasks are there: linking them is cheap; keep the result */
        if (!(b->scratch = tc_make_temp_dir("taskcache")))
            return tc_build_fail(b, TC_ERR_IO, "cannot create a temporary directory: %s",
                                 strerror(errno));
        /* records that verify but no longer link together (one was
         * regenerated since) are stale, not an error: tc_build_tasks
         * regenerates them */
        if ((st = link_tasks(j)) != TC_OK)
            return st == TC_ERR_LINK ? TC_ERR_NOT_FOUND : st;
        if (b->o->module_tier)
            store_module(j);
    }
    return fill_result(j);
}

tc_status tc_lookup_group(tc_cache *cache, const tc_options *opts, const char *version,
                          const void *group_key, size_t group_key_size, tc_result **out)
{
    if (!out)
        return TC_ERR_INVALID;
    *out = NULL;
    if (!opts || !version || (!group_key && group_key_size))
        return TC_ERR_INVALID;
    tc_build_ctx b;
    if (tc_build_begin(&b, cache, opts, "group", 0) != 0)
        return TC_ERR_NOMEM;
    b.lookup = 1;
    job j;
    memset(&j, 0, sizeof j);
    tc_status st = lookup_group(&j, &b, version, group_key, group_key_size);
    if (st == TC_OK)
        b.delta.v[TC_C_GROUP_HITS]++;
    else if (st == TC_ERR_NOT_FOUND && b.store && opts->unit_tier)
        b.delta.v[TC_C_GROUP_MISSES]++;
    job_free(&j);
    tc_result *r = tc_build_finish(&b, st);
    if (st == TC_ERR_NOT_FOUND) {
        /* a miss is not an error: the host runs its front end */
        tc_result_free(r);
        return st;
    }
    *out = r; /* a hit, or an error and its diagnostics */
    return st;
}
