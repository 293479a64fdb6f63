/* units: groups entries into compile units with content-defined
 * boundaries. A ptxas process costs ~10 ms before any work, so one process
 * per small kernel is slower cold than one whole-module ptxas; grouping
 * amortizes that while an edit still recompiles one small unit.
 *
 * Entries are taken in name order. Whether a unit ends after an entry
 * depends only on that entry (a hash of its name, and its estimated cost
 * rounded to a power of two), so editing, adding or removing one entry
 * moves at most the boundaries next to it. */
#ifndef TC_PTX_UNITS_H
#define TC_PTX_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Default target compile cost of a unit, in PTX statements. */
#define TC_UNIT_COST_DEFAULT 1000u
/* The default with TC_UNIT_COST_MANY_JOBS or more compile jobs. A cold
 * build waits for its largest unit; with many workers, halving the units
 * shortens that wait while the work they add (shared functions compiled
 * in more units, more objects to link) runs beside it. On the 16-core
 * H200 machine a cold build of Quadrants' runtime took 0.29 s against
 * 0.44 s, its physics step 0.37 against 0.42 s; on 2 cores halving made
 * them 10-30% slower, which is why it is not done there. */
#define TC_UNIT_COST_FINE 500u
#define TC_UNIT_COST_MANY_JOBS 8
/* A module split by default whose kernels cost at most this many
 * statements in all is compiled whole (pipeline/module.c says why). */
#define TC_WHOLE_MAX_COST 1500u

/* The unit size a build uses when none is given. */
uint32_t tc_default_unit_cost(int jobs);

/* cost[i], name_hash[i] for n entries in name order. Writes the index of
 * each unit's first entry to first[] (capacity n) and returns the number of
 * units. target: desired cost per unit (0 = default). */
size_t tc_plan_units(const uint32_t *cost, const uint64_t *name_hash, size_t n,
                     uint32_t target, uint32_t *first);

#endif
