/* config: what <root>/taskcache.conf may say, and the sizes it is written
 * in. Parsing only: the store reads the file (store.c) and applies what
 * this finds. The format is "key = value" lines with '#' comments:
 *
 *   max_size = 10G     the size limit (binary units: K, M, G, T)
 *   shared = true      a cache shared by a group (directories 2770, files 0660)
 *   remote = URL       remote storage behind the cache (a spec, below)
 *
 * Unknown keys and malformed lines are ignored, so an older taskcache
 * reads a newer file. */
#ifndef TC_STORE_CONFIG_H
#define TC_STORE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "remote/remote.h"

typedef struct tc_config {
    uint64_t max_size;
    int shared;
    char remote[4096];     /* the remote spec's text, "" when none is set */
    unsigned remote_line;  /* its line in the file, for messages */
} tc_config;

/* Reads a size such as "5G", "500M", "64KiB" or "1024". 0, or -1 when s
 * is not a size (*bytes is then unchanged). */
int tc_config_parse_size(const char *s, uint64_t *bytes);

/* Applies the settings found in text (len bytes) to cfg; keys the text
 * does not set keep their values. */
void tc_config_parse(const char *text, size_t len, tc_config *cfg);

/* Reads a duration such as "100ms", "10s", "5m", "2h", "7d" or "30" (a
 * bare number is seconds) into milliseconds. 0, or -1 when s is not one. */
int tc_config_parse_duration(const char *s, long long *ms);

/* Parses a remote storage spec:
 *
 *   URL[|attribute[=value]]...
 *
 *   http://HOST[:PORT][/PATH]   https://...      a WebDAV or HTTP cache server
 *   redis://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][/DB]   rediss://...
 *                                                 Redis, or any node of a Redis
 *                                                 Cluster (found from its answers)
 *   attributes: read-only, connect-timeout=, timeout=, flush-timeout= (durations),
 *   retries=N, ttl= (Redis), max-record=SIZE, layout=subdirs|bazel (HTTP),
 *   bearer-token-file=PATH (HTTP), ca=PATH (TLS)
 *
 * "none" or "off" is no remote (spec->kind 0). 0, or -1 with why filled
 * (what is wrong, naming the part). Pure: reads no file. */
int tc_config_parse_remote(const char *text, tc_remote_spec *spec, char *why, size_t whylen);

#endif
