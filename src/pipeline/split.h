/* split: the split path of tc_build and tc_explain, and the state of
 * those calls, which module.c drives and hands over here when the module
 * can be split. Internal. */
#ifndef TC_PIPELINE_SPLIT_H
#define TC_PIPELINE_SPLIT_H

#include <pthread.h>
#include <stdatomic.h>

#include "pipeline/canon_memo.h"
#include "pipeline/session.h"
#include "ptx/slice.h"

/* A compile unit of a split module: some of its kernels (or its module
 * data object) as one canonical text. */
typedef struct tc_split_unit {
    tc_unit u;
    uint32_t first, count;  /* kernels [first, first+count) in name order */
    int is_module_data;     /* the module-data object (variables, shared functions) */
    tc_out_kind kind;       /* how it compiles: TC_OUT_EWP or TC_OUT_OBJECT */
    uint64_t cost;          /* text bytes: schedules the largest first */
    tc_text map;            /* its text, and the line map back to the input */
    char *path;             /* scratch .ptx of a miss (the ptxas backend) */
    double deferred_since;  /* when its lease was first found held */
    int expect_hit;         /* its record seems to be there: read it before compiling */
    atomic_int ready;       /* its object is ready to link (feed_link) */
} tc_split_unit;

/* One tc_build or tc_explain. */
typedef struct tc_ptx_job {
    tc_session *s;
    const char *src;
    size_t len;             /* of the PTX text: up to the first NUL */
    size_t input_len;       /* of the input, which the module key covers */
    char plan[64];          /* how it is built, part of the module key */
    tc_digest module_key;
    tc_ptx_module m;
    int parsed;
    int ptxas_instead;      /* the in-process compiler's module, built by ptxas */
    int keep_inprocess_key; /* the module record goes under inprocess_key too */
    tc_digest inprocess_key;    /* (tc_options_set_inprocess_crashed) */
    tc_slicer *slicer;
    tc_canon_memo *memo;    /* the canonical texts of its functions across builds */
    tc_split_unit *units;   /* the module data first, when there is one */
    size_t nunits;
    tc_sb warnings;         /* the compiler's warnings, for the module record */
    pthread_mutex_t emit_lock;  /* the slicer, which workers emit texts with */
    atomic_int keying_failed;   /* a unit's key could not be made (out of memory) */
    pthread_mutex_t link_lock;  /* the link, which workers feed as units get ready */
    tc_link_job *link;          /* started when the units are, finished by the build */
    size_t linked;              /* units added to it: a prefix, in link order */
} tc_ptx_job;

/* Groups the kernels into units of about `target` PTX statements
 * (j->units, the module data first when there is one). 0, or -1 out of
 * memory. */
int tc_split_plan(tc_ptx_job *j, uint32_t target);
/* Keys the units tc_split_plan made, serves what the cache has, compiles
 * the rest and links (explain: only keys and looks up). */
tc_status tc_split_build(tc_ptx_job *j);
/* Frees the units. */
void tc_split_free(tc_ptx_job *j);

#endif
