/* result: what tc_build, tc_explain, tc_build_tasks and tc_lookup_group
 * return, and its accessors. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/handles.h"
#include "util/fs.h"

tc_result *tc_result_new(void) { return calloc(1, sizeof(tc_result)); }

void tc_result_clear(tc_result *r)
{
    free(r->image);
    r->image = NULL;
    r->image_len = 0;
    tc_entries_free(r->entries, r->nentries);
    r->entries = NULL;
    r->nentries = 0;
    free(r->whole_reason);
    r->whole_reason = NULL;
    tc_sb_reset(&r->diag);
    memset(&r->report, 0, sizeof r->report);
}

void tc_result_free(tc_result *r)
{
    if (!r)
        return;
    tc_result_clear(r);
    tc_sb_free(&r->diag);
    free(r->compiler);
    free(r->slowest);
    for (size_t i = 0; i < r->ntasks; i++) {
        free((char *)r->tasks[i].name);
        free((char *)r->tasks[i].key);
        free((void *)r->tasks[i].metadata);
    }
    free(r->tasks);
    free(r);
}

size_t tc_result_task_count(const tc_result *r) { return r->ntasks; }

tc_status tc_result_task(const tc_result *r, size_t i, tc_task_info *out)
{
    if (i >= r->ntasks)
        return TC_ERR_INVALID;
    *out = r->tasks[i];
    return TC_OK;
}

tc_status tc_result_status(const tc_result *r) { return r->status; }

const void *tc_result_image(const tc_result *r, size_t *size)
{
    if (size)
        *size = r->image ? r->image_len : 0;
    return r->image;
}

tc_status tc_result_write_image(const tc_result *r, const char *path, tc_error *err)
{
    tc_clear_error(err);
    if (!r->image)
        return tc_set_error(err, TC_ERR_INVALID, "the build produced no image");
    if (!path || !*path)
        return tc_set_error(err, TC_ERR_INVALID, "no output path");
    if (tc_write_output(path, r->image, r->image_len) != 0)
        return tc_set_error(err, TC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return TC_OK;
}

const char *tc_result_diagnostics(const tc_result *r) { return r->diag.data ? r->diag.data : ""; }

const char *tc_result_whole_reason(const tc_result *r) { return r->whole_reason; }

const char *tc_result_compiler(const tc_result *r) { return r->compiler ? r->compiler : ""; }

const char *tc_result_slowest(const tc_result *r) { return r->slowest ? r->slowest : ""; }

void tc_result_report(const tc_result *r, tc_report *out) { *out = r->report; }

size_t tc_result_entry_count(const tc_result *r) { return r->nentries; }

tc_status tc_result_entry(const tc_result *r, size_t i, tc_entry_info *out)
{
    if (i >= r->nentries)
        return TC_ERR_INVALID;
    *out = r->entries[i];
    return TC_OK;
}
