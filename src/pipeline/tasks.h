/* tasks: builds driven by a host JIT: tc_build_tasks (tasks.c) and
 * tc_lookup_group (group.c), which share the task set below. Each task is
 * one compile unit whose text the host's codegen makes. Internal. */
#ifndef TC_PIPELINE_TASKS_H
#define TC_PIPELINE_TASKS_H

#include <pthread.h>

#include "pipeline/serial.h"
#include "pipeline/session.h"

/* What a codegen call hands back (tc_codegen_set_ptx and the others). */
struct tc_codegen {
    tc_sb ptx;
    tc_sb meta;
    int have_meta;
    char *error;
    int cancel;     /* tc_codegen_cancel */
};

typedef struct tc_task_unit {
    tc_unit u;
    char *name;
    struct tc_codegen gen;   /* the codegen's output, for a miss */
    int codegen_ran;         /* in this call */
    int failed;              /* codegen or compile failed */
    int whole_program_safe;  /* its text may compile -ewp (tasks.c, whole_program_safe) */
} tc_task_unit;

/* The tasks of one call, in the host's order. */
typedef struct tc_taskset {
    tc_session *s;
    const tc_host *host;         /* NULL for a lookup */
    const tc_task *tasks;        /* the host's, for codegen */
    tc_task_unit *units;
    size_t n;
    size_t *todo, ntodo, next;   /* todo[next, ntodo): the tasks left to generate */
    pthread_mutex_t codegen_lock;
    tc_serial *serial;           /* serialize_codegen: the host's turn, across calls */
    int cancelled;               /* a codegen call cancelled the build (atomic) */
    const struct tc_taskset *parent;  /* the call whose codegen started this one */
    int inited;
    tc_digest *keys;             /* the tasks' keys, in order (tc_taskset_module_key) */
    tc_digest module_key;
} tc_taskset;

/* 0, or -1 out of memory (tc_taskset_free frees what there is). */
/* How the session compiles tasks, as their keys and group keys name it:
 * whole programs where safe (see whole_program_safe in tasks.c) when whole-program
 * units link, else relocatable objects, with the options that come with
 * each. buf holds it. */
const char *tc_taskset_mode(const tc_session *s, char *buf, size_t n);

int tc_taskset_init(tc_taskset *t, tc_session *s, size_t n);
void tc_taskset_free(tc_taskset *t);
/* The key of the module linked from these tasks, in order, once their
 * keys are known. 0 or -1. */
int tc_taskset_module_key(tc_taskset *t, const char *version);
/* Serves the image from the module record when it names exactly these
 * tasks. 1 hit, 0 miss. */
int tc_taskset_module_hit(tc_taskset *t);
/* Links the tasks' objects, in order, into the result's image. */
tc_status tc_taskset_link(tc_taskset *t);
/* Reads the tasks' records into their units and sets each one's hit
 * (tc_payload_read_units). 0, or -1 out of memory. */
int tc_taskset_read(tc_taskset *t);
void tc_taskset_store_module(tc_taskset *t);
/* Moves the tasks' entries and infos into the result. */
tc_status tc_taskset_fill_result(tc_taskset *t);

#endif
