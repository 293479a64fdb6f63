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

/* Default target compile cost of a unit, in PTX statements, the same on
 * every machine. It once depended on the job count (1000 below 8 jobs):
 * then a 2-core CI runner and a 16-core workstation built one module from
 * different units, so a cache they shared served the second 18 of its 111
 * units, and the same input gave another image at another -j. Units of 500
 * cost a cold build on 2 cores 6-17% more and make an edit of a 220- or
 * 250-kernel module 40-50% cheaper there (bench/edit_cost.py); with many
 * cores they shorten a cold build, whose critical path is its largest
 * unit (the 16-core H200: Quadrants' runtime 0.29 s against 0.44 s at
 * 1000, its physics step 0.37 against 0.42 s). */
#define TC_UNIT_COST_DEFAULT 500u
/* A module split by default is compiled whole when one unit of this size
 * would hold all its kernels, or (next) when they cost at most
 * TC_WHOLE_MAX_COST statements in all (pipeline/module.c says why). */
#define TC_WHOLE_UNIT_COST 1000u
/* A module split by default whose kernels cost at most this many
 * statements in all is compiled whole (pipeline/module.c says why). */
#define TC_WHOLE_MAX_COST 1500u


/* cost[i], name_hash[i] for n entries in name order. Writes the index of
 * each unit's first entry to first[] (capacity n) and returns the number of
 * units. target: desired cost per unit (0 = default). */
size_t tc_plan_units(const uint32_t *cost, const uint64_t *name_hash, size_t n,
                     uint32_t target, uint32_t *first);

#endif
