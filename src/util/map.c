/* map: symbol-table hash map (linear probing). */
#include "util/map.h"

#include <stdlib.h>
#include <string.h>

/* Eight bytes a step, each word mixed in by a multiply: generators name
 * things at length (numba's parameters run to 150 bytes, looked up at
 * every use), and a byte a step (FNV-1a) was a fifth of a parse. The hash
 * lives only in memory, so it may change at will. */
static uint32_t hash_bytes(const char *p, size_t n)
{
    const uint64_t k = 0x9E3779B97F4A7C15ull;
    uint64_t h = n * k;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * k;
        h ^= h >> 29;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, p, n);
        h = (h ^ w) * k;
        h ^= h >> 29;
    }
    h *= k;
    return (uint32_t)(h >> 32);
}

void tc_map_free(tc_map *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}

/* Whether a key of this first byte and length may be present. */
static int may_hold(const tc_map *m, const char *key, size_t len)
{
    unsigned char c = len ? (unsigned char)key[0] : 0;
    return (m->lens >> (len & 63) & 1) && (m->firsts[c >> 6] >> (c & 63) & 1);
}

uint32_t *tc_map_get(const tc_map *m, const char *key, size_t len)
{
    if (!m->cap || !may_hold(m, key, len))
        return NULL;
    uint32_t h = hash_bytes(key, len);
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        tc_map_slot *s = &m->slots[i];
        if (!s->key)
            return NULL;
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)
            return &s->value;
    }
}

static int grow(tc_map *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64;
    tc_map_slot *ns = calloc(ncap, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        tc_map_slot *s = &m->slots[i];
        if (!s->key)
            continue;
        size_t j = s->hash & (ncap - 1);
        while (ns[j].key)
            j = (j + 1) & (ncap - 1);
        ns[j] = *s;
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

int tc_map_put(tc_map *m, const char *key, size_t len, uint32_t value)
{
    if ((m->count + 1) * 4 > m->cap * 3 && grow(m) != 0)
        return -1;
    uint32_t h = hash_bytes(key, len);
    size_t i = h & (m->cap - 1);
    for (;; i = (i + 1) & (m->cap - 1)) {
        tc_map_slot *s = &m->slots[i];
        if (!s->key)
            break;
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)
            return 0;
    }
    unsigned char c = len ? (unsigned char)key[0] : 0;
    m->firsts[c >> 6] |= 1ull << (c & 63);
    m->lens |= 1ull << (len & 63);
    m->slots[i].key = key;
    m->slots[i].len = (uint32_t)len;
    m->slots[i].hash = h;
    m->slots[i].value = value;
    m->count++;
    return 1;
}
