/* host_jit: a small JIT compiler that embeds taskcache, to show the host API.
 *
 * It reads a description of tasks, one per line:
 *
 *     NAME OP ARG...        e.g.  advect  saxpy 0.5 1.25
 *
 * where OP is saxpy A B (y = A*x + B), poly N C0..CN (Horner), or
 * clamp LO HI; '#' starts a comment. Its "front end" parses the file into
 * one small IR string per task; its "codegen" turns the IR into a PTX
 * module with one kernel NAME(const float *x, float *y, int n). Before any
 * of that it asks taskcache for a group manifest keyed by the file's bytes:
 * on a hit, neither front end nor codegen runs. Otherwise each task is keyed
 * by everything its codegen reads: its IR and its name (the kernel is named
 * after the task); the target, which codegen writes into the PTX, is in
 * every key already. Codegen runs only for tasks the cache lacks. Every
 * task carries host metadata (its block size and what it reads and
 * writes).
 *
 *     host_jit [--cache-dir DIR] [--arch sm_90] [--load] TASKS.txt OUT.cubin
 *
 * --load also loads the image on the GPU (when there is one) and launches
 * every kernel once. It prints one line saying what ran and how long it
 * took. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "taskcache.h"

#define VERSION "host_jit 1 (ptx 8.0)"

typedef struct task_ir {
    char name[64];
    char ir[512];            /* what the task's code depends on */
    char key[600];           /* "name|ir": everything codegen reads for it but the
                                target, which taskcache keys on itself */
} task_ir;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0, r;
    do {
        if (n + 4096 > cap) {
            char *p = realloc(buf, cap = cap * 2 + 8192);
            if (!p) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = p;
        }
        r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
    } while (r > 0);
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* ---- front end: description -> IR ------------------------------------------------ */

static int front_end(char *text, task_ir **out, size_t *count)
{
    size_t cap = 16, n = 0;
    task_ir *tasks = calloc(cap, sizeof *tasks);
    int lineno = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char name[64], op[16];
        double a[8] = {0};
        int got = sscanf(line, "%63s %15s %lf %lf %lf %lf %lf %lf %lf %lf", name, op, &a[0], &a[1],
                         &a[2], &a[3], &a[4], &a[5], &a[6], &a[7]);
        if (got <= 0)
            continue;
        if (n == cap) {
            task_ir *p = realloc(tasks, (cap *= 2) * sizeof *tasks);
            if (!p)
                return -1;
            tasks = p;
        }
        task_ir *t = &tasks[n];
        snprintf(t->name, sizeof t->name, "%s", name);
        if (!strcmp(op, "saxpy") && got == 4)
            snprintf(t->ir, sizeof t->ir, "saxpy %a %a", a[0], a[1]);
        else if (!strcmp(op, "clamp") && got == 4)
            snprintf(t->ir, sizeof t->ir, "clamp %a %a", a[0], a[1]);
        else if (!strcmp(op, "poly") && got >= 4 && (int)a[0] == got - 3 && a[0] <= 6) {
            int len = snprintf(t->ir, sizeof t->ir, "poly %d", (int)a[0]);
            for (int k = 1; k < got - 2; k++)
                len += snprintf(t->ir + len, sizeof t->ir - (size_t)len, " %a", a[k]);
        } else {
            fprintf(stderr, "host_jit: line %d: cannot read task '%s'\n", lineno, line);
            free(tasks);
            return -1;
        }
        snprintf(t->key, sizeof t->key, "%s|%s", t->name, t->ir);
        n++;
    }
    *out = tasks;
    *count = n;
    return 0;
}

/* ---- codegen: IR -> PTX ------------------------------------------------------------ */

typedef struct host_state {
    const task_ir *ir;
    const char *arch;        /* the PTX's .target */
    int codegen_calls;       /* only touched under serialized codegen */
} host_state;

static void emit_float(char *out, size_t n, double v)
{
    float f = (float)v;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    snprintf(out, n, "0f%08X", bits);
}

static void codegen(void *user, size_t index, const tc_task *task, tc_codegen *out)
{
    host_state *h = user;
    const task_ir *t = &h->ir[index];
    (void)task;
    h->codegen_calls++;
    char body[2048] = "", c0[16], c1[16];
    double a[8] = {0};
    int deg = 0;
    if (!strncmp(t->ir, "saxpy", 5)) {
        sscanf(t->ir + 5, "%la %la", &a[0], &a[1]);
        emit_float(c0, sizeof c0, a[0]);
        emit_float(c1, sizeof c1, a[1]);
        snprintf(body, sizeof body, "  fma.rn.f32 %%f2, %%f1, %s, %s;\n", c0, c1);
    } else if (!strncmp(t->ir, "clamp", 5)) {
        sscanf(t->ir + 5, "%la %la", &a[0], &a[1]);
        emit_float(c0, sizeof c0, a[0]);
        emit_float(c1, sizeof c1, a[1]);
        snprintf(body, sizeof body, "  max.f32 %%f3, %%f1, %s;\n  min.f32 %%f2, %%f3, %s;\n", c0,
                 c1);
    } else {
        sscanf(t->ir + 4, "%d %la %la %la %la %la %la", &deg, &a[0], &a[1], &a[2], &a[3], &a[4],
               &a[5]);
        emit_float(c0, sizeof c0, a[deg - 1]);
        size_t len = (size_t)snprintf(body, sizeof body, "  mov.f32 %%f2, %s;\n", c0);
        for (int k = deg - 2; k >= 0; k--) {
            emit_float(c0, sizeof c0, a[k]);
            len += (size_t)snprintf(body + len, sizeof body - len,
                                    "  fma.rn.f32 %%f2, %%f2, %%f1, %s;\n", c0);
        }
    }
    char ptx[4096];
    int n = snprintf(ptx, sizeof ptx,
                     ".version 8.0\n.target %s\n.address_size 64\n"
                     ".visible .entry %s(.param .u64 x, .param .u64 y, .param .u32 n)\n"
                     ".maxntid 256, 1, 1\n{\n"
                     "  .reg .pred %%p<2>;\n  .reg .b32 %%r<6>;\n  .reg .f32 %%f<4>;\n"
                     "  .reg .b64 %%rd<8>;\n"
                     "  ld.param.u64 %%rd1, [x];\n  ld.param.u64 %%rd2, [y];\n"
                     "  ld.param.u32 %%r1, [n];\n"
                     "  mov.u32 %%r2, %%ctaid.x;\n  mov.u32 %%r3, %%ntid.x;\n"
                     "  mov.u32 %%r4, %%tid.x;\n  mad.lo.s32 %%r5, %%r2, %%r3, %%r4;\n"
                     "  setp.ge.u32 %%p1, %%r5, %%r1;\n  @%%p1 bra DONE;\n"
                     "  cvta.to.global.u64 %%rd3, %%rd1;\n  cvta.to.global.u64 %%rd4, %%rd2;\n"
                     "  mul.wide.u32 %%rd5, %%r5, 4;\n  add.s64 %%rd6, %%rd3, %%rd5;\n"
                     "  add.s64 %%rd7, %%rd4, %%rd5;\n  ld.global.f32 %%f1, [%%rd6];\n"
                     "%s  st.global.f32 [%%rd7], %%f2;\nDONE:\n  ret;\n}\n",
                     h->arch, t->name, body);
    if (n < 0 || (size_t)n >= sizeof ptx) {
        tc_codegen_fail(out, "generated PTX too long");
        return;
    }
    tc_codegen_set_ptx(out, ptx, (size_t)n);
    char meta[128];
    int m = snprintf(meta, sizeof meta, "block=256 reads=x writes=y op=%.*s", 5, t->ir);
    tc_codegen_set_metadata(out, meta, (size_t)m);
}

/* ---- optional: run on the GPU ------------------------------------------------------- */

static int launch_all(const tc_result *r)
{
    tc_module *m;
    tc_error err;
    if (tc_module_load(r, &m, &err) != TC_OK) {
        printf("load: skipped (%s)\n", err.message);
        return 0;
    }
    int bad = 0;
    for (size_t i = 0; i < tc_result_entry_count(r); i++) {
        tc_entry_info e;
        tc_result_entry(r, i, &e);
        /* a null pointer with n = 0: every thread returns at once */
        uint64_t x = 0, y = 0;
        uint32_t n = 0;
        void *args[] = {&x, &y, &n};
        tc_launch cfg = {{1, 1, 1}, {256, 1, 1}, 0, NULL, 0};
        if (tc_module_launch(m, e.name, &cfg, args, NULL, 0, &err) != TC_OK) {
            fprintf(stderr, "host_jit: launch %s: %s\n", e.name, err.message);
            bad = 1;
        }
    }
    tc_module_unload(m);
    printf("load: launched %zu kernels\n", tc_result_entry_count(r));
    return bad;
}

int main(int argc, char **argv)
{
    const char *cache_dir = NULL, *arch = "sm_90", *in = NULL, *out_path = NULL;
    int load = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cache-dir") && i + 1 < argc)
            cache_dir = argv[++i];
        else if (!strcmp(argv[i], "--arch") && i + 1 < argc)
            arch = argv[++i];
        else if (!strcmp(argv[i], "--load"))
            load = 1;
        else if (!in)
            in = argv[i];
        else if (!out_path)
            out_path = argv[i];
    }
    if (!in || !out_path) {
        fprintf(stderr, "usage: host_jit [--cache-dir DIR] [--arch sm_XX] [--load] TASKS.txt "
                        "OUT.cubin\n");
        return 2;
    }
    double t0 = now();
    size_t len;
    char *text = read_file(in, &len);
    if (!text) {
        fprintf(stderr, "host_jit: cannot read %s\n", in);
        return 1;
    }
    tc_cache *cache = NULL;
    tc_error err;
    tc_options *opts = tc_options_new();
    if (tc_cache_open(cache_dir, &cache, &err) != TC_OK ||
        tc_options_set_arch(opts, arch, &err) != TC_OK) {
        fprintf(stderr, "host_jit: %s\n", err.message);
        return 1;
    }
    /* 1. the group manifest: keyed by the description itself, before parsing */
    tc_result *r = NULL;
    int front_end_ran = 0, codegen_calls = 0;
    tc_status st = tc_lookup_group(cache, opts, VERSION, text, len, &r);
    if (st == TC_ERR_NOT_FOUND) {
        /* 2. front end, then a build that generates only the missing tasks */
        char *copy = malloc(len + 1);
        memcpy(copy, text, len + 1);
        task_ir *ir = NULL;
        size_t n = 0;
        if (front_end(copy, &ir, &n) != 0 || n == 0) {
            fprintf(stderr, "host_jit: no tasks in %s\n", in);
            return 1;
        }
        front_end_ran = 1;
        tc_task *tasks = calloc(n, sizeof *tasks);
        for (size_t i = 0; i < n; i++) {
            tasks[i].name = ir[i].name;
            tasks[i].key = ir[i].key;
            tasks[i].key_size = strlen(ir[i].key);
        }
        host_state hs = {ir, arch, 0};
        tc_host host = {VERSION, codegen, &hs, 1, text, len};
        st = tc_build_tasks(cache, opts, &host, tasks, n, &r);
        codegen_calls = hs.codegen_calls;
        free(tasks);
        free(ir);
        free(copy);
    }
    if (st != TC_OK) { /* a result, when there is one, says why */
        fprintf(stderr, "%s", r ? tc_result_diagnostics(r) : "");
        fprintf(stderr, "host_jit: build failed (%s)\n", tc_status_name(st));
        tc_result_free(r);
        return 1;
    }
    if (tc_result_write_image(r, out_path, &err) != TC_OK) {
        fprintf(stderr, "host_jit: %s\n", err.message);
        return 1;
    }
    tc_report rep;
    tc_result_report(r, &rep);
    tc_task_info t0info;
    tc_result_task(r, 0, &t0info);
    printf("host_jit: %zu tasks; group manifest %s; front end %s; codegen ran %d times; "
           "%u tasks from cache; %.1f ms\n",
           tc_result_task_count(r), rep.group_hit ? "hit" : "miss",
           front_end_ran ? "ran" : "skipped", codegen_calls, rep.unit_hits,
           (now() - t0) * 1e3);
    printf("host_jit: task %s metadata: %.*s\n", t0info.name, (int)t0info.metadata_size,
           (const char *)t0info.metadata);
    int rc = load ? launch_all(r) : 0;
    tc_result_free(r);
    tc_options_free(opts);
    tc_cache_close(cache);
    free(text);
    return rc;
}
