/* Tests of the slicer: what a unit and the module-data object contain, that
 * unit texts do not depend on where other things sit in the module, that
 * line maps lead back to the input, and when a module must stay whole. */
#include <stdlib.h>

#include "check.h"
#include "ptx/module.h"
#include "ptx/slice.h"

#define HDR ".version 8.0\n.target sm_90\n.address_size 64\n"

static const char *helper_fn =
    ".func (.param .b32 r) helper (.param .b32 x)\n"
    "{\n .reg .b32 %r<3>;\n ld.param.u32 %r1, [x];\n ld.global.u32 %r2, [counter];\n"
    " add.s32 %r1, %r1, %r2;\n st.param.b32 [r], %r1;\n ret;\n}\n";

/* An entry calling helper, with nvcc-style position-numbered labels. */
static void entry_text(char *out, size_t n, const char *name, int index, int calls_helper)
{
    snprintf(out, n,
             ".visible .entry %s (.param .u64 p)\n{\n"
             " .local .align 8 .b8 __local_depot%d[8];\n"
             " .reg .b32 %%r<4>;\n .reg .pred %%p<2>;\n"
             " setp.eq.u32 %%p1, %%r1, 0;\n"
             " @%%p1 bra $L__BB%d_2;\n"
             "%s"
             "$L__BB%d_2:\n ret;\n}\n",
             name, index, index,
             calls_helper ? " {\n .param .b32 a;\n .param .b32 b;\n call.uni (b), helper, (a);\n }\n"
                          : " mov.u32 %r2, 7;\n",
             index);
}

typedef struct mod {
    char src[8192];
    tc_ptx_module m;
    tc_slicer *s;
} mod;

static int build(mod *x, const char *src)
{
    snprintf(x->src, sizeof x->src, "%s", src);
    tc_ptx_error err;
    if (tc_ptx_parse(x->src, strlen(x->src), &x->m, &err) != 0) {
        fprintf(stderr, "parse error line %u: %s\n", err.line, err.message);
        return -1;
    }
    char why[256];
    int rc = tc_slicer_create(&x->m, &x->s, why, sizeof why);
    if (rc == 1)
        fprintf(stderr, "whole: %s\n", why);
    return rc;
}

static void drop(mod *x)
{
    tc_slicer_free(x->s);
    tc_ptx_module_free(&x->m);
}

/* Text of the single-entry unit for the entry named `name`. */
static int last_whole_program = -1;

static char *unit_for(mod *x, const char *name)
{
    for (size_t i = 0; i < tc_slicer_entry_count(x->s); i++) {
        const tc_ptx_stmt *st = tc_slicer_entry(x->s, i);
        const tc_ptx_sym *y = &x->m.syms[st->sym];
        if (y->len == strlen(name) && !memcmp(y->name, name, y->len)) {
            tc_text t;
            memset(&t, 0, sizeof t);
            uint32_t idx = (uint32_t)i;
            if (tc_slicer_emit_unit(x->s, &idx, 1, &t, &last_whole_program) != 0)
                return NULL;
            char *s = tc_sb_take(&t.text, NULL);
            tc_text_free(&t);
            return s;
        }
    }
    return NULL;
}

static void test_contents(void)
{
    char k1[1024], k2[1024], src[8192];
    entry_text(k1, sizeof k1, "k1", 0, 1);
    entry_text(k2, sizeof k2, "k2", 1, 0);
    snprintf(src, sizeof src,
             HDR ".global .align 4 .u32 counter = 5;\n"
                 ".func (.param .b32 r) taken (.param .b32 x) { ret; }\n"
                 ".global .align 8 .u64 fptr = taken;\n"
                 ".shared .align 4 .b8 scratch[64];\n%s%s%s"
                 ".visible .entry k3 () { .reg .b32 %%r<2>; mov.u32 %%r1, scratch; ret; }\n",
             helper_fn, k1, k2);
    mod x;
    CHECK(build(&x, src) == 0);
    CHECK(tc_slicer_entry_count(x.s) == 3);
    CHECK(tc_slicer_has_module_data(x.s));

    char *u1 = unit_for(&x, "k1");
    CHECK_CONTAINS(u1, ".extern .global .align 4 .u32 counter;");
    CHECK_CONTAINS(u1, "\n.func (.param .b32 r) helper (.param .b32 x)\n{"); /* internal copy */
    CHECK(strstr(u1, "= 5") == NULL);                     /* initializer stays in module data */
    CHECK_CONTAINS(u1, "\n$__tcL0:\nret;");               /* labels renamed in order */
    CHECK_CONTAINS(u1, "\n.local .align 8 .b8 $__tcV1[8];\n"); /* so are .local names */
    CHECK(strstr(u1, "$L__BB0_2") == NULL);
    CHECK(strstr(u1, "taken") == NULL);                   /* k1 does not use it */
    CHECK(last_whole_program == 1); /* only variables of the module data: -ewp */
    free(u1);

    char *u3 = unit_for(&x, "k3");
    CHECK_CONTAINS(u3, "\n.shared .align 4 .b8 scratch[64];"); /* per-block: copied */
    free(u3);

    tc_text md;
    memset(&md, 0, sizeof md);
    CHECK(tc_slicer_emit_module_data(x.s, &md) == 0);
    CHECK_CONTAINS(md.text.data, ".visible .global .align 4 .u32 counter = 5;");
    CHECK_CONTAINS(md.text.data, ".visible .func (.param .b32 r) taken");
    CHECK_CONTAINS(md.text.data, ".visible .global .align 8 .u64 fptr = taken;");
    CHECK(strstr(md.text.data, "scratch") == NULL);
    CHECK(strstr(md.text.data, ".entry") == NULL);
    tc_text_free(&md);
    drop(&x);
}

static void test_whole_program_choice(void)
{
    mod x;
    CHECK(build(&x, HDR ".func (.param .b32 r) f (.param .b32 a) { ret; }\n"
                       ".global .u64 fp = f;\n"
                       ".visible .entry calls () { .reg .b32 %r<2>; { .param .b32 a; .param .b32 b;"
                       " call.uni (b), f, (a); } ret; }\n"
                       ".visible .entry reads () { .reg .b64 %rd<2>; ld.global.u64 %rd1, [fp];"
                       " ret; }\n"
                       ".visible .const .align 4 .b32 coef[2] = {1, 2};\n"
                       ".visible .entry reads_const () { .reg .b32 %r<2>; ld.const.u32 %r1, [coef];"
                       " ret; }\n"
                       ".extern .func (.param .b32 r) vprintf (.param .b64 a, .param .b64 b);\n"
                       ".visible .entry prints () { .reg .b32 %r<2>; { .param .b64 a; .param .b64 b;"
                       " .param .b32 c; call.uni (c), vprintf, (a, b); } ret; }\n") == 0);
    free(unit_for(&x, "calls"));
    CHECK(last_whole_program == 0); /* calls a function of the module data */
    free(unit_for(&x, "reads"));
    CHECK(last_whole_program == 1); /* reads a .global variable only */
    free(unit_for(&x, "reads_const"));
    CHECK(last_whole_program == 0); /* -ewp mis-compiles extern .const reads */
    free(unit_for(&x, "prints"));
    CHECK(last_whole_program == 1); /* vprintf is defined nowhere in the module */
    drop(&x);

    /* A kernel's own .const table: ptxas -ewp puts it at offset 0 of bank 3
     * with no relocation, where the link puts another kernel's table */
    CHECK(build(&x, HDR ".visible .entry ka (.param .u64 o) { .const .align 4 .u32 ta[2] = {1, 2};"
                       " .reg .b32 %r<2>; ld.const.u32 %r1, [ta]; ret; }\n"
                       ".visible .entry kb (.param .u64 o) { .const .align 4 .u32 tb[2] = {5, 6};"
                       " .reg .b32 %r<2>; ld.const.u32 %r1, [tb+4]; ret; }\n"
                       ".visible .entry kc (.param .u64 o) { .global .align 4 .u32 g;"
                       " .reg .b32 %r<2>; ld.global.u32 %r1, [g]; ret; }\n") == 0);
    free(unit_for(&x, "ka"));
    CHECK(last_whole_program == 0);
    free(unit_for(&x, "kb"));
    CHECK(last_whole_program == 0);
    free(unit_for(&x, "kc"));
    CHECK(last_whole_program == 1); /* a function-scope .global is relocated */
    drop(&x);
}

/* ptxas -c (and the linker) make other code than the whole build for a
 * dynamic .shared array aligned above 16 bytes and for setmaxnreg: such a
 * kernel anywhere with a relocatable unit anywhere compiles the module whole. */
static int hazard(const char *src, int whole_program_units)
{
    mod x;
    CHECK(build(&x, src) == 0);
    CHECK(tc_slicer_set_whole_program(x.s, whole_program_units) == 0);
    char why[256] = "";
    int rc = tc_slicer_relocatable_hazard(x.s, why, sizeof why);
    CHECK(rc == 0 || strstr(why, "relocatable") != NULL);
    drop(&x);
    return rc;
}

static void test_relocatable_hazards(void)
{
    const char *aligned = ".extern .shared .align 1024 .b8 smem[];\n"
                          ".visible .entry tma (.param .u64 o) { .reg .b32 %r<2>;"
                          " mov.u32 %r1, smem; st.shared.u32 [smem], %r1; ret; }\n";
    const char *own_const = ".visible .entry tab (.param .u64 o) { .const .align 4 .u32 t[2] = {1, 2};"
                            " .reg .b32 %r<2>; ld.const.u32 %r1, [t]; ret; }\n";
    const char *plain = ".visible .entry plain (.param .u64 o) { .reg .b32 %r<2>;"
                        " mov.u32 %r1, 1; ret; }\n";
    char src[4096];
    snprintf(src, sizeof src, HDR "%s%s", aligned, plain);
    CHECK(hazard(src, 1) == 0); /* every unit -ewp */
    CHECK(hazard(src, 0) == 1); /* --relocatable-units */
    snprintf(src, sizeof src, HDR "%s%s", aligned, own_const);
    CHECK(hazard(src, 1) == 1); /* tab's unit is -c, and may hold tma */
    snprintf(src, sizeof src, HDR ".extern .shared .align 16 .b8 smem[];\n"
             ".visible .entry k (.param .u64 o) { .reg .b32 %%r<2>; mov.u32 %%r1, smem; ret; }\n%s",
             own_const);
    CHECK(hazard(src, 1) == 0); /* 16 is what the linker gives anyway */
    snprintf(src, sizeof src, HDR ".visible .entry ws () .maxnreg 168 {"
             " setmaxnreg.inc.sync.aligned.u32 232; ret; }\n%s", own_const);
    CHECK(hazard(src, 1) == 1);
    snprintf(src, sizeof src, HDR ".visible .entry ws () .maxnreg 168 {"
             " setmaxnreg.inc.sync.aligned.u32 232; ret; }\n%s", plain);
    CHECK(hazard(src, 1) == 0);
    /* ptxas -c refuses this pragma */
    snprintf(src, sizeof src, HDR ".visible .entry sp () {\n.pragma \"enable_smem_spilling\";\n"
             "ret;\n}\n%s", own_const);
    CHECK(hazard(src, 1) == 1);
    snprintf(src, sizeof src, HDR ".visible .entry sp () {\n.pragma \"nounroll\";\nret;\n}\n%s",
             own_const);
    CHECK(hazard(src, 1) == 0);
}

/* .noreturn, .abi_preserve and .abi_preserve_control set a function's
 * calling convention: every declaration a unit makes of it repeats them. */
static void test_prototype_directives(void)
{
    mod x;
    CHECK(build(&x, HDR ".func (.param .b32 rv) h (.param .b32 a) .abi_preserve 24\n"
                       "{ .reg .b32 %r<2>; ld.param.b32 %r1, [a]; st.param.b32 [rv], %r1; ret; }\n"
                       ".func stop () .noreturn .abi_preserve_control 4 { trap; }\n"
                       ".global .u64 tab[1] = {h};\n"
                       ".visible .entry k (.param .u64 o) { .reg .b32 %r<3>;"
                       " { .param .b32 a; .param .b32 b; st.param.b32 [a], %r1;"
                       " call (b), h, (a); ld.param.b32 %r2, [b]; }"
                       " call stop, (); ret; }\n") == 0);
    char *u = unit_for(&x, "k");
    CHECK_CONTAINS(u, ".extern .func (.param .b32 rv) h (.param .b32 a) .abi_preserve 24;");
    CHECK_CONTAINS(u, "stop () .noreturn .abi_preserve_control 4;"); /* before the copy */
    free(u);
    drop(&x);

    /* a prototype directive after another directive: not a declaration
     * that could be cut out, so the module is compiled whole */
    CHECK(build(&x, HDR ".func f () .pragma \"nounroll\"; .noreturn { trap; }\n"
                       ".visible .entry k () { call f, (); ret; }\n") == 1);
    drop(&x);
}

static void test_position_independence(void)
{
    char a1[1024], a2[1024], b0[1024], b1[1024], b2[1024], src_a[8192], src_b[8192];
    /* module A: k1, k2 */
    entry_text(a1, sizeof a1, "k1", 0, 1);
    entry_text(a2, sizeof a2, "k2", 1, 1);
    snprintf(src_a, sizeof src_a, HDR ".global .u32 counter;\n%s%s%s", helper_fn, a1, a2);
    /* module B: a new entry first, k2 before k1, so nvcc-style numbering of
     * every label and depot differs */
    entry_text(b0, sizeof b0, "k0", 0, 0);
    entry_text(b2, sizeof b2, "k2", 1, 1);
    entry_text(b1, sizeof b1, "k1", 2, 1);
    snprintf(src_b, sizeof src_b,
             HDR "// another comment\n.global .u32 other;\n.global .u32 counter;\n%s%s%s%s",
             b0, helper_fn, b2, b1);
    mod a, b;
    CHECK(build(&a, src_a) == 0);
    CHECK(build(&b, src_b) == 0);
    char *ua = unit_for(&a, "k1"), *ub = unit_for(&b, "k1");
    CHECK(ua && ub && strcmp(ua, ub) == 0);
    free(ua);
    free(ub);
    drop(&a);
    drop(&b);
}

static void test_shared_function_edit(void)
{
    char k1[1024], k2[1024], k3[1024], src[8192], src2[8192];
    entry_text(k1, sizeof k1, "k1", 0, 1);
    entry_text(k2, sizeof k2, "k2", 1, 1);
    entry_text(k3, sizeof k3, "k3", 2, 0);
    snprintf(src, sizeof src, HDR ".global .u32 counter;\n%s%s%s%s", helper_fn, k1, k2, k3);
    snprintf(src2, sizeof src2, "%s", src);
    char *add = strstr(src2, "add.s32 %r1, %r1, %r2;");
    memcpy(add, "sub", 3); /* edit the shared helper */
    mod a, b;
    CHECK(build(&a, src) == 0);
    CHECK(build(&b, src2) == 0);
    const char *names[] = {"k1", "k2", "k3"};
    int expect_changed[] = {1, 1, 0};
    for (int i = 0; i < 3; i++) {
        char *ua = unit_for(&a, names[i]), *ub = unit_for(&b, names[i]);
        CHECK(ua && ub && (strcmp(ua, ub) != 0) == expect_changed[i]);
        free(ua);
        free(ub);
    }
    drop(&a);
    drop(&b);
}

static void test_line_map(void)
{
    char k1[1024], src[8192];
    entry_text(k1, sizeof k1, "k1", 0, 1);
    snprintf(src, sizeof src, HDR ".global .u32 counter;\n%s\n\n%s", helper_fn, k1);
    mod x;
    CHECK(build(&x, src) == 0);
    tc_text t;
    memset(&t, 0, sizeof t);
    uint32_t idx = 0;
    int wp;
    CHECK(tc_slicer_emit_unit(x.s, &idx, 1, &t, &wp) == 0);
    /* find the unit line holding "bra" and the input line holding it */
    uint32_t out_line = 1, in_line = 1;
    for (const char *p = t.text.data; *p && !(p[0] == 'b' && !strncmp(p, "bra", 3)); p++)
        out_line += *p == '\n';
    for (const char *p = src; *p && !(p[0] == 'b' && !strncmp(p, "bra", 3)); p++)
        in_line += *p == '\n';
    CHECK(tc_text_map_line(&t, out_line) == in_line);
    CHECK(tc_text_map_line(&t, 1) == 1); /* .version */
    tc_text_free(&t);
    drop(&x);
}

/* Statics declared inside a function are one object per module: the
 * function lives in the module data, and units call it there. */
static void test_function_statics(void)
{
    mod x;
    CHECK(build(&x, HDR ".func (.reg .b32 r) bump ()\n{\n .global .align 4 .u32 counter;\n"
                       " atom.global.add.u32 r, [counter], 1;\n ret;\n}\n"
                       ".func (.param .b32 rv) f ()\n{\n .shared .align 4 .u32 s;\n"
                       " .reg .b32 %r<2>;\n ld.shared.u32 %r1, [s];\n st.param.b32 [rv], %r1;\n"
                       " ret;\n}\n"
                       ".visible .entry a () { .reg .b32 %r<2>; call (%r1), bump, (); ret; }\n"
                       ".visible .entry b () { .reg .b32 %r<2>; call (%r1), bump, (); "
                       "{ .param .b32 q; call.uni (q), f, (); } ret; }\n") == 0);
    char *ua = unit_for(&x, "a"), *ub = unit_for(&x, "b");
    CHECK_CONTAINS(ua, "\n.extern .func (.reg .b32 r) bump ();\n");
    CHECK(strstr(ua, "counter") == NULL);
    CHECK_CONTAINS(ub, "\n.extern .func (.param .b32 rv) f ();\n");
    CHECK(strstr(ub, ".shared") == NULL);
    free(ua);
    free(ub);
    tc_text md;
    memset(&md, 0, sizeof md);
    CHECK(tc_slicer_emit_module_data(x.s, &md) == 0);
    CHECK_CONTAINS(md.text.data, ".visible .func (.reg .b32 r) bump ()\n{\n.global .align 4 .u32 counter;");
    CHECK_CONTAINS(md.text.data, ".visible .func (.param .b32 rv) f ()\n{\n.shared .align 4 .u32 s;");
    tc_text_free(&md);
    drop(&x);
}

/* A name declared in an inner block hides the module symbol of the same
 * name there only (../shared/repro/shadow_local.ptx). */
static void test_shadowing(void)
{
    mod x;
    CHECK(build(&x, HDR ".global .align 4 .u32 buf;\n"
                       ".visible .entry k (.param .u64 out)\n{\n .reg .b32 %r<3>;\n {\n"
                       " .local .align 4 .b8 buf[4];\n st.local.u32 [buf], 2;\n"
                       " ld.local.u32 %r2, [buf];\n }\n st.global.u32 [buf], %r2;\n ret;\n}\n") == 0);
    char *u = unit_for(&x, "k");
    CHECK_CONTAINS(u, "\n.extern .global .align 4 .u32 buf;\n");
    CHECK_CONTAINS(u, "\n{\n.local .align 4 .b8 $__tcV2[4];\nst.local.u32 [$__tcV2], 2;\n"
                      "ld.local.u32 %r2, [$__tcV2];\n}\nst.global.u32 [buf], %r2;\n");
    free(u);
    drop(&x);
}

/* Comments, blank lines and spacing never reach a unit's text. */
static void test_layout_independence(void)
{
    mod a, b;
    CHECK(build(&a, HDR ".global .u32 g;\n"
                       ".func (.param .b32 r) h (.param .b32 x)\n{\n .reg .b32 %r<2>;\n"
                       " ld.param.u32 %r1, [x];\n st.param.b32 [r], %r1;\n ret;\n}\n"
                       ".visible .entry k (.param .u64 p, .param .u32 n) .maxntid 64, 1, 1\n{\n"
                       " .reg .b32 %r<4>;\n ld.global.u32 %r1, [g+4];\n"
                       " { .param .b32 a; .param .b32 b; call.uni (b), h, (a); }\n ret;\n}\n") == 0);
    CHECK(build(&b, HDR "// a comment\n.global   .u32 g ;\n"
                       ".func(.param .b32 r)\n   h(.param .b32 x)\n{\n\n .reg .b32 %r<2>; // regs\n"
                       " ld.param.u32 %r1,[ x ] ;\n /* here */ st.param.b32 [r] ,%r1;\n\n ret;\n}\n"
                       ".visible .entry k(\n  .param .u64 p,\n  .param .u32 n\n)\n.maxntid 64,1,1\n{\n"
                       " .reg .b32 %r<4>;\n\n ld.global.u32 %r1, [ g + 4 ];\n"
                       " {\n .param .b32 a;\n .param .b32 b;\n call.uni (b), h, (a);\n }\n ret;\n}\n") == 0);
    char *ua = unit_for(&a, "k"), *ub = unit_for(&b, "k");
    CHECK(ua && ub && strcmp(ua, ub) == 0);
    free(ua);
    free(ub);
    drop(&a);
    drop(&b);
}

/* Compiler-named constants are named by content: renumbering them, or
 * another kernel that uses the same one (nvcc merges equal strings), leaves
 * a kernel's unit as it was; where a generator repeats equal constants,
 * one more for another kernel leaves the existing names too. */
static void test_constants(void)
{
    static const char str[] = ".global .align 1 .b8 %s[3] = {104, 105, 0};\n";
    static const char use[] =
        ".visible .entry %s () { .reg .b64 %%rd<2>; mov.u64 %%rd1, %s; ret; }\n";
    char a[1024], b[1024], c[1024], d[2048];
    int n = snprintf(a, sizeof a, HDR);
    n += snprintf(a + n, sizeof a - n, str, "$str$1");
    snprintf(a + n, sizeof a - n, use, "k2", "$str$1");
    /* b: k1 first, sharing the one constant, which nvcc now calls $str */
    n = snprintf(b, sizeof b, HDR);
    n += snprintf(b + n, sizeof b - n, str, "$str");
    n += snprintf(b + n, sizeof b - n, use, "k1", "$str");
    snprintf(b + n, sizeof b - n, use, "k2", "$str");
    /* c: two equal constants, for k2 and k3; d: one more, for k1, first */
    n = snprintf(c, sizeof c, HDR);
    n += snprintf(c + n, sizeof c - n, str, "$str$1");
    n += snprintf(c + n, sizeof c - n, str, "$str$2");
    n += snprintf(c + n, sizeof c - n, use, "k2", "$str$1");
    snprintf(c + n, sizeof c - n, use, "k3", "$str$2");
    n = snprintf(d, sizeof d, HDR);
    n += snprintf(d + n, sizeof d - n, str, "$str");
    n += snprintf(d + n, sizeof d - n, use, "k1", "$str");
    snprintf(d + n, sizeof d - n, "%s", c + strlen(HDR));
    mod x[4];
    const char *src[4] = {a, b, c, d};
    char *u[4][2];
    for (int i = 0; i < 4; i++) {
        CHECK(build(&x[i], src[i]) == 0);
        u[i][0] = unit_for(&x[i], "k2");
        u[i][1] = unit_for(&x[i], "k3");
    }
    CHECK(u[0][0] && u[1][0] && strcmp(u[0][0], u[1][0]) == 0);
    CHECK_CONTAINS(u[0][0], "mov.u64 %rd1, $__tcA");
    CHECK(u[2][0] && u[3][0] && strcmp(u[2][0], u[3][0]) == 0);
    CHECK(u[2][1] && u[3][1] && strcmp(u[2][1], u[3][1]) == 0);
    CHECK(strcmp(u[2][0] + strlen(HDR), u[2][1] + strlen(HDR)) != 0); /* two objects */
    for (int i = 0; i < 4; i++) {
        free(u[i][0]);
        free(u[i][1]);
        drop(&x[i]);
    }
}

/* A name that uses the reserved prefix keeps renaming off in its own
 * function only. */
static void test_reserved_prefix(void)
{
    char k1[1024], src[4096];
    entry_text(k1, sizeof k1, "k1", 0, 0);
    snprintf(src, sizeof src, HDR "%s"
             ".visible .entry odd () { .reg .b32 $__tcL0; bra L; L: ret; }\n", k1);
    mod x;
    CHECK(build(&x, src) == 0);
    char *u = unit_for(&x, "k1"), *o = unit_for(&x, "odd");
    CHECK_CONTAINS(u, "bra $__tcL0;");
    CHECK_CONTAINS(o, "bra L;\nL:\nret;");
    free(u);
    free(o);
    drop(&x);
}

/* A unit's header holds the .file directives its .loc lines name. */
static void test_files(void)
{
    mod x;
    CHECK(build(&x, HDR ".file 1 \"a.cu\"\n.file 2 \"b.cu\"\n"
                       ".visible .entry k () {\n.loc 2 10 1\n ret;\n}\n"
                       ".visible .entry j () { ret; }\n") == 0);
    char *u = unit_for(&x, "k"), *v = unit_for(&x, "j");
    CHECK_CONTAINS(u, ".address_size 64\n.file 2 \"b.cu\"\n.visible .entry k ()\n{\n.loc 2 10 1\nret;\n}\n");
    CHECK(strstr(v, ".file") == NULL);
    free(u);
    free(v);
    drop(&x);
}

/* A unit that calls through a register stays relocatable: ptxas -ewp code
 * cannot call a function of the module data through a pointer
 * (../shared/repro/ewp_fnptr.cu). */
static void test_indirect_calls(void)
{
    mod x;
    CHECK(build(&x, HDR ".func (.param .b32 r) f (.param .b32 a) { ret; }\n"
                       ".global .u64 table[1] = {f};\n"
                       ".visible .entry k () { .reg .b64 %rd<2>; ld.global.u64 %rd1, [table];"
                       " p: .callprototype (.param .b32 _) _ (.param .b32 _);"
                       " { .param .b32 a; .param .b32 b; call (b), %rd1, (a), p; } ret; }\n") == 0);
    free(unit_for(&x, "k"));
    CHECK(last_whole_program == 0);
    drop(&x);
}

static void expect_whole(const char *src, const char *why_part)
{
    mod x;
    memset(&x, 0, sizeof x);
    snprintf(x.src, sizeof x.src, "%s", src);
    tc_ptx_error err;
    CHECK(tc_ptx_parse(x.src, strlen(x.src), &x.m, &err) == 0);
    char why[256] = "";
    CHECK(tc_slicer_create(&x.m, &x.s, why, sizeof why) == 1);
    CHECK_CONTAINS(why, why_part);
    drop(&x);
}

static void test_whole(void)
{
    expect_whole(HDR ".visible .entry child () { ret; }\n"
                     ".visible .entry parent () { .reg .b64 %rd<2>; mov.u64 %rd1, child; ret; }\n",
                 "kernel 'child' is referenced at line 5");
    expect_whole(HDR ".shared .align 4 .b8 sm[16];\n"
                     ".func f () { .reg .b32 %r<2>; mov.u32 %r1, sm; ret; }\n"
                     ".global .u64 fp = f;\n"
                     ".visible .entry k () { ret; }\n",
                 "'sm' is used by a function whose address is taken");
    expect_whole(HDR ".func f () { ret; }\n", "no kernels");
    /* ptxas resolves [buf] to the global when another function follows */
    expect_whole(HDR ".global .u64 buf;\n"
                     ".visible .entry p (.param .u64 buf) { .reg .b64 %rd<2>;"
                     " ld.param.u64 %rd1, [buf]; ret; }\n"
                     ".visible .entry q () { ret; }\n",
                 "parameter 'buf' at line 5 is named like a module symbol");
    /* ptxas wants an inlined_at location used by an earlier .loc; a unit
     * holds its own functions' only */
    expect_whole(HDR ".file 1 \"a.cu\"\n"
                     ".visible .entry k1 () {\n.loc 1 12 3\nret;\n}\n"
                     ".visible .entry k2 () {\n.loc 1 20 1\n"
                     ".loc 1 7 2, function_name $L__info_string0, inlined_at 1 12 3\nret;\n}\n"
                     ".section .debug_str\n{\n$L__info_string0:\n.b8 98,0\n}\n",
                 "inlined_at 1 12 3 names a location no earlier .loc of its function has");
}

int main(void)
{
    test_contents();
    test_whole_program_choice();
    test_position_independence();
    test_shared_function_edit();
    test_line_map();
    test_whole();
    test_function_statics();
    test_shadowing();
    test_layout_independence();
    test_constants();
    test_reserved_prefix();
    test_files();
    test_indirect_calls();
    test_prototype_directives();
    test_relocatable_hazards();
    return check_report("test_slice");
}
