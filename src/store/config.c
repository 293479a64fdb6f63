/* config: parsing taskcache.conf and sizes (see config.h). */
#define _GNU_SOURCE
#include "store/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tc_config_parse_size(const char *s, uint64_t *out)
{
    char *end;
    double v = s ? strtod(s, &end) : -1;
    if (!s || end == s || v < 0)
        return -1;
    while (*end == ' ')
        end++;
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'I')
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end)
        return -1;
    *out = (uint64_t)(v * mult);
    return 0;
}

static int truthy(const char *v)
{
    return !strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes");
}

void tc_config_parse(const char *text, size_t len, tc_config *cfg)
{
    char *copy = strndup(text, len);
    if (!copy)
        return; /* out of memory: the defaults stand */
    char *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char key[64], value[128];
        if (sscanf(line, " %63[a-z_] = %127s", key, value) != 2)
            continue;
        if (!strcmp(key, "max_size"))
            tc_config_parse_size(value, &cfg->max_size);
        else if (!strcmp(key, "shared"))
            cfg->shared = truthy(value);
    }
    free(copy);
}
