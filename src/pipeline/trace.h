/* trace: where a build's time went. Each compile (a unit, a module compiled
 * whole, a task), each host codegen call and the link is an event; when the
 * build ends, the slowest compiles become tc_result_slowest's words, and
 * with a trace file (tc_options_set_trace, $TASKCACHE_TRACE) every event is
 * appended to it in the Trace Event Format that Perfetto and
 * chrome://tracing open. Internal.
 *
 * The file is the format's JSON array without its closing bracket, which
 * the format allows, so that builds of many processes append to one file:
 *   [
 *   {"name": "k_step, k_init (+3)", "cat": "compile", "ph": "X",
 *    "ts": <start, microseconds of CLOCK_MONOTONIC>, "dur": <microseconds>,
 *    "pid": <process>, "tid": <thread>, "args": {"build": "<input name>"}},
 *   ...
 * A writer holds an exclusive flock on the file while it appends, and
 * writes "[" when it finds the file empty; events are separated by ",". */
#ifndef TC_PIPELINE_TRACE_H
#define TC_PIPELINE_TRACE_H

#include <pthread.h>
#include <stddef.h>

#include "util/strbuf.h"

typedef struct tc_trace_event {
    char name[160];
    const char *what;        /* "compile", "codegen", "link", "build" */
    double t0, t1;           /* tc_now() */
    long tid;
} tc_trace_event;

typedef struct tc_trace {
    pthread_mutex_t lock;
    tc_trace_event *events;
    size_t n, cap;
} tc_trace;

void tc_trace_init(tc_trace *t);
void tc_trace_free(tc_trace *t);

/* Records one event on the calling thread; name[0..len) is cut to fit.
 * Out of memory drops it: a trace never fails a build. */
void tc_trace_add(tc_trace *t, const char *what, const char *name, size_t len, double t0,
                  double t1);

/* The slowest compiles, slowest first, at most `most`, in words
 * ("k_step (+3) 0.812 s; k_init 0.455 s"); "" when none. A host task's
 * seconds hold its codegen too, also given on its own
 * ("t_step 1.204 s (codegen 0.930)"). */
void tc_trace_slowest(const tc_trace *t, size_t most, tc_sb *out);

/* Appends the events to the trace file at path, with build (the input's
 * name) in each event's args. Returns 0, or -1 with errno when the file
 * cannot be written. */
int tc_trace_write(const tc_trace *t, const char *path, const char *build);

#endif
