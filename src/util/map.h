/* map: open-addressing hash map from byte strings to 32-bit values, used
 * for symbol tables. Keys are not copied: they must outlive the map (they
 * point into the PTX text being parsed). */
#ifndef TC_MAP_H
#define TC_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct tc_map_slot {
    const char *key;
    uint32_t len;
    uint32_t hash;
    uint32_t value;
} tc_map_slot;

typedef struct tc_map {
    tc_map_slot *slots;
    size_t cap;   /* power of two */
    size_t count;
    /* The first bytes and the lengths (mod 64) of the keys: most lookups
     * miss (a function's registers looked up among the module's symbols
     * and the function's labels), and these answer them without hashing. */
    uint64_t firsts[4];
    uint64_t lens;
} tc_map;

void tc_map_free(tc_map *m);
/* Returns a pointer to the stored value, or NULL if absent. */
uint32_t *tc_map_get(const tc_map *m, const char *key, size_t len);
/* Inserts key -> value unless present. Returns 1 if inserted, 0 if the key
 * already existed (its value is left unchanged), -1 out of memory. */
int tc_map_put(tc_map *m, const char *key, size_t len, uint32_t value);

#endif
