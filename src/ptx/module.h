/* module: the module-level model of a PTX file. Only module-level structure
 * is parsed (directives, variables, function headers); function bodies are
 * tokenized once to collect the module symbols they reference and whether
 * each reference is a direct call or a use of the symbol's address/value.
 * Everything points into the caller's text, which must outlive the model. */
#ifndef TC_PTX_MODULE_H
#define TC_PTX_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "util/map.h"

typedef enum {
    TC_LINK_INTERNAL = 0, /* no linkage directive: private to the module */
    TC_LINK_VISIBLE,
    TC_LINK_EXTERN,
    TC_LINK_WEAK,
    TC_LINK_COMMON
} tc_linkage;

typedef enum {
    TC_STMT_VERSION,
    TC_STMT_TARGET,
    TC_STMT_ADDRSIZE,
    TC_STMT_FILE,
    TC_STMT_SECTION,
    TC_STMT_PRAGMA,
    TC_STMT_ALIAS,
    TC_STMT_VAR,
    TC_STMT_FUNC
} tc_stmt_kind;

typedef enum {
    TC_SPACE_NONE = 0,
    TC_SPACE_GLOBAL,
    TC_SPACE_CONST,
    TC_SPACE_SHARED,
    TC_SPACE_LOCAL,
    TC_SPACE_TEX
} tc_space;

enum { TC_REF_USE = 1, TC_REF_CALL = 2 };

typedef struct tc_ptx_ref {
    uint32_t sym;
    uint8_t how; /* TC_REF_USE and/or TC_REF_CALL */
} tc_ptx_ref;

typedef struct tc_ptx_param {
    const char *name;
    uint32_t name_len;
    uint32_t offset;   /* byte offset in the kernel parameter buffer */
    uint32_t size;     /* bytes */
    uint32_t align;
    char type[12];     /* element type without the dot, e.g. "u64", "b8" */
} tc_ptx_param;

/* Performance directives of an entry (0 when absent). */
typedef struct tc_ptx_perf {
    uint32_t maxntid[3];
    uint32_t reqntid[3];
    uint32_t minnctapersm;
    uint32_t maxnreg;
    uint32_t reqnctapercluster[3];
    uint32_t maxclusterrank;
    uint8_t explicitcluster;
    uint8_t noreturn;
} tc_ptx_perf;

/* What a function body uses that a relocatable (-c) compile cannot give
 * it as the whole module gets it (tc_ptx_stmt.ewp_only). */
enum {
    TC_EWP_SETMAXNREG = 1, /* setmaxnreg: -c drops it */
    TC_EWP_SMEM_SPILLING = 2 /* .pragma "enable_smem_spilling": -c refuses it */
};

typedef struct tc_ptx_stmt {
    uint8_t kind;       /* tc_stmt_kind */
    uint8_t linkage;    /* tc_linkage (variables and functions) */
    uint8_t space;      /* tc_space (variables) */
    uint8_t is_entry;
    uint8_t has_body;   /* function definition (vs. prototype) */
    uint8_t static_vars; /* body declares .global/.const/.shared/.tex variables:
                            one object per module, whoever calls the function */
    uint8_t own_const;  /* body declares .const or .tex variables: data in
                           banks a whole-program unit lays out from 0 */
    uint8_t indirect_call; /* body calls through a register */
    uint8_t ewp_only;   /* body needs what ptxas -c does not do: TC_EWP_* bits */
    uint32_t line;      /* first line */
    uint32_t last_line;
    size_t start, end;  /* [start, end) in the source, end past ';' or '}' */
    size_t body;        /* functions with a body: offset of '{' */
    size_t proto_end;   /* functions: end of the prototype (after params and
                           .noreturn), where a declaration would put ';' */
    size_t init;        /* variables: offset of '=' when initialized, else 0 */
    int32_t sym;        /* symbol declared or defined, -1 for others */
    uint32_t ref_begin, ref_count; /* into module refs */
    uint32_t loc_begin, loc_count; /* functions: file numbers their .loc
                                      directives name, into module locfiles;
                                      .file: loc_begin is its number */
    uint32_t info_begin, info_count; /* functions: the .debug_str entries their
                                        .loc directives name, into module inforefs */
    uint32_t cost;      /* functions: number of body statements */
    uint32_t param_begin, param_count; /* entries: into module params */
    uint32_t label_begin, label_count; /* functions with a body: the labels
                                          they define, into module labels */
    uint8_t labels_known; /* the body was walked: label_* and canon_rename hold */
    uint8_t canon_rename; /* no name of the body that keeps its spelling has
                             TC_CANON_PREFIX, so canon.c may rename its labels
                             and .local variables */
    uint32_t param_bytes;
    tc_ptx_perf perf;
} tc_ptx_stmt;

enum { TC_SYM_VAR = 1, TC_SYM_FUNC = 2, TC_SYM_ALIAS = 3 };

typedef struct tc_ptx_sym {
    const char *name;
    uint32_t len;
    uint8_t kind;       /* TC_SYM_* */
    uint8_t is_entry;
    int32_t def;        /* defining statement, -1 if only declared */
    int32_t decl;       /* first declaring statement (may equal def) */
    int32_t alias_of;   /* aliases: target symbol */
} tc_ptx_sym;

/* An entry of the module's .debug_str section: nvcc -lineinfo names each
 * inlined function in the .loc directives of its callers by a label of
 * that section ("function_name $L__info_string3"), numbered by position in
 * the module. */
typedef struct tc_ptx_info {
    const char *label;
    uint32_t len;
    uint32_t line;          /* of the label */
    size_t data, data_end;  /* its ".b8 n,n,..." lists in the source */
    char canon[40];         /* the name units give it, from its bytes */
} tc_ptx_info;

/* A label of a function, as [off, off + len) of the source. */
typedef struct tc_ptx_label {
    size_t off;
    uint32_t len;
} tc_ptx_label;

typedef struct tc_ptx_module {
    const char *src;
    size_t len;
    tc_ptx_stmt *stmts;
    size_t nstmts, cap_stmts;
    tc_ptx_sym *syms;
    size_t nsyms, cap_syms;
    tc_ptx_ref *refs;
    size_t nrefs, cap_refs;
    tc_ptx_param *params;
    size_t nparams, cap_params;
    uint32_t *locfiles;
    size_t nlocfiles, cap_locfiles;
    tc_ptx_label *labels;   /* per function, in order of definition, each once */
    size_t nlabels, cap_labels;
    tc_map symtab;
    tc_ptx_info *infos;     /* the .debug_str section's entries, in order */
    size_t ninfos, cap_infos;
    tc_map infomap;         /* label -> index into infos */
    int32_t section_stmt;   /* that section, or -1 */
    uint32_t *inforefs;
    size_t ninforefs, cap_inforefs;
    int32_t version_stmt, target_stmt, addrsize_stmt;
    size_t nentries;
    char target[32];        /* first .target name, e.g. "sm_90" */
    /* Set when the module holds a construct that cannot be split safely;
     * the module is then compiled whole. Static strings or owned text. */
    char whole_reason[256];
    /* ptxas 13.0 aborts (a double free) on some modules of this shape; the
     * in-process compiler would take the calling process with it, so such
     * a module is compiled by a ptxas process where there is one. */
    int may_crash_compiler;
} tc_ptx_module;

typedef struct tc_ptx_error {
    uint32_t line;
    char message[256];
} tc_ptx_error;

/* Length of the PTX text in src[0..len): up to the first NUL byte, as the
 * CUDA driver reads it (JITs hand it NUL-terminated strings, and a dumped
 * module often ends in "\0\n"). */
size_t tc_ptx_text_len(const char *src, size_t len);

/* Parses src[0..len). Returns 0 on success (free the model with
 * tc_ptx_module_free), or -1 on a syntax error at module level (err filled)
 * or out of memory (err->line 0); nothing is left to free then. */
int tc_ptx_parse(const char *src, size_t len, tc_ptx_module *m, tc_ptx_error *err);
void tc_ptx_module_free(tc_ptx_module *m);

/* Prefix of the canonical names the slicer gives labels, local variables
 * and compiler-named constants. */
#define TC_CANON_PREFIX "$__tc"

/* Declarations canon.c renames in order of definition: .local variables
 * (nvcc numbers its __local_depotN by the function's position). Parameters
 * keep their names: ptxas 13.0 crashed on units whose functions shared
 * renamed parameter names with .texref parameters among them. */
static inline int tc_canon_renamed_space(uint16_t space) { return space == TC_SPACE_LOCAL; }

#endif
