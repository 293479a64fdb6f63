/* canon_memo: the canonical texts of a module's functions, kept in the
 * cache from one build to the next. Keying a split module is mostly making
 * those texts (a 250-kernel module on 2 cores: 10-15 ms of a 50 ms relink);
 * the next build of the module, or of an edited copy, takes every function
 * whose key is unchanged from the memo and makes only the others.
 *
 * A function's memo key digests everything its text is made from
 * (tc_slicer_function_key), so a memo from any other module, or an older
 * version of this one, can only miss, never give a wrong text. The memo
 * of a module is found by its lineage: the names of its kernels, which an
 * edit of their bodies leaves alone. It is rewritten when it was missing or
 * an eighth of the module's functions were not in it: an edit of one kernel
 * reads it and writes nothing. Local only: never sent to a remote. */
#ifndef TC_PIPELINE_CANON_MEMO_H
#define TC_PIPELINE_CANON_MEMO_H

#include "pipeline/session.h"
#include "ptx/slice.h"

typedef struct tc_canon_memo tc_canon_memo;

/* Reads the memo of the slicer's module (none without a store, or with
 * the unit tier off). NULL only when out of memory. */
tc_canon_memo *tc_canon_memo_open(tc_session *s, const tc_ptx_module *mod, const tc_slicer *sl);

/* Gives function i (tc_slicer_function_count) its canonical text: from
 * the memo when it holds the function's key, else made. Calls for
 * different i may run on different threads at once. 0, or -1 out of
 * memory. */
int tc_canon_memo_fill(tc_canon_memo *m, size_t i);

/* Stores the texts when the memo should be rewritten (see above). */
void tc_canon_memo_save(tc_canon_memo *m);

void tc_canon_memo_free(tc_canon_memo *m);

/* Decodes a memo payload into n texts (for the fuzzer): 0, or -1 when it
 * is malformed. */
int tc_canon_memo_check_payload(const char *payload, size_t len, size_t *n);

#endif
