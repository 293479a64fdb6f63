/* cluster: slots, redirects and slot maps of Redis Cluster (see cluster.h). */
#include "remote/cluster.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* CRC16-CCITT as Redis Cluster defines it (XMODEM: polynomial 0x1021,
 * initial value 0, no reflection), a bit at a time: keys are short, and a
 * slot is computed once per lookup. */
static unsigned crc16(const unsigned char *p, size_t n)
{
    unsigned crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (unsigned)p[i] << 8;
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1) & 0xffff;
    }
    return crc;
}

unsigned tc_cluster_slot(const void *key, size_t len)
{
    const unsigned char *k = key;
    const unsigned char *open = memchr(k, '{', len);
    if (open) {
        size_t rest = len - (size_t)(open + 1 - k);
        const unsigned char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1)
            return crc16(open + 1, (size_t)(close - open - 1)) % TC_CLUSTER_SLOTS;
    }
    return crc16(k, len) % TC_CLUSTER_SLOTS;
}

/* A host as a node announces it: an address or a name (no spaces,
 * separators or controls: it becomes a connection's host, nothing else).
 * "" and "?" mean the node did not say (Redis 7's unknown endpoint). */
static int copy_node_host(const char *p, size_t len, tc_remote_host *out)
{
    if (len == 1 && p[0] == '?')
        len = 0;
    if (len >= sizeof out->name)
        return -1;
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == '_' || c == ':' || c == '%'))
            return -1;
    }
    memcpy(out->name, p, len);
    out->name[len] = '\0';
    return 0;
}

/* A decimal number of p[0..len) up to max. -1 when it is not one. */
static long number(const char *p, size_t len, long max)
{
    long v = 0;
    if (!len || len > 6)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v <= max ? v : -1;
}

int tc_cluster_parse_redirect(const char *msg, size_t len, tc_redirect *out)
{
    memset(out, 0, sizeof *out);
    size_t word;
    if (len > 6 && !memcmp(msg, "MOVED ", 6))
        word = 6;
    else if (len > 4 && !memcmp(msg, "ASK ", 4))
        word = 4, out->ask = 1;
    else
        return 0;
    const char *slot = msg + word, *end = msg + len;
    const char *space = memchr(slot, ' ', (size_t)(end - slot));
    if (!space)
        return 0;
    long s = number(slot, (size_t)(space - slot), TC_CLUSTER_SLOTS - 1);
    const char *ep = space + 1, *colon = NULL;
    for (const char *q = ep; q < end; q++)
        if (*q == ':')
            colon = q; /* the last one: an IPv6 address has its own */
    if (s < 0 || !colon)
        return 0;
    long port = number(colon + 1, (size_t)(end - colon - 1), 65535);
    if (port < 1 || copy_node_host(ep, (size_t)(colon - ep), &out->node) != 0)
        return 0;
    out->slot = (unsigned)s;
    out->node.port = (int)port;
    return 1;
}

int tc_cluster_parse_slots(const void *reply, tc_slot_range **ranges, size_t *n)
{
    const redisReply *r = reply;
    *ranges = NULL;
    *n = 0;
    if (!r || r->type != REDIS_REPLY_ARRAY)
        return -1;
    tc_slot_range *out = calloc(r->elements ? r->elements : 1, sizeof *out);
    if (!out)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        /* [first, last, [host, port, id, ...], replicas...] */
        if (!e || e->type != REDIS_REPLY_ARRAY || e->elements < 3)
            continue;
        const redisReply *first = e->element[0], *last = e->element[1], *m = e->element[2];
        if (!first || !last || !m || first->type != REDIS_REPLY_INTEGER ||
            last->type != REDIS_REPLY_INTEGER || m->type != REDIS_REPLY_ARRAY ||
            m->elements < 2 || !m->element[0] || !m->element[1] ||
            m->element[0]->type != REDIS_REPLY_STRING ||
            m->element[1]->type != REDIS_REPLY_INTEGER)
            continue;
        if (first->integer < 0 || last->integer < first->integer ||
            last->integer >= TC_CLUSTER_SLOTS || m->element[1]->integer < 1 ||
            m->element[1]->integer > 65535 ||
            copy_node_host(m->element[0]->str, m->element[0]->len, &out[k].master) != 0)
            continue;
        out[k].first = (unsigned)first->integer;
        out[k].last = (unsigned)last->integer;
        out[k].master.port = (int)m->element[1]->integer;
        k++;
    }
    *ranges = out;
    *n = k;
    return 0;
}

/* hiredis 1.0 counts elements in a size_t, 0.14 in an int */
#if defined(HIREDIS_MAJOR) && HIREDIS_MAJOR >= 1
typedef size_t array_length;
#else
typedef int array_length;
#endif

/* hiredis's own reply builders, with createArray counting first */
static redisReplyObjectFunctions bounded;
static void *(*default_array)(const redisReadTask *, array_length);
static pthread_once_t bounded_once = PTHREAD_ONCE_INIT;

static void *bounded_array(const redisReadTask *task, array_length elements)
{
    size_t *count = task->privdata;
    if (!task->parent)
        *count = 0; /* a new reply */
    if (elements > 0 && (size_t)elements > TC_REDIS_MAX_ELEMENTS - *count) {
        *count = SIZE_MAX; /* hiredis reports it as out of memory and stops reading */
        return NULL;
    }
    *count += elements > 0 ? (size_t)elements : 0;
    return default_array(task, elements);
}

static void init_bounded(void)
{
    /* a fresh reader points at hiredis's default builders, which it does not export */
    redisReader *fresh = redisReaderCreate();
    if (!fresh)
        return;
    bounded = *fresh->fn;
    default_array = bounded.createArray;
    bounded.createArray = bounded_array;
    redisReaderFree(fresh);
}

void tc_redis_bound_reader(void *reader, size_t *count)
{
    pthread_once(&bounded_once, init_bounded);
    redisReader *r = reader;
    if (!default_array || !r)
        return;
    r->fn = &bounded;
    r->privdata = count;
}

int tc_redis_info_field(const char *text, size_t len, const char *name, char *out, size_t cap)
{
    size_t nlen = strlen(name);
    /* lines are "name:value\r\n"; a name matches only at a line's start */
    for (size_t i = 0; i < len;) {
        const char *line = text + i;
        const char *eol = memchr(line, '\n', len - i);
        size_t llen = eol ? (size_t)(eol - line) : len - i;
        if (llen > nlen && !memcmp(line, name, nlen) && line[nlen] == ':') {
            size_t v = llen - nlen - 1;
            if (v && line[nlen + v] == '\r')
                v--;
            if (!cap)
                return -1;
            if (v >= cap)
                v = cap - 1;
            memcpy(out, line + nlen + 1, v);
            out[v] = '\0';
            return 0;
        }
        i += llen + 1;
    }
    return -1;
}
