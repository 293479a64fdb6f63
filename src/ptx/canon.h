/* canon: the canonical text of PTX statements, which is both what units
 * compile and what their keys hash. It depends on a statement's tokens
 * only, never on the input's layout or on the rest of the module:
 *
 * - comments are dropped; a function's header is one line and each of its
 *   statements, labels and block braces starts a line of its own; any other
 *   statement is one line;
 * - tokens are separated by one space after an opcode or a comma and
 *   between two words, and by nothing elsewhere (two operator characters
 *   keep the input's separation: "<<" is one operator, "- -1" two);
 * - labels and .local variables of a function are renamed in order of
 *   definition (nvcc numbers them by the function's position in the
 *   module: $L__BB12_3, __local_depot12), unless the function itself names
 *   something else with the reserved prefix, which could then collide;
 * - internal compiler-named constants ($str, $str$1, __unnamed_1: numbered
 *   by position in the module) get names derived from their content
 *   (tc_canon_name_constants), and so do the .debug_str entries that .loc
 *   directives name as inlined functions ($L__info_string3).
 *
 * Each piece keeps the input line of every output line, so that ptxas's
 * messages about a unit lead back to the input. */
#ifndef TC_PTX_CANON_H
#define TC_PTX_CANON_H

#include <stddef.h>
#include <stdint.h>

#include "ptx/module.h"
#include "util/strbuf.h"

/* How a statement's linkage directive is rewritten. */
enum {
    TC_CANON_KEEP,     /* as written */
    TC_CANON_DROP,     /* removed: internal linkage */
    TC_CANON_VISIBLE,  /* as written, .visible added to internal symbols */
    TC_CANON_EXTERN    /* replaced by .extern */
};

/* Canonical names of module symbols: per symbol its new name, or "" for
 * its own (NULL: every symbol keeps its name). */
typedef char tc_canon_name[40];

typedef struct tc_piece {
    tc_sb text;          /* whole lines, each ending in '\n' */
    uint32_t *lines;     /* input line of each output line */
    size_t nlines, cap;
} tc_piece;

void tc_piece_free(tc_piece *p);
/* Empties p, keeping its memory. */
void tc_piece_reset(tc_piece *p);

/* Appends statement st, its linkage rewritten per `link`. `blank`: a
 * symbol whose name token is written as "$" (to hash a constant's content
 * without its name), or NULL. 0, or -1 out of memory. */
int tc_canon_stmt(const tc_ptx_module *m, const tc_canon_name *names, const tc_ptx_stmt *st,
                  int link, const tc_ptx_sym *blank, tc_piece *out);

/* Appends a one-line declaration: statement st from its start up to
 * offset `cut` (the end of a prototype, or a variable without its
 * initializer), then ";". 0, or -1 out of memory. */
int tc_canon_decl(const tc_ptx_module *m, const tc_canon_name *names, const tc_ptx_stmt *st,
                  size_t cut, int link, tc_piece *out);

/* Appends a .debug_str section holding entries idx[0..n) of the module's
 * (in that order), each under its canonical name. 0, or -1 out of memory. */
int tc_canon_infos(const tc_ptx_module *m, const uint32_t *idx, size_t n, tc_piece *out);

/* Names the module's internal compiler-named constants by content (see
 * above). rank[sym] orders symbols by name. *out is NULL when the module
 * has none, or when a symbol that keeps its name already uses the names'
 * prefix; else an array of m->nsyms names to free. 0, or -1 out of
 * memory. */
int tc_canon_name_constants(const tc_ptx_module *m, const uint32_t *rank, tc_canon_name **out);

#endif
