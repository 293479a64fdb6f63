/* key: derivation of unit and module keys (see key.h). */
#include "key/key.h"

#include <stdio.h>
#include <string.h>

#include "store/record.h"

static void common(tc_hash *h, const char *what, const tc_keyctx *k)
{
    char fmt[32];
    snprintf(fmt, sizeof fmt, "%u", TC_RECORD_FORMAT);
    tc_hash_field_str(h, "taskcache", what);
    tc_hash_field_str(h, "format", fmt);
    tc_hash_field_str(h, "target", k->target);
    for (size_t i = 0; i < k->nopts; i++)
        tc_hash_field_str(h, "opt", k->opts[i]);
    tc_hash_field_str(h, "compiler", k->compiler_id);
    if (k->auth) /* absent without a secret: those keys are as they always were */
        tc_hash_field_str(h, "auth", k->auth);
}

int tc_key_unit(const tc_keyctx *k, const char *mode, const char *text, size_t len,
                tc_digest *out)
{
    tc_hash *h = tc_hash_new();
    if (!h)
        return -1;
    common(h, "unit", k);
    tc_hash_field_str(h, "mode", mode);
    tc_hash_field(h, "text", text, len);
    tc_hash_final(h, out);
    tc_hash_free(h);
    return 0;
}

int tc_key_module(const tc_keyctx *k, const char *linker_id, const char *plan,
                   const void *input, size_t len, tc_digest *out)
{
    tc_hash *h = tc_hash_new();
    if (!h)
        return -1;
    char ver[16], rec[16];
    snprintf(ver, sizeof ver, "%d", TC_SLICER_VERSION);
    snprintf(rec, sizeof rec, "%d", TC_MODULE_RECORD_VERSION);
    common(h, "module", k);
    tc_hash_field_str(h, "slicer", ver);
    tc_hash_field_str(h, "module-record", rec);
    tc_hash_field_str(h, "linker", linker_id);
    tc_hash_field_str(h, "plan", plan);
    tc_hash_field(h, "input", input, len);
    tc_hash_final(h, out);
    tc_hash_free(h);
    return 0;
}

/* A key over the common fields, the tasks' mode, the host's version and
 * some bytes. */
static int host_key(const tc_keyctx *k, const char *what, const char *mode, const char *version,
                    const void *key, size_t len, tc_digest *out)
{
    tc_hash *h = tc_hash_new();
    if (!h)
        return -1;
    common(h, what, k);
    tc_hash_field_str(h, "mode", mode);
    tc_hash_field_str(h, "host", version);
    tc_hash_field(h, "key", key, len);
    tc_hash_final(h, out);
    tc_hash_free(h);
    return 0;
}

int tc_key_task(const tc_keyctx *k, const char *mode, const char *version, const void *key,
                size_t len, tc_digest *out)
{
    return host_key(k, "task", mode, version, key, len, out);
}

int tc_key_group(const tc_keyctx *k, const char *mode, const char *version, const void *key,
                 size_t len, tc_digest *out)
{
    return host_key(k, "group", mode, version, key, len, out);
}

int tc_key_task_module(const tc_keyctx *k, const char *linker_id, const char *version,
                       const tc_digest *tasks, size_t n, tc_digest *out)
{
    tc_hash *h = tc_hash_new();
    if (!h)
        return -1;
    common(h, "task-module", k);
    tc_hash_field_str(h, "linker", linker_id);
    tc_hash_field_str(h, "host", version);
    for (size_t i = 0; i < n; i++)
        tc_hash_field(h, "task", tasks[i].b, TC_DIGEST_LEN);
    tc_hash_final(h, out);
    tc_hash_free(h);
    return 0;
}
