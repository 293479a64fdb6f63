/* libFuzzer target: everything the remote tier parses. Arbitrary bytes as
 * a remote spec, as a taskcache.conf, as a duration, as a Redis Cluster
 * redirection, as Redis replies (through hiredis's own reader, then the
 * CLUSTER SLOTS and INFO readers of src/remote/cluster.c) must be rejected
 * or read cleanly; a spec that parses describes itself as a spec that
 * parses to the same servers, without credentials. */
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "remote/cluster.h"
#include "store/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void spec_round_trip(const char *text)
{
    static tc_remote_spec spec, again;
    char why[600];
    if (tc_config_parse_remote(text, &spec, why, sizeof why) != 0 || !spec.kind)
        return;
    /* the description is the URL without credentials, then " (read-only)" */
    char url[sizeof spec.description];
    strcpy(url, spec.description);
    char *ro = strstr(url, " (read-only)");
    if (spec.read_only != (ro != NULL))
        abort();
    if (ro)
        *ro = '\0';
    if (tc_config_parse_remote(url, &again, why, sizeof why) != 0)
        abort();
    if (again.kind != spec.kind || again.tls != spec.tls || again.nhosts != spec.nhosts ||
        again.db != spec.db || strcmp(again.base_url, spec.base_url) || again.user[0] ||
        again.password[0])
        abort();
    for (int i = 0; i < spec.nhosts; i++)
        if (strcmp(again.hosts[i].name, spec.hosts[i].name) ||
            again.hosts[i].port != spec.hosts[i].port || spec.hosts[i].port < 1 ||
            spec.hosts[i].port > 65535)
            abort();
}

static void replies(const uint8_t *data, size_t size)
{
    redisReader *r = redisReaderCreate();
    if (!r)
        return;
    size_t elements;
    tc_redis_bound_reader(r, &elements); /* as redis.c reads replies */
    if (redisReaderFeed(r, (const char *)data, size) == REDIS_OK) {
        void *reply = NULL;
        for (int i = 0; i < 16 && redisReaderGetReply(r, &reply) == REDIS_OK && reply; i++) {
            tc_slot_range *ranges = NULL;
            size_t n = 0;
            if (tc_cluster_parse_slots(reply, &ranges, &n) == 0)
                for (size_t k = 0; k < n; k++)
                    if (ranges[k].first > ranges[k].last || ranges[k].last >= TC_CLUSTER_SLOTS ||
                        ranges[k].master.port < 1 || ranges[k].master.port > 65535)
                        abort();
            free(ranges);
            const redisReply *rep = reply;
            char v[32];
            if (rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_ERROR) {
                (void)tc_redis_info_field(rep->str, rep->len, "used_memory", v, sizeof v);
                tc_redirect rd;
                if (tc_cluster_parse_redirect(rep->str, rep->len, &rd) &&
                    (rd.slot >= TC_CLUSTER_SLOTS || rd.node.port < 1))
                    abort();
            }
            freeReplyObject(reply);
            reply = NULL;
        }
    }
    redisReaderFree(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    spec_round_trip(text);
    tc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    tc_config_parse(text, size, &cfg);
    spec_round_trip(cfg.remote);
    long long ms;
    (void)tc_config_parse_duration(text, &ms);
    free(text);
    if (tc_cluster_slot(data, size) >= TC_CLUSTER_SLOTS)
        abort();
    tc_redirect rd;
    if (tc_cluster_parse_redirect((const char *)data, size, &rd) &&
        (rd.slot >= TC_CLUSTER_SLOTS || rd.node.port < 1 || rd.node.port > 65535))
        abort();
    tc_redis_info_field((const char *)data, size, "redis_version", (char[8]){0}, 8);
    replies(data, size);
    return 0;
}
