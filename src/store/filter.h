/*
 * filter.h
 *	  The filters as the claim path sees them: which relations may hold a
 *	  claim of a namespace whose filter hash is known.
 *
 * Behind it are genfilter.c (the Bloom filters, their shared slots and the
 * announcements of open generations), genstripe.c (the stripes that lay
 * the filters of one TTL class side by side, so that one probe asks them
 * all) and genscope.c (the generations a namespace's claims may be in).
 * The claim path calls only this; stripes and scopes can change, or go,
 * without touching claimstore.c.
 */
#ifndef IDEM_FILTER_H
#define IDEM_FILTER_H

#include "postgres.h"

#include "datatype/timestamp.h"

#include "generation.h"
#include "catalog/idem_catalog.h"

/* The filter hash of a key of namespace nsid (genfilter.c) */
extern uint64 IdemFilterHash(int32 nsid, const bytea *key);

extern void IdemFilterPrefetch(IdemGenMap *map, const IdemNamespace *ns,
							   uint64 hash);
extern int	IdemFilterSelect(IdemGenMap *map, const IdemNamespace *ns,
							 uint64 hash, int *sel);
extern bool IdemFilterMayHold(IdemGeneration *gen, const IdemNamespace *ns,
							  TimestampTz now, uint64 hash);

#endif							/* IDEM_FILTER_H */
