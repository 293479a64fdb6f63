/* payload: writing and reading what records hold (see payload.h).
 * Records have verified checksums before they get here, but the decoders
 * still check every length: a malformed payload is a miss, never a crash. */
#define _GNU_SOURCE
#include "pipeline/payload.h"

#include <stdlib.h>
#include <string.h>

#include "util/pool.h"
#include "store/record.h"

/* Counts the fields of one tag; -1 when the field list is malformed. */
static long count_fields(const char *p, size_t n, uint32_t want)
{
    tc_reader rd;
    tc_reader_init(&rd, p, n);
    uint32_t tag;
    const unsigned char *f;
    size_t len;
    long count = 0;
    int rc;
    while ((rc = tc_field_next(&rd, &tag, &f, &len)) == 1)
        count += tag == want;
    return rc < 0 ? -1 : count;
}

/* The entries as ENTRY fields. verbose: with the kernels' -v lines, which
 * a module record keeps; a unit or task record keeps its compiler's whole
 * log instead, from which the decoder reads them again, so its entries are
 * those of the versions before they were kept. */
static void put_entries(tc_sb *out, const tc_entry_info *entries, size_t n, int verbose)
{
    tc_sb e = TC_SB_INIT;
    for (size_t i = 0; i < n; i++) {
        tc_entry_info t = entries[i];
        if (!verbose)
            t.verbose = t.verbose_head = NULL;
        tc_sb_reset(&e);
        tc_entry_encode(&t, &e);
        tc_field_put(out, TC_F_ENTRY, e.data, e.len);
    }
    tc_sb_free(&e);
}

/* An array for the ENTRY fields of a payload; -1 when the field list is
 * malformed or out of memory. */
static int alloc_entries(const char *p, size_t n, tc_entry_info **entries)
{
    long count = count_fields(p, n, TC_F_ENTRY);
    if (count < 0 || !(*entries = calloc(count ? (size_t)count : 1, sizeof **entries)))
        return -1;
    return 0;
}

/* ---- unit and task records ------------------------------------------------------- */

void tc_payload_encode_unit(const char *name, const tc_unit *u, tc_sb *out)
{
    if (name)
        tc_field_put(out, TC_F_NAME, name, strlen(name));
    tc_field_put(out, TC_F_OBJECT, u->object.data, u->object.len);
    put_entries(out, u->entries, u->nentries, 0);
    if (u->have_meta)
        tc_field_put(out, TC_F_HOST_META, u->meta.data, u->meta.len);
    if (u->log.len)
        tc_field_put(out, TC_F_LOG, u->log.data, u->log.len);
}

/* Decodes a unit payload into u. With own (the address of the buffer p,
 * which the caller would free), the object is moved to the start of that
 * buffer, which becomes u->object: a relink reads a hundred objects, and
 * copying each into a buffer of its own wrote 3.5 MB of fresh pages more
 * for a 250-kernel module. */
static int decode_unit_payload(const char *p, size_t n, tc_unit *u, char **own)
{
    if (alloc_entries(p, n, &u->entries) != 0)
        return -1;
    tc_reader rd;
    tc_reader_init(&rd, p, n);
    uint32_t tag;
    const unsigned char *f, *object = NULL;
    size_t len, object_len = 0;
    int rc;
    while ((rc = tc_field_next(&rd, &tag, &f, &len)) == 1) {
        if (tag == TC_F_OBJECT && !object) {
            object = f;
            object_len = len;
        } else if (tag == TC_F_ENTRY) {
            if (tc_entry_decode(f, len, &u->entries[u->nentries]) != 0)
                break;
            u->nentries++;
        } else if (tag == TC_F_LOG) {
            tc_sb_append(&u->log, f, len);
        } else if (tag == TC_F_HOST_META && !u->have_meta) {
            tc_sb_append(&u->meta, f, len);
            u->have_meta = 1;
        }
    }
    /* a field has a header before its bytes, so the buffer has room for
     * the object and the NUL a tc_sb keeps after it */
    if (rc == 0 && object && own && object_len < n) {
        tc_sb_free(&u->object);
        memmove(*own, object, object_len);
        (*own)[object_len] = '\0';
        u->object = (tc_sb){*own, object_len, n, 0};
        *own = NULL;
    } else if (object) {
        tc_sb_append(&u->object, object, object_len);
    }
    if (rc != 0 || !object || u->object.oom || u->log.oom || u->meta.oom ||
        tc_entries_take_resources(u->entries, u->nentries, u->log.data ? u->log.data : "",
                                  u->log.len) != 0) {
        tc_unit_clear(u);
        return -1;
    }
    return 0;
}

int tc_payload_decode_unit(const char *p, size_t n, tc_unit *u)
{
    return decode_unit_payload(p, n, u, NULL);
}

static int decode_unit(void *ctx, char **payload, size_t len)
{
    return decode_unit_payload(*payload, len, ctx, payload);
}

static void undo_unit(void *ctx) { tc_unit_clear(ctx); }

int tc_payload_read_unit(tc_session *s, uint32_t kind, tc_unit *u, int first_look)
{
    return tc_session_read_record(s, kind, &u->key, first_look, decode_unit, undo_unit, u);
}

typedef struct unit_reads {
    tc_session *s;
    uint32_t kind;
    tc_unit_at_fn unit;
    void *ctx;
} unit_reads;

static tc_pool_step read_one(void *ctx, size_t i)
{
    const unit_reads *r = ctx;
    tc_unit *u = r->unit(r->ctx, i);
    u->hit = tc_payload_read_unit(r->s, r->kind, u, 1);
    return TC_POOL_DONE;
}

int tc_payload_read_units(tc_session *s, uint32_t kind, tc_unit_at_fn unit, void *ctx,
                          size_t n)
{
    uint8_t *remote = tc_session_prefetch(s, kind, unit, ctx, n);
    size_t *items = malloc((n ? n : 1) * sizeof *items), nread = 0;
    if (!items) {
        free(remote);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        unit(ctx, i)->hit = 0;
        if (!(remote && remote[i] == TC_PREFETCH_ASKED))
            items[nread++] = i;
    }
    free(remote);
    unit_reads r = {s, kind, unit, ctx};
    tc_pool_work w = {items, nread, s->o->jobs, read_one, NULL, &r};
    int rc = tc_pool_run(&w);
    free(items);
    return rc;
}

void tc_payload_write_unit(tc_session *s, uint32_t kind, const char *name, const tc_unit *u)
{
    tc_sb p = TC_SB_INIT;
    tc_payload_encode_unit(name, u, &p);
    tc_session_write_record(s, kind, &u->key, &p);
    tc_sb_free(&p);
}

/* ---- module records ------------------------------------------------------------- */

/* The warnings of a build of the input `name` ("NAME:12: warning: ...")
 * without the name (":12: warning: ..."): a module record serves the same
 * text under any name, and its warnings are replayed under the name of the
 * build that reads it. */
static void put_warnings(tc_sb *out, const tc_sb *warnings, const char *name)
{
    size_t nlen = strlen(name);
    tc_sb t = TC_SB_INIT;
    for (const char *d = warnings->data, *end = d + warnings->len; d < end;) {
        const char *nl = memchr(d, '\n', (size_t)(end - d));
        size_t n = nl ? (size_t)(nl + 1 - d) : (size_t)(end - d);
        size_t cut = nlen && n > nlen && !memcmp(d, name, nlen) && d[nlen] == ':' ? nlen : 0;
        tc_sb_append(&t, d + cut, n - cut);
        d += n;
    }
    if (!t.oom)
        tc_field_put(out, TC_F_LOG, t.data, t.len);
    tc_sb_free(&t);
}

/* The record's warnings under this build's name (put_warnings). */
static void replay_warnings(tc_result *r, const char *f, size_t len, const char *name)
{
    for (const char *d = f, *end = f + len; d < end;) {
        const char *nl = memchr(d, '\n', (size_t)(end - d));
        size_t n = nl ? (size_t)(nl + 1 - d) : (size_t)(end - d);
        if (*d == ':')
            tc_sb_append(&r->diag, name, strlen(name));
        tc_sb_append(&r->diag, d, n);
        d += n;
    }
}

void tc_payload_encode_module(const tc_result *r, const tc_digest *unit_keys, size_t n,
                              const tc_sb *warnings, const char *name, tc_sb *out)
{
    tc_field_put(out, TC_F_IMAGE, r->image, r->image_len);
    put_entries(out, r->entries, r->nentries, 1);
    for (size_t i = 0; i < n; i++)
        tc_field_put(out, TC_F_UNIT_KEY, unit_keys[i].b, TC_DIGEST_LEN);
    if (r->whole_reason)
        tc_field_put(out, TC_F_WHOLE_REASON, r->whole_reason, strlen(r->whole_reason));
    if (warnings && warnings->len)
        put_warnings(out, warnings, name);
}

/* The image field img (len bytes inside the payload *p) as a buffer of
 * its own: the payload, the image moved to its front. Called once every
 * other field is read, since the move overwrites what precedes the
 * image's end. */
static char *take_image(char **p, const unsigned char *img, size_t len)
{
    char *buf = *p;
    memmove(buf, img, len);
    *p = NULL;
    return buf;
}

int tc_payload_decode_module(char **p, size_t n, tc_result *r, const char *name, size_t *units)
{
    *units = 0;
    if (alloc_entries(*p, n, &r->entries) != 0)
        return -1;
    tc_reader rd;
    tc_reader_init(&rd, *p, n);
    uint32_t tag;
    const unsigned char *f, *img = NULL;
    size_t len, img_len = 0;
    int rc;
    while ((rc = tc_field_next(&rd, &tag, &f, &len)) == 1) {
        if (tag == TC_F_IMAGE && !img) {
            img = f;
            img_len = len;
        } else if (tag == TC_F_ENTRY) {
            if (tc_entry_decode(f, len, &r->entries[r->nentries]) != 0)
                return -1;
            r->entries[r->nentries].cached = 1;
            r->nentries++;
        } else if (tag == TC_F_UNIT_KEY) {
            (*units)++;
        } else if (tag == TC_F_WHOLE_REASON && !r->whole_reason) {
            if (!(r->whole_reason = malloc(len + 1)))
                return -1;
            memcpy(r->whole_reason, f, len);
            r->whole_reason[len] = '\0';
        } else if (tag == TC_F_LOG) {
            replay_warnings(r, (const char *)f, len, name);
        }
    }
    if (rc != 0 || !img || r->diag.oom)
        return -1;
    r->image = take_image(p, img, img_len);
    r->image_len = img_len;
    return 0;
}

void tc_payload_encode_task_module(const void *image, size_t len, const tc_digest *keys,
                                   const tc_digest *contents, size_t n, tc_sb *out)
{
    tc_field_put(out, TC_F_IMAGE, image, len);
    for (size_t i = 0; i < n; i++) {
        tc_field_put(out, TC_F_TASK_KEY, keys[i].b, TC_DIGEST_LEN);
        tc_field_put(out, TC_F_TASK_CONTENT, contents[i].b, TC_DIGEST_LEN);
    }
}

int tc_payload_decode_task_module(char **p, size_t n, const tc_digest *keys,
                                  const tc_digest *contents, size_t nkeys, char **image,
                                  size_t *len)
{
    tc_reader rd;
    tc_reader_init(&rd, *p, n);
    uint32_t tag;
    const unsigned char *f, *img = NULL;
    size_t flen, img_len = 0, k = 0, c = 0;
    int rc, ok = 1;
    while ((rc = tc_field_next(&rd, &tag, &f, &flen)) == 1) {
        if (tag == TC_F_IMAGE) {
            img = f;
            img_len = flen;
        } else if (tag == TC_F_TASK_KEY) {
            /* the record must name exactly the tasks the caller verified */
            ok &= k < nkeys && flen == TC_DIGEST_LEN && !memcmp(f, keys[k].b, flen);
            k++;
        } else if (tag == TC_F_TASK_CONTENT) {
            /* ...as they are now: a task regenerated after a failed link is
             * stored again under its key, with other code (tasks.c) */
            ok &= c < nkeys && flen == TC_DIGEST_LEN && !memcmp(f, contents[c].b, flen);
            c++;
        }
    }
    if (rc != 0 || !ok || !img || k != nkeys || c != nkeys)
        return -1;
    *image = take_image(p, img, img_len);
    *len = img_len;
    return 0;
}

/* ---- group manifests -------------------------------------------------------------- */

void tc_payload_encode_group(const tc_digest *keys, char *const *names, size_t n, tc_sb *out)
{
    for (size_t i = 0; i < n; i++) {
        tc_field_put(out, TC_F_TASK_KEY, keys[i].b, TC_DIGEST_LEN);
        tc_field_put(out, TC_F_NAME, names[i], strlen(names[i]));
    }
}

static void free_group(tc_digest *keys, char **names, size_t n)
{
    for (size_t i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
    free(keys);
}

int tc_payload_decode_group(const char *p, size_t n, tc_digest **keys_out, char ***names_out,
                            size_t *count)
{
    long ntasks = count_fields(p, n, TC_F_TASK_KEY);
    if (ntasks <= 0)
        return -1;
    tc_digest *keys = calloc((size_t)ntasks, sizeof *keys);
    char **names = calloc((size_t)ntasks, sizeof *names);
    if (!keys || !names) {
        free_group(keys, names, 0);
        return -1;
    }
    tc_reader rd;
    tc_reader_init(&rd, p, n);
    uint32_t tag;
    const unsigned char *f;
    size_t len, k = 0, named = 0;
    int ok = 1;
    while (tc_field_next(&rd, &tag, &f, &len) == 1) {
        if (tag == TC_F_TASK_KEY && len == TC_DIGEST_LEN && k < (size_t)ntasks) {
            memcpy(keys[k++].b, f, len);
        } else if (tag == TC_F_NAME && named < k) {
            ok &= (names[named++] = strndup((const char *)f, len)) != NULL;
        }
    }
    if (!ok || k != (size_t)ntasks || named != k) {
        free_group(keys, names, named);
        return -1;
    }
    *keys_out = keys;
    *names_out = names;
    *count = k;
    return 0;
}
