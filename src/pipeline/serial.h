/* serial: tc_host.serialize_codegen across calls. A host is its codegen
 * function and its user pointer: every tc_build_tasks of the process with
 * the same pair and serialization on runs one codegen call at a time. */
#ifndef TC_PIPELINE_SERIAL_H
#define TC_PIPELINE_SERIAL_H

#include "taskcache.h"

typedef struct tc_serial tc_serial;

/* The host's entry, created on first use; NULL when out of memory. Each
 * acquire is paired with one release. */
tc_serial *tc_serial_acquire(tc_codegen_fn fn, void *user);
void tc_serial_release(tc_serial *s);

/* Waits until no codegen call of the host runs, then marks one running. */
void tc_serial_lock(tc_serial *s);
void tc_serial_unlock(tc_serial *s);

#endif
