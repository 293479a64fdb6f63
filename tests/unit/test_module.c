/* Tests of the PTX module model: symbols, linkage, the references each
 * function makes (direct calls vs. uses of an address), parameter layouts,
 * directives, and the file:line errors users see for malformed input. */
#include <stdlib.h>

#include "check.h"
#include "ptx/module.h"

static const char *module_src =
    ".version 8.0\n"                                              /* 1 */
    ".target sm_90\n"                                             /* 2 */
    ".address_size 64\n"                                          /* 3 */
    ".extern .func (.param .b32 r) vprintf (.param .b64 a, .param .b64 b);\n"
    ".global .align 4 .u32 counter;\n"                            /* 5 */
    ".visible .const .align 8 .b8 tbl[16] = {1,2,3};\n"           /* 6 */
    ".global .align 8 .u64 ptr = generic(tbl)+8;\n"               /* 7 */
    ".func (.param .b32 r) helper (.param .b32 x)\n"              /* 8 */
    "{\n"
    "  .reg .b32 %r<3>;\n"
    "  ld.param.u32 %r1, [x];\n"
    "  // a comment naming counter { ; must not count\n"
    "  st.param.b32 [r], %r1;\n"
    "  ret;\n"
    "}\n"                                                         /* 15 */
    ".func fnp (.param .b32 x) .noreturn { trap; }\n"             /* 16 */
    ".visible .entry k1 (.param .u64 a, .param .u32 b, .param .align 16 .b8 s[24], .param .u8 c)\n"
    ".maxntid 128, 1, 1\n"
    ".minnctapersm 2\n"
    "{\n"                                                         /* 20 */
    "  .reg .b32 %r<9>;\n"
    "  .reg .b64 %rd<4>;\n"
    "  .loc 1 5 3\n"
    "  {\n"
    "  .param .b32 p0;\n"
    "  .param .b32 r0;\n"
    "  call.uni (r0), helper, (p0);\n"
    "  }\n"
    "  ld.global.v2.u32 {%r1, %r2}, [tbl];\n"
    "  mov.u64 %rd1, fnp;\n"                                      /* 30 */
    "  @%p1 bra $L__BB0_1;\n"
    "$L__BB0_1:\n"
    "  mapa.shared::cluster.u32 %r3, %r4, %r5;\n"
    "  atom.global.add.u32 %r6, [counter], 1;\n"
    "  ret;\n"
    "}\n";

static int32_t sym(const tc_ptx_module *m, const char *name)
{
    uint32_t *v = tc_map_get(&m->symtab, name, strlen(name));
    return v ? (int32_t)*v : -1;
}

static uint8_t ref_how(const tc_ptx_module *m, const char *from, const char *to)
{
    int32_t f = sym(m, from), t = sym(m, to);
    if (f < 0 || t < 0)
        return 0;
    const tc_ptx_stmt *st = &m->stmts[m->syms[f].def >= 0 ? m->syms[f].def : m->syms[f].decl];
    for (uint32_t i = 0; i < st->ref_count; i++)
        if (m->refs[st->ref_begin + i].sym == (uint32_t)t)
            return m->refs[st->ref_begin + i].how;
    return 0;
}

static void test_structure(void)
{
    tc_ptx_module m;
    tc_ptx_error err;
    CHECK(tc_ptx_parse(module_src, strlen(module_src), &m, &err) == 0);
    if (err.message[0])
        fprintf(stderr, "line %u: %s\n", err.line, err.message);
    CHECK_STR(m.target, "sm_90");
    CHECK(m.nentries == 1);
    CHECK(m.whole_reason[0] == '\0');

    int32_t k1 = sym(&m, "k1"), helper = sym(&m, "helper"), vp = sym(&m, "vprintf");
    CHECK(k1 >= 0 && m.syms[k1].is_entry && m.syms[k1].def >= 0);
    CHECK(helper >= 0 && m.syms[helper].kind == TC_SYM_FUNC && m.syms[helper].def >= 0);
    CHECK(vp >= 0 && m.syms[vp].def < 0 && m.stmts[m.syms[vp].decl].linkage == TC_LINK_EXTERN);
    CHECK(m.stmts[m.syms[sym(&m, "tbl")].def].linkage == TC_LINK_VISIBLE);
    CHECK(m.stmts[m.syms[sym(&m, "tbl")].def].space == TC_SPACE_CONST);
    CHECK(m.stmts[m.syms[sym(&m, "counter")].def].linkage == TC_LINK_INTERNAL);

    /* references: a direct call, uses through vector operands, an address */
    CHECK(ref_how(&m, "k1", "helper") == TC_REF_CALL);
    CHECK(ref_how(&m, "k1", "tbl") == TC_REF_USE);
    CHECK(ref_how(&m, "k1", "fnp") == TC_REF_USE);
    CHECK(ref_how(&m, "k1", "counter") == TC_REF_USE);
    CHECK(ref_how(&m, "ptr", "tbl") == TC_REF_USE);
    CHECK(ref_how(&m, "helper", "counter") == 0); /* only named in a comment */

    const tc_ptx_stmt *e = &m.stmts[m.syms[k1].def];
    CHECK(e->loc_count == 1 && m.locfiles[e->loc_begin] == 1); /* the file its .loc names */
    CHECK(e->perf.maxntid[0] == 128 && e->perf.maxntid[1] == 1 && e->perf.maxntid[2] == 1);
    CHECK(e->perf.minnctapersm == 2);
    CHECK(e->param_count == 4);
    const tc_ptx_param *p = &m.params[e->param_begin];
    CHECK(p[0].offset == 0 && p[0].size == 8 && !strcmp(p[0].type, "u64"));
    CHECK(p[1].offset == 8 && p[1].size == 4);
    CHECK(p[2].offset == 16 && p[2].size == 24 && p[2].align == 16);
    CHECK(p[3].offset == 40 && p[3].size == 1);
    CHECK(e->param_bytes == 41);
    CHECK(e->line == 17 && e->last_line == 36);
    CHECK(m.stmts[m.syms[sym(&m, "fnp")].def].perf.noreturn);
    tc_ptx_module_free(&m);
}

static void expect_error(const char *src, uint32_t line, const char *text)
{
    tc_ptx_module m;
    tc_ptx_error err;
    int rc = tc_ptx_parse(src, strlen(src), &m, &err);
    CHECK(rc == -1);
    if (rc == -1) {
        if (err.line != line)
            fprintf(stderr, "expected line %u, got %u (%s)\n", line, err.line, err.message);
        CHECK(err.line == line);
        CHECK_CONTAINS(err.message, text);
    }
    tc_ptx_module_free(&m);
}

static void test_errors(void)
{
    const char *hdr = ".version 8.0\n.target sm_90\n";
    char buf[512];
    expect_error("\n.target sm_90\n.entry k() { ret; }\n", 2, "must start with .version");
    expect_error(".version 8.0\n\n.entry k() { ret; }\n", 3, ".target must follow .version");
    expect_error("// nothing\n", 2, "missing .version");
    snprintf(buf, sizeof buf, "%s.entry k()\n{\n ret;\n", hdr);
    expect_error(buf, 4, "never closed");
    snprintf(buf, sizeof buf, "%s.entry k() { ret; }\n}\n", hdr);
    expect_error(buf, 4, "'}' without a matching '{'");
    snprintf(buf, sizeof buf, "%s.func f() { ret; }\n.func f() { ret; }\n", hdr);
    expect_error(buf, 4, "redefinition of 'f' (first defined at line 3)");
    snprintf(buf, sizeof buf, "%sgarbage here;\n", hdr);
    expect_error(buf, 3, "unexpected 'garbage'");
    snprintf(buf, sizeof buf, "%s.entry (.param .u32 a) { ret; }\n", hdr);
    expect_error(buf, 3, "expected a name");
    snprintf(buf, sizeof buf, "%s/* open\n\n.entry k() { ret; }\n", hdr);
    expect_error(buf, 3, "unterminated /* comment");
    snprintf(buf, sizeof buf, "%s.global .u32 x\n.entry k() { ret; }\n", hdr);
    expect_error(buf, 3, "not terminated");
    snprintf(buf, sizeof buf, "%s.bogus 1;\n", hdr);
    expect_error(buf, 3, "unknown module-level directive '.bogus'");
}

static void test_whole_reasons(void)
{
    /* DWARF of -G refers to labels of every function */
    const char *src = ".version 8.0\n.target sm_90\n.entry k() { ret; }\n"
                      ".section .debug_info\n{\n.b8 65,0\n}\n";
    tc_ptx_module m;
    tc_ptx_error err;
    CHECK(tc_ptx_parse(src, strlen(src), &m, &err) == 0);
    CHECK_CONTAINS(m.whole_reason, "debug sections (.debug_info at line 4: DWARF, from -G");
    tc_ptx_module_free(&m);
    /* a .debug_str of another shape than nvcc's */
    src = ".version 8.0\n.target sm_90\n.entry k() { ret; }\n"
          ".section .debug_str\n{\n$L__info_string0:\n.b32 65\n}\n";
    CHECK(tc_ptx_parse(src, strlen(src), &m, &err) == 0);
    CHECK_CONTAINS(m.whole_reason, "the .debug_str section at line 4 holds more than labels");
    CHECK(m.ninfos == 0);
    tc_ptx_module_free(&m);
    /* a .loc naming an inlined function that no entry defines */
    src = ".version 8.0\n.target sm_90\n.file 1 \"a.cu\"\n"
          ".entry k()\n{\n.loc 1 9 1\n"
          ".loc 1 5 3, function_name $L__info_string7, inlined_at 1 9 1\nret;\n}\n"
          ".section .debug_str\n{\n$L__info_string0:\n.b8 65,0\n}\n";
    CHECK(tc_ptx_parse(src, strlen(src), &m, &err) == 0);
    CHECK_CONTAINS(m.whole_reason, "line 7 names '$L__info_string7' as an inlined function");
    tc_ptx_module_free(&m);
    /* an inlined_at location no earlier .loc of the function uses: ptxas
     * wants one, and a unit holds only its own functions */
    src = ".version 8.0\n.target sm_90\n.file 1 \"a.cu\"\n"
          ".entry k()\n{\n.loc 1 5 3, function_name $L__info_string0, inlined_at 1 9 1\n"
          ".loc 1 9 1\nret;\n}\n"
          ".section .debug_str\n{\n$L__info_string0:\n.b8 65,0\n}\n";
    CHECK(tc_ptx_parse(src, strlen(src), &m, &err) == 0);
    CHECK_CONTAINS(m.whole_reason,
                   "line 6: inlined_at 1 9 1 names a location no earlier .loc of its function");
    tc_ptx_module_free(&m);
}

/* nvcc -lineinfo with inlined functions: the .debug_str entries are read,
 * and each function knows the ones its .loc directives name, once each. */
static void test_debug_strings(void)
{
    const char *src = ".version 8.0\n.target sm_90\n.file 1 \"a.cu\"\n"
                      ".entry k()\n{\n.loc 1 9 1\n"
                      ".loc 1 5 3, function_name $L__info_string1, inlined_at 1 9 1\n"
                      ".loc 1 6 3, function_name $L__info_string1, inlined_at 1 9 1\nret;\n}\n"
                      ".entry j()\n{\n.loc 1 7 3\nret;\n}\n"
                      ".section .debug_str\n{\n$L__info_string0:\n.b8 65,66,0\n"
                      "$L__info_string1:\n.b8 67\n.b8 0\n}\n";
    tc_ptx_module m;
    tc_ptx_error err;
    CHECK(tc_ptx_parse(src, strlen(src), &m, &err) == 0);
    CHECK_STR(m.whole_reason, "");
    CHECK(m.ninfos == 2 && m.section_stmt >= 0);
    const tc_ptx_stmt *k = NULL, *j = NULL;
    for (size_t i = 0; i < m.nstmts; i++)
        if (m.stmts[i].kind == TC_STMT_FUNC)
            *(k ? &j : &k) = &m.stmts[i];
    CHECK(k && k->info_count == 1 && m.inforefs[k->info_begin] == 1);
    CHECK(j && j->info_count == 0);
    /* named by their bytes: equal bytes, equal names */
    CHECK(!strncmp(m.infos[0].canon, TC_CANON_PREFIX "S", 6) &&
          strcmp(m.infos[0].canon, m.infos[1].canon));
    tc_ptx_module_free(&m);
}

/* An operand that names a label of its function is the label, also when
 * a module symbol has that name (canon.c renames it as a label): it is no
 * reference to the symbol. A call still is. */
static void test_labels_named_like_symbols(void)
{
    const char *src = ".version 8.0\n.target sm_90\n.address_size 64\n"
                      ".func func()\n{\nret;\n}\n"
                      ".entry k()\n{\n.reg .b64 %rd;\nfunc:\nmov.u64 %rd, func;\n"
                      "bra func;\n}\n"
                      ".entry j()\n{\ncall func, ();\nret;\n}\n";
    tc_ptx_module m;
    tc_ptx_error err;
    CHECK(tc_ptx_parse(src, strlen(src), &m, &err) == 0);
    for (size_t i = 0; i < m.nstmts; i++) {
        const tc_ptx_stmt *st = &m.stmts[i];
        if (st->kind != TC_STMT_FUNC || !st->is_entry)
            continue;
        const char *name = m.syms[st->sym].name;
        if (name[0] == 'k')
            CHECK(st->ref_count == 0);
        else
            CHECK(st->ref_count == 1 && m.refs[st->ref_begin].how == TC_REF_CALL);
    }
    tc_ptx_module_free(&m);
}

int main(void)
{
    test_structure();
    test_errors();
    test_whole_reasons();
    test_debug_strings();
    test_labels_named_like_symbols();
    return check_report("test_module");
}
