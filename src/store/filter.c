/*
 * filter.c
 *	  The one interface of the filters to the claim path (see filter.h):
 *	  may this generation, or the claims table, hold a claim?
 *
 * A claim asks three things of the filters: to start reading the memory
 * its probes will touch (the stripe of its TTL class), which generations
 * its look goes through (the scope of its namespace, narrowed by the
 * filters), and, for a relation it meets, whether it may hold the claim
 * (a sealed generation's filter and expiry, an open one's announced
 * namespaces, the claims table's announcement bitmap).  How each is
 * answered is genfilter.c's, genstripe.c's, genscope.c's and
 * generation.c's.
 */
#include "postgres.h"

#include "filter.h"
#include "genfilter.h"
#include "genscope.h"

/*
 * Start reading the filter memory a claim of ns with this hash probes in
 * the generations of map (none where the scope tests no stripe)
 */
void
IdemFilterPrefetch(IdemGenMap *map, const IdemNamespace *ns, uint64 hash)
{
	IdemGenScopePrefetch(map, ns, hash);
}

/*
 * The generations of map that may hold a claim of ns with this hash, into
 * sel (indexes of map->gens), most likely first; returns how many
 */
int
IdemFilterSelect(IdemGenMap *map, const IdemNamespace *ns, uint64 hash, int *sel)
{
	return IdemGenScopeSelect(map, ns, hash, sel);
}

/*
 * May gen (NULL: the claims table) hold a live claim of ns with this hash?
 * The claims table answers through the namespaces announced in it; a
 * sealed generation through its namespaces, their expiry at now and its
 * filter; an open or closed one through the namespaces announced in it.
 */
bool
IdemFilterMayHold(IdemGeneration *gen, const IdemNamespace *ns,
				  TimestampTz now, uint64 hash)
{
	if (gen == NULL)
		return IdemGenRootMayHold(ns->id);
	if (gen->state == IDEM_GEN_SEALED)
		return IdemGenSealedMayHold(gen, ns, now, hash);
	return IdemGenMayHoldNamespace(gen->slot, gen->id, ns->id);
}
