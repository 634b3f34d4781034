/*
 * claimcache.h
 *	  A cache of where claims live in the heap, to skip the index descent.
 */
#ifndef IDEM_CLAIMCACHE_H
#define IDEM_CLAIMCACHE_H

#include "postgres.h"

#include "storage/itemptr.h"
#include "utils/relcache.h"

/* Slots per set; a set fills one 64-byte cache line */
#define IDEM_CACHE_WAYS			8

/*
 * Bits of the generation tag of a cached location: 8, so that a hit in a
 * store of up to 256 generations reads the heap of one generation only,
 * not of every sixteenth
 */
#define IDEM_CACHE_GEN_BITS		8
#define IDEM_CACHE_GEN_MASK		((1 << IDEM_CACHE_GEN_BITS) - 1)

/* Candidate locations a lookup can return */
#define IDEM_CACHE_MAX_CANDIDATES IDEM_CACHE_WAYS

/* GUC: slots in the shared cache */
extern int	idem_claim_cache_size;

extern void IdemClaimCacheInit(void);
extern Size IdemClaimCacheShmemSize(void);
extern void IdemClaimCacheShmemInit(void);
extern uint64 IdemClaimCacheHash(Relation heap, int32 nsid, const bytea *key);
extern void IdemClaimCachePrefetch(int32 nsid, const bytea *key);
extern int	IdemClaimCacheLookup(uint64 hash, ItemPointerData *tids, uint8 *gens);
extern void IdemClaimCacheRemember(uint64 hash, ItemPointer tid, uint8 gen);
extern bool IdemClaimCacheBlockExists(Relation heap, BlockNumber block);
extern void IdemClaimCacheForgetLengths(void);

#endif							/* IDEM_CLAIMCACHE_H */
