/* config: what <root>/taskcache.conf may say, and the sizes it is written
 * in. Parsing only: the store reads the file (store.c) and applies what
 * this finds. The format is "key = value" lines with '#' comments:
 *
 *   max_size = 10G     the size limit (binary units: K, M, G, T)
 *   shared = true      a cache shared by a group (directories 2770, files 0660)
 *
 * Unknown keys and malformed lines are ignored, so an older taskcache
 * reads a newer file. */
#ifndef TC_STORE_CONFIG_H
#define TC_STORE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef struct tc_config {
    uint64_t max_size;
    int shared;
} tc_config;

/* Reads a size such as "5G", "500M", "64KiB" or "1024". 0, or -1 when s
 * is not a size (*bytes is then unchanged). */
int tc_config_parse_size(const char *s, uint64_t *bytes);

/* Applies the settings found in text (len bytes) to cfg; keys the text
 * does not set keep their values. */
void tc_config_parse(const char *text, size_t len, tc_config *cfg);

#endif
