/* units: content-defined grouping of entries into compile units. */
#include "ptx/units.h"

static uint32_t round_pow2(uint32_t c)
{
    /* nearest power of two, so small edits rarely change the bucket */
    uint32_t p = 1;
    while (p < c && p < (1u << 30))
        p <<= 1;
    return (p - c > c - p / 2) ? p / 2 : p;
}

size_t tc_plan_units(const uint32_t *cost, const uint64_t *name_hash, size_t n,
                     uint32_t target, uint32_t *first)
{
    if (!target)
        target = TC_UNIT_COST_DEFAULT;
    size_t units = 0;
    uint64_t acc = 0;
    int cut = 1; /* a unit starts at this entry */
    for (size_t i = 0; i < n; i++) {
        uint64_t c = round_pow2(cost[i] ? cost[i] : 1);
        int big = c >= target;
        /* A big entry is a unit of its own; a unit never grows past twice
         * the target, which bounds what an edit recompiles (boundaries
         * after such a forced cut resynchronize at the next content-defined
         * one). */
        if (cut || big || acc + c > 2ull * target) {
            first[units++] = (uint32_t)i;
            acc = 0;
        }
        acc += c;
        /* Cut after this entry with probability c/target, decided by its
         * own name hash: the expected unit cost is about the target. */
        cut = big || (name_hash[i] & UINT32_MAX) < c * UINT32_MAX / target;
    }
    return units;
}
