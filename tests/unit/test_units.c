/* Tests of unit grouping: every entry lands in exactly one unit, in order;
 * big entries stand alone; and an edit, an insertion or a removal changes
 * only the units next to it, so an edit recompiles little. */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "ptx/units.h"
#include "util/hash.h"

#define N 400

static uint64_t name_hash(int i)
{
    char name[32];
    snprintf(name, sizeof name, "task_%d", i);
    tc_digest d;
    tc_digest_of(name, strlen(name), &d);
    return tc_digest_u64(&d);
}

/* Number of units of (b) that are not exactly a unit of (a); units are
 * compared by the names (ids) of their entries. */
static size_t changed_units(const int *ida, const uint32_t *fa, size_t ka, size_t na,
                            const int *idb, const uint32_t *fb, size_t kb, size_t nb)
{
    size_t changed = 0;
    for (size_t u = 0; u < kb; u++) {
        size_t s = fb[u], e = u + 1 < kb ? fb[u + 1] : nb;
        int found = 0;
        for (size_t v = 0; v < ka && !found; v++) {
            size_t s2 = fa[v], e2 = v + 1 < ka ? fa[v + 1] : na;
            if (e - s != e2 - s2)
                continue;
            found = 1;
            for (size_t i = 0; i < e - s; i++)
                if (idb[s + i] != ida[s2 + i])
                    found = 0;
        }
        changed += !found;
    }
    return changed;
}

int main(void)
{
    static uint32_t cost[N + 1], first[N + 1], first2[N + 1];
    static uint64_t hash[N + 1];
    static int id[N + 1], id2[N + 1];
    for (int i = 0; i < N; i++) {
        cost[i] = 20 + (uint32_t)(name_hash(i + 1000) % 200);
        hash[i] = name_hash(i);
        id[i] = i;
    }
    cost[50] = 5000; /* one big entry */
    size_t k = tc_plan_units(cost, hash, N, 600, first);
    CHECK(k > N / 40 && k < N / 2);
    CHECK(first[0] == 0);
    for (size_t u = 1; u < k; u++)
        CHECK(first[u] > first[u - 1]);
    /* the big entry is alone in its unit */
    int alone = 0;
    for (size_t u = 0; u < k; u++)
        if (first[u] == 50 && (u + 1 == k || first[u + 1] == 51))
            alone = 1;
    CHECK(alone);
    /* deterministic */
    size_t k2 = tc_plan_units(cost, hash, N, 600, first2);
    CHECK(k2 == k && !memcmp(first, first2, k * sizeof *first));

    /* edits: any change of one entry's cost changes at most 2 units */
    size_t worst = 0;
    for (int e = 0; e < N; e += 7) {
        uint32_t saved = cost[e];
        cost[e] = saved * 3 + 17;
        k2 = tc_plan_units(cost, hash, N, 600, first2);
        size_t c = changed_units(id, first, k, N, id, first2, k2, N);
        worst = c > worst ? c : worst;
        cost[e] = saved;
    }
    CHECK(worst <= 3);

    /* insertion of a new entry in the middle of name order */
    static uint32_t cost2[N + 1];
    static uint64_t hash2[N + 1];
    for (int i = 0, j = 0; i <= N; i++) {
        if (i == 200) {
            cost2[i] = 100;
            hash2[i] = name_hash(99999);
            id2[i] = 99999;
        } else {
            cost2[i] = cost[j];
            hash2[i] = hash[j];
            id2[i] = id[j];
            j++;
        }
    }
    k2 = tc_plan_units(cost2, hash2, N + 1, 600, first2);
    CHECK(changed_units(id, first, k, N, id2, first2, k2, N + 1) <= 3);

    /* removal */
    k2 = tc_plan_units(cost + 1, hash + 1, N - 1, 600, first2);
    CHECK(changed_units(id, first, k, N, id + 1, first2, k2, N - 1) <= 3);
    return check_report("test_units");
}
