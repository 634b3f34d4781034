/*
 * genfilter.h
 *	  Shared state of the claim generations: the "definitely absent" filters
 *	  of sealed generations and the namespaces announced in open ones.
 */
#ifndef IDEM_GENFILTER_H
#define IDEM_GENFILTER_H

#include "postgres.h"

#include "access/xact.h"

#include "port/atomics.h"

/* Generations the shared state tracks at once */
#define IDEM_GEN_SLOTS				256

/* Bits of the per-generation namespace announcement bitmap */
#define IDEM_GEN_NS_BITS			1024
#define IDEM_GEN_NS_WORDS			(IDEM_GEN_NS_BITS / 64)

/* Bytes of one filter block: one cache line */
#define IDEM_FILTER_BLOCK_BYTES		64

/*
 * Flag of a filter's hash count (idempotency.generations.filter_hashes and
 * the shared slots) whose bit positions come from a mix of the hash; a
 * count without it is a filter sealed by 1.0, with double hashing.  The
 * sign bit, so that a 1.0 binary (a standby not yet upgraded, say) reads a
 * negative count and tests no bit: "may hold", an index probe, never a
 * false "absent".
 */
#define IDEM_FILTER_MIXED			((int) 0x80000000)
#define IDEM_FILTER_HASHES_MASK		0xff

/* A filter as built by the seal and stored in idempotency.generations */
typedef struct IdemFilter
{
	uint32		nblocks;		/* of IDEM_FILTER_BLOCK_BYTES */
	int			nhashes;		/* bits set per claim, with IDEM_FILTER_MIXED */
	uint64	   *bits;			/* nblocks * 8 words */
} IdemFilter;

/* GUCs */
extern int	idem_filter_memory_kb;
extern int	idem_filter_bits_per_claim;
extern int	idem_filter_memory_bits_per_claim;
extern bool idem_debug_legacy_filters;

extern void IdemGenFilterDefineGucs(void);
extern Size IdemGenFilterShmemSize(void);
extern void IdemGenFilterShmemInit(void);

extern uint64 IdemFilterHash(int32 nsid, const bytea *key);
extern void IdemFilterInit(IdemFilter *filter, uint64 nclaims, int bits_per_claim);
extern void IdemFilterAdd(IdemFilter *filter, uint64 hash);
extern bool IdemFilterMayContain(const uint64 *bits, uint32 nblocks,
								 int nhashes, uint64 hash);

extern bool IdemGenFiltersShared(void);
extern int	IdemGenSlotFind(int32 gen_id, bool create, bool fresh);
extern void IdemGenSlotFree(int32 gen_id);
extern void IdemGenSlotSweep(const int32 *live, int nlive);
extern uint64 IdemGenOpensRead(void);
extern void IdemGenOpensBump(void);
extern bool IdemGenSwitchInFlight(void);
extern void IdemGenSwitchEnd(XactEvent event);
extern void IdemGenDbForget(void);
extern void IdemGenAnnounce(int slot, int32 gen_id, int32 nsid);
extern bool IdemGenMayHoldNamespace(int slot, int32 gen_id, int32 nsid);
extern bool IdemGenFilterReady(int slot, int32 gen_id);
extern bool IdemGenFilterLoad(int slot, int32 gen_id, const char *bits,
							  Size len, int nhashes, bool fine);
extern bool IdemGenFilterWantsFine(int slot, int32 gen_id);
extern bool IdemGenAnyWantsFine(void);
extern int	IdemGenFilterTest(int slot, int32 gen_id, uint64 hash);
extern void IdemGenFilterPrefetch(int slot, int32 gen_id, uint64 hash);
extern void IdemGenCountClaim(int slot, int32 gen_id, uint64 limit);
extern void IdemGenCountFlushPending(void);
extern uint64 IdemGenSlotClaims(int slot, int32 gen_id);
extern void IdemGenWantSwitch(void);
extern Oid	IdemGenNextSwitchWanted(int *cursor);
extern void IdemGenRootAnnounce(int32 nsid);
extern void IdemGenRootAnnounceAll(void);
extern bool IdemGenRootMayHold(int32 nsid);
extern void IdemGenRootClear(void);

#endif							/* IDEM_GENFILTER_H */
