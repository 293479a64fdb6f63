/* redis: the Redis transport (hiredis), for a single server and for a
 * Redis Cluster. hiredis speaks to one server; the cluster part is here:
 * a key goes to the node its slot map names, a MOVED answer marks the
 * remote a cluster and reloads the map (CLUSTER SLOTS), an ASK answer is
 * followed for that one command. So "redis://any-node:7000" serves a whole
 * cluster, found from its answers.
 *
 * A record is the value of "taskcache:v1:<name>"; a hit refreshes its
 * expiry (GETEX) when the spec sets a ttl, so records in use never expire. */
#define _GNU_SOURCE
#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#ifdef TC_HAVE_HIREDIS_SSL
#include <hiredis/hiredis_ssl.h>
#include <sys/stat.h>
#endif

#include "remote/cluster.h"
#include "remote/transport.h"

#define KEY_PREFIX "taskcache:v1:"
/* A cluster has at most a few hundred masters; more nodes than this in
 * one process's answers is a confused or hostile server. */
#define MAX_NODES 128
/* Redirections one command may follow: a slot moves once, an ASK adds one */
#define MAX_HOPS 5
/* How long a wait for a reply goes without looking at the cancel flag */
#define CANCEL_POLL_MS 100

typedef struct node {
    tc_remote_host host;
    redisContext *c;            /* NULL until connected, or after a failure */
    size_t reply_elements;      /* array elements of the reply being read (cluster.h) */
} node;

typedef struct redis {
    tc_transport base;
    const tc_remote_spec *spec;
    node nodes[MAX_NODES];      /* the spec's hosts first, then those the cluster named */
    int nnodes;
    int cluster;                /* a MOVED was seen: keys go where the slot map says */
    unsigned char slot_node[TC_CLUSTER_SLOTS];  /* index into nodes + 1; 0 unknown */
    int seed;                   /* the spec host in use (the first that answers) */
    int no_getex;               /* a server before 6.2: GET, then EXPIRE */
    int no_refresh;             /* read-only, or a user the server lets read only
                                   (GETEX and EXPIRE are writes): plain GET */
    unsigned connects;          /* connections made: tells a fresh one from a reused one */
    uint64_t reply_max;         /* a lookup's: the most a value may hold (0: no bound) */
#ifdef TC_HAVE_HIREDIS_SSL
    redisSSLContext *ssl;
#endif
} redis;

static struct timeval tv_of(long ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return tv;
}

static void drop(node *nd)
{
    if (nd->c)
        redisFree(nd->c);
    nd->c = NULL;
}

/* The index of the node host:port, added when new; -1 when full. */
static int node_index(redis *x, const tc_remote_host *h)
{
    for (int i = 0; i < x->nnodes; i++)
        if (x->nodes[i].host.port == h->port && !strcmp(x->nodes[i].host.name, h->name))
            return i;
    if (x->nnodes == MAX_NODES)
        return -1;
    x->nodes[x->nnodes].host = *h;
    x->nodes[x->nnodes].c = NULL;
    return x->nnodes++;
}

/* Whether the lookup x serves was cancelled (remote.h). */
static int cancelled(const redis *x) { return tc_transport_cancelled(&x->base); }

/* Waits until c's socket has bytes, at most ms, or -1 when the lookup was
 * cancelled meanwhile: a stalled server holds a Ctrl-C for CANCEL_POLL_MS,
 * not for the timeout. Over TLS, bytes the TLS layer has already read do
 * not show on the socket, so there the read itself waits. */
static int wait_readable(const redis *x, redisContext *c, long long ms)
{
#ifdef TC_HAVE_HIREDIS_SSL
    if (x->ssl)
        return 0;
#endif
    while (ms > 0) {
        if (cancelled(x))
            return -1;
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        long long slice = ms < CANCEL_POLL_MS ? ms : CANCEL_POLL_MS;
        int got = poll(&p, 1, (int)slice);
        if (got < 0 && errno == EINTR) /* the signal that raised the flag, perhaps */
            continue;
        if (got != 0) /* readable, closed, or an error the read reports */
            return 0;
        ms -= slice;
    }
    return 0; /* the read below times out */
}

/* Whether the reply hiredis is reading declares a string longer than max
 * bytes. hiredis hands a string over only once all of it has arrived, and
 * keeps what arrives meanwhile: a server that announces gigabytes (a
 * faulty one, or someone on a plain redis:// link) would be buffered for
 * as long as it sends. The reader has taken the type byte ('$') and waits
 * at the length's digits. */
static int declares_more_than(const redisReader *rd, uint64_t max)
{
    const char *p = rd->buf + rd->pos, *end = rd->buf + rd->len;
    if (!max || p >= end)
        return 0;
    p += *p == '$';
    uint64_t v = 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++)
        if ((v = v * 10 + (uint64_t)(*p - '0')) > max)
            return 1;
    return 0;
}

/* Sends what was appended to c, then reads `count` replies into
 * replies[], within the spec's timeout plus a second per 256 KiB received
 * (tc_remote_allowance, as HTTP gets): the socket's timeout bounds each
 * read only, and a server sending a byte every half second never tripped
 * it (a build hung for good). 0, or -1 with c->err set; the deadline
 * passed reads as a timeout (REDIS_ERR_IO, errno EAGAIN), a cancel as
 * REDIS_ERR_OTHER (cancelled(x) tells). The replies read are the caller's
 * to free either way. */
static int exchange(const redis *x, redisContext *c, void **replies, int count)
{
    double start = tc_remote_now(), timeout_s = (double)x->spec->timeout_ms / 1000;
    uint64_t received = 0;
    int done = 0, got = 0;
    for (int i = 0; i < count; i++)
        replies[i] = NULL;
    while (!done)
        if (redisBufferWrite(c, &done) != REDIS_OK)
            return -1;
    while (got < count) {
        if (redisReaderGetReply(c->reader, &replies[got]) != REDIS_OK) {
            c->err = c->reader->err ? c->reader->err : REDIS_ERR_PROTOCOL;
            snprintf(c->errstr, sizeof c->errstr, "%s", c->reader->errstr);
            return -1;
        }
        if (replies[got]) {
            got++;
            continue;
        }
        if (declares_more_than(c->reader, x->reply_max)) {
            c->err = REDIS_ERR_PROTOCOL;
            snprintf(c->errstr, sizeof c->errstr,
                     "it announces a value larger than any record of its kind");
            return -1;
        }
        double deadline = start + tc_remote_allowance(timeout_s, received);
        double left = deadline - tc_remote_now();
        if (left > 0 && wait_readable(x, c, (long long)(left * 1000) + 1) != 0) {
            c->err = REDIS_ERR_OTHER;
            snprintf(c->errstr, sizeof c->errstr, "cancelled");
            return -1;
        }
        left = deadline - tc_remote_now();
        if (left <= 0) {
            c->err = REDIS_ERR_IO;
            snprintf(c->errstr, sizeof c->errstr, "timed out");
            errno = EAGAIN;
            return -1;
        }
        redisSetTimeout(c, tv_of((long long)(left * 1000) + 1));
        size_t before = c->reader->len;
        if (redisBufferRead(c) != REDIS_OK)
            return -1;
        received += c->reader->len - before; /* what the read appended */
    }
    return 0;
}

/* Sends one command on c and reads its reply within the spec's timeout;
 * the reply, or NULL (c->err says why). */
static redisReply *call(const redis *x, redisContext *c, int argc, const char **argv,
                        const size_t *lens)
{
    void *r = NULL;
    if (redisAppendCommandArgv(c, argc, argv, lens) != REDIS_OK ||
        exchange(x, c, &r, 1) != 0) {
        if (r)
            freeReplyObject(r);
        return NULL;
    }
    return r;
}

/* A failed connection in words, and whether the server stalled (a timeout
 * is not worth repeating: it would cost the timeout again). */
static tc_remote_outcome connection_failed(const redis *x, node *nd, const char *doing,
                                           char *why, size_t n)
{
    if (cancelled(x)) {
        snprintf(why, n, "%s %s:%d: cancelled", doing, nd->host.name, nd->host.port);
        drop(nd); /* a reply may still be on its way: the connection is not reused */
        return TC_REMOTE_CANCELLED;
    }
    const char *what = nd->c ? nd->c->errstr : "out of memory";
    if (nd->c && nd->c->err == REDIS_ERR_OOM && nd->reply_elements == SIZE_MAX)
        what = "its reply announced more array elements than taskcache ever reads";
    snprintf(why, n, "%s %s:%d: %s", doing, nd->host.name, nd->host.port,
             nd->c && nd->c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)
                 ? "timed out"
                 : what);
    drop(nd);
    return TC_REMOTE_DOWN;
}

/* One command of a connection's set-up (AUTH, SELECT). An answer
 * refusing it is FAILED (a server is there), no answer DOWN. */
static tc_remote_outcome handshake(redis *x, node *nd, int argc, const char **argv, char *why,
                                   size_t n)
{
    size_t lens[3];
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    redisReply *r = call(x, nd->c, argc, argv, lens);
    if (!r)
        return connection_failed(x, nd, "no answer from", why, n);
    if (r->type != REDIS_REPLY_ERROR) {
        freeReplyObject(r);
        return TC_REMOTE_OK;
    }
    snprintf(why, n, "%s:%d refused %s: %.200s", nd->host.name, nd->host.port, argv[0], r->str);
    freeReplyObject(r);
    drop(nd);
    return TC_REMOTE_FAILED;
}

/* Connects nd when it is not: connect timeout, operation timeout, TLS,
 * AUTH, SELECT. */
static tc_remote_outcome connect_node(redis *x, node *nd, char *why, size_t n)
{
    if (nd->c)
        return TC_REMOTE_OK;
    x->connects++;
    nd->c = redisConnectWithTimeout(nd->host.name, nd->host.port,
                                    tv_of(x->spec->connect_timeout_ms));
    if (!nd->c || nd->c->err)
        return connection_failed(x, nd, "cannot connect to", why, n);
    nd->reply_elements = 0;
    tc_redis_bound_reader(nd->c->reader, &nd->reply_elements);
    redisSetTimeout(nd->c, tv_of(x->spec->timeout_ms));
#ifdef TC_HAVE_HIREDIS_SSL
    if (x->ssl && redisInitiateSSLWithContext(nd->c, x->ssl) != REDIS_OK)
        return connection_failed(x, nd, "TLS with", why, n);
#endif
    const tc_remote_spec *s = x->spec;
    tc_remote_outcome o = TC_REMOTE_OK;
    if (s->password[0]) {
        const char *with_user[] = {"AUTH", s->user, s->password};
        const char *without[] = {"AUTH", s->password};
        o = s->user[0] ? handshake(x, nd, 3, with_user, why, n)
                       : handshake(x, nd, 2, without, why, n);
    }
    if (o == TC_REMOTE_OK && s->db && !x->cluster) {
        char db[16];
        snprintf(db, sizeof db, "%d", s->db);
        const char *select[] = {"SELECT", db};
        o = handshake(x, nd, 2, select, why, n);
    }
    return o;
}

/* Reloads the slot map from the node that answered (CLUSTER SLOTS). A
 * failure keeps the map as it was: redirections still work, one hop more. */
static void load_slots(redis *x, node *from)
{
    const char *argv[] = {"CLUSTER", "SLOTS"};
    size_t lens[] = {7, 5};
    redisReply *r = from->c ? call(x, from->c, 2, argv, lens) : NULL;
    tc_slot_range *ranges = NULL;
    size_t count = 0;
    if (r && tc_cluster_parse_slots(r, &ranges, &count) == 0) {
        memset(x->slot_node, 0, sizeof x->slot_node);
        for (size_t i = 0; i < count; i++) {
            tc_remote_host h = ranges[i].master;
            if (!h.name[0]) /* the node left its address out: the one we asked */
                snprintf(h.name, sizeof h.name, "%s", from->host.name);
            int k = node_index(x, &h);
            for (unsigned s = ranges[i].first; k >= 0 && s <= ranges[i].last; s++)
                x->slot_node[s] = (unsigned char)(k + 1);
        }
    } else if (!r) {
        drop(from);
    }
    free(ranges);
    if (r)
        freeReplyObject(r);
}

/* The node a key goes to: the slot map's, else the seed in use. */
static node *route(redis *x, const char *key, size_t len)
{
    if (x->cluster) {
        unsigned k = x->slot_node[tc_cluster_slot(key, len)];
        if (k)
            return &x->nodes[k - 1];
    }
    return &x->nodes[x->seed];
}

/* Connects to the seed in use, or failing that to the next of the spec's
 * hosts that answers (the nodes of one cluster, or one server's
 * addresses). */
static tc_remote_outcome connect_seed(redis *x, char *why, size_t n)
{
    tc_remote_outcome o = TC_REMOTE_DOWN;
    for (int tried = 0; tried < x->spec->nhosts; tried++) {
        o = connect_node(x, &x->nodes[x->seed], why, n);
        if (o != TC_REMOTE_DOWN)
            return o;
        x->seed = (x->seed + 1) % x->spec->nhosts;
    }
    return o;
}

/* Sends a command about key (argv[1]) to the node that holds key,
 * following redirections. The reply (to free) in *out. */
static tc_remote_outcome command(redis *x, int argc, const char **argv, const size_t *lens,
                                 redisReply **out, char *why, size_t n)
{
    *out = NULL;
    node *nd = route(x, argv[1], lens[1]);
    int ask = 0;
    for (int hop = 0; hop < MAX_HOPS; hop++) {
        /* until the server shows it is a cluster, every key goes to the seed */
        int seeded = !x->cluster && nd == &x->nodes[x->seed];
        unsigned connects = x->connects;
        tc_remote_outcome o = seeded ? connect_seed(x, why, n) : connect_node(x, nd, why, n);
        if (o != TC_REMOTE_OK)
            return o;
        if (seeded)
            nd = &x->nodes[x->seed]; /* the next host, when the first did not answer */
        int fresh = x->connects != connects;
        redisReply *r = NULL;
        if (ask) {
            /* ASK: this one command goes to the importing node, after ASKING */
            void *replies[2] = {NULL, NULL};
            if (redisAppendCommand(nd->c, "ASKING") == REDIS_OK &&
                redisAppendCommandArgv(nd->c, argc, argv, lens) == REDIS_OK &&
                exchange(x, nd->c, replies, 2) == 0)
                r = replies[1];
            else if (replies[1])
                freeReplyObject(replies[1]);
            if (replies[0])
                freeReplyObject(replies[0]);
            ask = 0;
        } else {
            r = call(x, nd->c, argc, argv, lens);
        }
        if (!r) {
            int stalled = nd->c && nd->c->err == REDIS_ERR_IO &&
                          (errno == EAGAIN || errno == EWOULDBLOCK);
            tc_remote_outcome down = connection_failed(x, nd, "no answer from", why, n);
            /* a connection idle since the server restarted fails once:
             * one fresh connection decides whether the server is there */
            if (fresh || stalled || down == TC_REMOTE_CANCELLED)
                return down;
            continue;
        }
        tc_redirect rd;
        if (r->type == REDIS_REPLY_ERROR && tc_cluster_parse_redirect(r->str, r->len, &rd)) {
            freeReplyObject(r);
            if (!rd.node.name[0])
                snprintf(rd.node.name, sizeof rd.node.name, "%s", nd->host.name);
            int k = node_index(x, &rd.node);
            if (k < 0) {
                snprintf(why, n, "a Redis Cluster of more than %d nodes", MAX_NODES);
                return TC_REMOTE_FAILED;
            }
            if (!rd.ask) {
                x->cluster = 1;
                x->slot_node[rd.slot] = (unsigned char)(k + 1);
                load_slots(x, nd);
                k = x->slot_node[rd.slot] ? x->slot_node[rd.slot] - 1 : k;
            }
            ask = rd.ask;
            nd = &x->nodes[k];
            continue;
        }
        *out = r;
        return TC_REMOTE_OK;
    }
    snprintf(why, n, "%s", "a key was redirected more than 5 times (a cluster resharding?)");
    return TC_REMOTE_FAILED;
}

/* An error answer in words. */
static tc_remote_outcome refused(redisReply *r, const char *doing, char *why, size_t n)
{
    snprintf(why, n, "%s: %.*s", doing, (int)(r->len < 300 ? r->len : 300), r->str);
    freeReplyObject(r);
    return TC_REMOTE_FAILED;
}

static void make_key(const char *name, char *key, size_t cap)
{
    snprintf(key, cap, KEY_PREFIX "%s", name);
}

static tc_remote_outcome redis_get(tc_transport *t, const char *name, uint64_t max, tc_sb *out,
                                   char *why, size_t n)
{
    redis *x = (redis *)t;
    char key[512], ttl[24];
    make_key(name, key, sizeof key);
    snprintf(ttl, sizeof ttl, "%lld", x->spec->ttl_s);
    int refresh = x->spec->ttl_s > 0 && !x->spec->read_only && !x->no_refresh;
    int getex = refresh && !x->no_getex;
    const char *argv[] = {getex ? "GETEX" : "GET", key, "EX", ttl};
    size_t lens[] = {strlen(argv[0]), strlen(key), 2, strlen(ttl)};
    redisReply *r;
    x->reply_max = max;
    tc_remote_outcome o = command(x, getex ? 4 : 2, argv, lens, &r, why, n);
    x->reply_max = 0;
    if (o != TC_REMOTE_OK)
        return o;
    if (getex && r->type == REDIS_REPLY_ERROR && strstr(r->str, "unknown command")) {
        freeReplyObject(r);
        x->no_getex = 1; /* Redis before 6.2 */
        return redis_get(t, name, max, out, why, n);
    }
    if (getex && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOPERM", 6)) {
        freeReplyObject(r);
        x->no_refresh = 1; /* an ACL that allows reading only: records still come back */
        return redis_get(t, name, max, out, why, n);
    }
    if (r->type == REDIS_REPLY_NIL) {
        freeReplyObject(r);
        return TC_REMOTE_MISSING;
    }
    if (r->type == REDIS_REPLY_ERROR)
        return refused(r, "GET failed", why, n);
    if (r->type != REDIS_REPLY_STRING || (uint64_t)r->len > max) {
        snprintf(why, n, "%s", r->type != REDIS_REPLY_STRING
                                   ? "the value is not a string"
                                   : "the value is larger than any record of its kind");
        freeReplyObject(r);
        return TC_REMOTE_FAILED;
    }
    tc_sb_append(out, r->str, r->len);
    freeReplyObject(r);
    if (out->oom) {
        snprintf(why, n, "%s", "out of memory");
        return TC_REMOTE_FAILED;
    }
    if (refresh && x->no_getex) {
        const char *eargv[] = {"EXPIRE", key, ttl};
        size_t elens[] = {6, strlen(key), strlen(ttl)};
        char ewhy[64];
        if (command(x, 3, eargv, elens, &r, ewhy, sizeof ewhy) == TC_REMOTE_OK)
            freeReplyObject(r); /* the record came back either way */
    }
    return TC_REMOTE_OK;
}

static tc_remote_outcome redis_put(tc_transport *t, const char *name, const void *data,
                                   size_t len, char *why, size_t n)
{
    redis *x = (redis *)t;
    char key[512], ttl[24];
    make_key(name, key, sizeof key);
    snprintf(ttl, sizeof ttl, "%lld", x->spec->ttl_s);
    const char *argv[] = {"SET", key, data, "EX", ttl};
    size_t lens[] = {3, strlen(key), len, 2, strlen(ttl)};
    redisReply *r;
    tc_remote_outcome o = command(x, x->spec->ttl_s > 0 ? 5 : 3, argv, lens, &r, why, n);
    if (o != TC_REMOTE_OK)
        return o;
    if (r->type == REDIS_REPLY_ERROR)
        return refused(r, "SET failed", why, n); /* OOM: the server is full */
    freeReplyObject(r);
    return TC_REMOTE_OK;
}

static tc_remote_outcome redis_remove(tc_transport *t, const char *name, char *why, size_t n)
{
    redis *x = (redis *)t;
    char key[512];
    make_key(name, key, sizeof key);
    const char *argv[] = {"DEL", key};
    size_t lens[] = {3, strlen(key)};
    redisReply *r;
    tc_remote_outcome o = command(x, 2, argv, lens, &r, why, n);
    if (o == TC_REMOTE_OK)
        freeReplyObject(r);
    return o;
}

/* A reply to a command without a key, from node nd; NULL with why filled
 * when the node cannot be reached or does not answer. */
static redisReply *ask_node(redis *x, node *nd, const char *a, const char *b, char *why,
                            size_t n)
{
    if (connect_node(x, nd, why, n) != TC_REMOTE_OK)
        return NULL;
    const char *argv[] = {a, b};
    size_t lens[] = {strlen(a), b ? strlen(b) : 0};
    redisReply *r = call(x, nd->c, b ? 2 : 1, argv, lens);
    if (!r)
        connection_failed(x, nd, "no answer from", why, n);
    return r;
}

static tc_remote_outcome redis_server_info(tc_transport *t, char *server, size_t server_len,
                                           int64_t *bytes, int64_t *records, char *why,
                                           size_t n)
{
    redis *x = (redis *)t;
    tc_remote_outcome o = connect_seed(x, why, n);
    if (o != TC_REMOTE_OK)
        return o;
    node *seed = &x->nodes[x->seed];
    char version[64] = "?", ignored[256];
    /* a server that takes the connection and never answers is not reachable
     * (it was reported so, after a timeout for each of the questions below) */
    redisReply *r = ask_node(x, seed, "INFO", "server", why, n);
    if (!r)
        return TC_REMOTE_DOWN;
    if (r->type == REDIS_REPLY_STRING)
        tc_redis_info_field(r->str, r->len, "redis_version", version, sizeof version);
    freeReplyObject(r);
    /* a cluster answers CLUSTER SLOTS with its map; a single server with an error */
    r = ask_node(x, seed, "CLUSTER", "SLOTS", ignored, sizeof ignored);
    int masters = 0;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements) {
        freeReplyObject(r);
        x->cluster = 1;
        load_slots(x, seed);
    } else if (r) {
        freeReplyObject(r);
    }
    /* the memory and keys of every master (one server: itself) */
    unsigned char counted[MAX_NODES] = {0};
    int64_t mem = 0, keys = 0;
    int mem_known = 1, keys_known = 1;
    for (int s = 0; s < TC_CLUSTER_SLOTS; s++) {
        int k = x->cluster ? x->slot_node[s] - 1 : x->seed;
        if (k < 0 || counted[k])
            continue;
        counted[k] = 1;
        masters++;
        char used[32] = "";
        redisReply *m = ask_node(x, &x->nodes[k], "INFO", "memory", ignored, sizeof ignored);
        if (m && m->type == REDIS_REPLY_STRING &&
            tc_redis_info_field(m->str, m->len, "used_memory", used, sizeof used) == 0)
            mem += strtoll(used, NULL, 10);
        else
            mem_known = 0;
        if (m)
            freeReplyObject(m);
        redisReply *d = m ? ask_node(x, &x->nodes[k], "DBSIZE", NULL, ignored, sizeof ignored)
                          : NULL; /* a node that did not answer is not asked again */
        if (d && d->type == REDIS_REPLY_INTEGER)
            keys += d->integer;
        else
            keys_known = 0;
        if (d)
            freeReplyObject(d);
        if (!x->cluster)
            break;
    }
    *bytes = mem_known ? mem : -1;
    *records = keys_known ? keys : -1;
    if (x->cluster)
        snprintf(server, server_len, "Redis %s, a cluster of %d masters", version, masters);
    else
        snprintf(server, server_len, "Redis %s", version);
    return TC_REMOTE_OK;
}

static void redis_free(tc_transport *t)
{
    redis *x = (redis *)t;
    for (int i = 0; i < x->nnodes; i++)
        drop(&x->nodes[i]);
#ifdef TC_HAVE_HIREDIS_SSL
    if (x->ssl)
        redisFreeSSLContext(x->ssl);
#endif
    free(x);
}

static const tc_transport_ops redis_ops = {redis_get, redis_put, redis_remove,
                                           redis_server_info, redis_free};

#ifdef TC_HAVE_HIREDIS_SSL
static pthread_once_t ssl_once = PTHREAD_ONCE_INIT;
static void init_ssl(void) { redisInitOpenSSL(); }
#endif

tc_transport *tc_redis_open(const tc_remote_spec *spec, char *why, size_t n)
{
#ifndef TC_HAVE_HIREDIS_SSL
    if (spec->tls) {
        snprintf(why, n, "%s", "this taskcache was built without TLS for Redis (rediss:// needs "
                               "hiredis 1.0 or later with hiredis_ssl)");
        return NULL;
    }
#endif
    redis *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(why, n, "%s", "out of memory");
        return NULL;
    }
    x->base.ops = &redis_ops;
    x->spec = spec;
    for (int i = 0; i < spec->nhosts; i++)
        node_index(x, &spec->hosts[i]);
#ifdef TC_HAVE_HIREDIS_SSL
    if (spec->tls) {
        pthread_once(&ssl_once, init_ssl);
        struct stat st;
        int dir = spec->ca[0] && stat(spec->ca, &st) == 0 && S_ISDIR(st.st_mode);
        redisSSLContextError err = REDIS_SSL_CTX_NONE;
        x->ssl = redisCreateSSLContext(spec->ca[0] && !dir ? spec->ca : NULL,
                                       dir ? spec->ca : NULL, NULL, NULL,
                                       spec->hosts[0].name, &err);
        if (!x->ssl) {
            snprintf(why, n, "TLS: %s", redisSSLContextGetError(err));
            free(x);
            return NULL;
        }
    }
#endif
    return &x->base;
}
