/* slice: turns a parsed module into self-contained relocatable PTX texts.
 *
 * - A *unit* holds one or more entries: the module header, `.extern`
 *   declarations of the variables and address-taken functions it uses,
 *   copies of the module-scope .shared/.local variables it uses, internal
 *   copies of every function it calls, then its entries.
 * - The *module data* object defines every variable exactly once (made
 *   .visible) plus every function whose address is taken or that declares
 *   static storage (.global/.const/.shared inside its body), so pointer
 *   identity and shared state are exactly those of the whole module.
 *
 * All texts are canonical (canon.h) and every set is emitted in name
 * order, so a text depends only on what it contains, never on where other
 * things sit in the module or on its layout. */
#ifndef TC_PTX_SLICE_H
#define TC_PTX_SLICE_H

#include <stddef.h>
#include <stdint.h>

#include "ptx/canon.h"
#include "ptx/module.h"
#include "util/hash.h"
#include "util/strbuf.h"

/* Maps lines of an emitted text back to lines of the input. */
typedef struct tc_line_seg {
    uint32_t out_line;  /* first line in the emitted text (1-based) */
    uint32_t in_line;   /* corresponding input line */
    uint32_t count;     /* number of lines */
} tc_line_seg;

typedef struct tc_text {
    tc_sb text;
    tc_line_seg *segs;
    size_t nsegs, cap_segs;
    uint32_t line;      /* current output line (1-based) */
} tc_text;

void tc_text_free(tc_text *t);
/* Input line for an output line, or 0 when it has none. */
uint32_t tc_text_map_line(const tc_text *t, uint32_t out_line);

typedef struct tc_slicer tc_slicer;

/* Analyzes the module. Returns 0 and a slicer when it can be split; returns
 * 1 with `why` filled when it must be compiled whole; -1 out of memory. */
int tc_slicer_create(const tc_ptx_module *m, tc_slicer **out, char *why, size_t whylen);
void tc_slicer_free(tc_slicer *s);

/* Entries in name order. */
size_t tc_slicer_entry_count(const tc_slicer *s);
const tc_ptx_stmt *tc_slicer_entry(const tc_slicer *s, size_t i);
/* Estimated compile cost of entry i: its statements plus those of every
 * function copied into its slice. */
uint32_t tc_slicer_entry_cost(const tc_slicer *s, size_t i);

/* The functions units hold (every entry, every function some unit
 * copies), and the canonical text of the i-th of them made ahead of the
 * units' emission, which then only assembles such texts. Calls for
 * different i may run on different threads at once, but not while
 * anything else uses the slicer. 0 ok, -1 out of memory (the text is then
 * made again when a unit needs it). */
size_t tc_slicer_function_count(const tc_slicer *s);
int tc_slicer_canon_function(const tc_slicer *s, size_t i);

/* The memo of those texts across processes (pipeline/canon_memo.c). A
 * function's canonical text is made from its bytes, the labels the parser
 * found in them, its linkage, and the names units give the module's
 * compiler-named constants and inlined functions (canon.h). The context
 * digests the names, once per module; a function's key digests the
 * context and the rest, so that equal keys mean equal texts. Both 0, or
 * -1 out of memory. */
int tc_slicer_memo_context(const tc_slicer *s, tc_digest *out);
int tc_slicer_function_key(const tc_slicer *s, size_t i, const tc_digest *context,
                           tc_digest *out);
/* The i-th function's text when made (NULL otherwise), and the input line
 * its statement starts on: the lines of the text are kept relative to it. */
const tc_piece *tc_slicer_function_text(const tc_slicer *s, size_t i, uint32_t *first_line);
/* Gives the i-th function the text a memo holds for its key, lines
 * relative to its first line; as tc_slicer_canon_function, calls for
 * different i may run at once. 0, or -1 out of memory. */
int tc_slicer_set_function_text(const tc_slicer *s, size_t i, const char *text, size_t len,
                                const uint32_t *lines, size_t nlines);

/* Emits a unit holding entries idx[0..n) (indices in name order, sorted
 * ascending). *whole_program is set when the unit may be compiled with
 * whole-program code generation (ptxas -ewp): when it calls or takes the
 * address of no function of the module data (ptxas allows neither there),
 * makes no call through a register, and reads only .global variables, or
 * .const ones under
 * tc_slicer_set_whole_program's conditions. 0 ok, -1 out of memory. */
int tc_slicer_emit_unit(tc_slicer *s, const uint32_t *idx, size_t n, tc_text *out,
                        int *whole_program);

/* Whole-program units (ptxas -ewp) asked for: from now on units that read
 * .const variables declare them so that -ewp code reads them where the
 * linked image has them, when the module allows (no module-data functions
 * or aliases, every .const variable defined here with a size the
 * declaration states, no addresses in initializers); the module data must
 * then be compiled -ewp too. 0 ok, -1 out of memory. */
int tc_slicer_set_whole_program(tc_slicer *s, int on);
/* After tc_slicer_set_whole_program: 1 (with why) when a kernel's code
 * needs whole-program units (a dynamic .shared array aligned above 16
 * bytes, setmaxnreg, .pragma "enable_smem_spilling") and some kernel's
 * unit would be relocatable (-c), in
 * which the linker or ptxas would make other code than the whole build:
 * the module is to be compiled whole. 0 when not, -1 out of memory. */
int tc_slicer_relocatable_hazard(tc_slicer *s, char *whybuf, size_t whylen);
/* Whether the module data is to be compiled -ewp (see above). */
int tc_slicer_module_data_whole_program(const tc_slicer *s);
/* The i-th .const variable as emitted (name, not NUL-terminated at len) and
 * the bank-3 offset whole-program units assume for it; -1 past the last,
 * or when the module data is not compiled -ewp. */
int tc_slicer_const_var(const tc_slicer *s, size_t i, const char **name, size_t *len,
                        uint64_t *offset);
/* Whether a module-data object is needed, and its text. */
int tc_slicer_has_module_data(const tc_slicer *s);
int tc_slicer_emit_module_data(tc_slicer *s, tc_text *out);

#endif
