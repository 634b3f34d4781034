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
#define IDEM_GEN_SLOTS				1024

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

/* The block of a hash (a filter's, and a stripe's: genstripe.c) */
static inline uint32
IdemFilterBlock(uint64 hash, uint32 nblocks)
{
	return (uint32) (((hash >> 32) * (uint64) nblocks) >> 32);
}

/*
 * Bits of a hash for the positions in its block, independent of the bits
 * that chose the block: a 64-bit mix (a finalizer as in MurmurHash3), seven
 * 9-bit positions from each word.  Positions in arithmetic progression (the
 * usual double hashing) overlap between claims of one block far more than
 * random ones: at 20 bits per claim they gave 0.14% false positives where
 * a Bloom filter of 512-bit blocks should give 0.02%.
 */
static inline uint64
IdemFilterMix(uint64 x)
{
	x ^= x >> 33;
	x *= UINT64CONST(0xff51afd7ed558ccd);
	x ^= x >> 33;
	x *= UINT64CONST(0xc4ceb9fe1a85ec53);
	x ^= x >> 33;
	return x;
}

/*
 * Position i of a hash in its block.  Mixed: *w carries the current word
 * (start it at IdemFilterMix(hash)).  1.0's layout: h1 + i * h2, from the
 * hash's low 32 bits and the odd 32 bits from bit 16.
 */
static inline uint32
IdemFilterBit(uint64 hash, uint64 *w, int i, bool mixed)
{
	if (!mixed)
		return ((uint32) hash + i * ((uint32) (hash >> 16) | 1)) & 511;
	if (i > 0 && i % 7 == 0)
		*w = IdemFilterMix(*w + UINT64CONST(0x9E3779B97F4A7C15));
	return (uint32) (*w >> (9 * (i % 7))) & 511;
}

/* GUCs */
extern int	idem_filter_memory_kb;
extern int	idem_filter_bits_per_claim;
extern int	idem_filter_memory_bits_per_claim;
extern bool idem_debug_legacy_filters;

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
extern bool IdemGenNsUnknown(int32 gen_id);
extern bool IdemGenFilterReady(int slot, int32 gen_id);
extern int	IdemGenSlotStripeRef(int slot, int32 gen_id);
extern void IdemGenSlotMoveLane(int32 gen_id, int from_ref, int to_ref);
extern bool IdemGenArenaPlace(uint64 len, uint64 *offset);
extern char *IdemGenArena(void);
extern bool IdemGenFilterLoad(int slot, int32 gen_id, const char *bits,
							  Size len, int nhashes, bool fine);
extern bool IdemGenFilterPlaceLane(int slot, int32 gen_id, int32 ttl_class,
								   const IdemFilter *filter);
extern bool IdemGenFilterWantsFine(int slot, int32 gen_id);
extern bool IdemGenAnyWantsFine(void);
extern int	IdemGenFilterTest(int slot, int32 gen_id, uint64 hash);
extern void IdemGenFilterPrefetch(int slot, int32 gen_id, uint64 hash);
extern void IdemGenCountClaim(int slot, int32 gen_id, uint64 limit);
extern void IdemGenCountFlushPending(void);
extern uint64 IdemGenSlotClaims(int slot, int32 gen_id);
extern void IdemGenWantSwitch(void);
extern void IdemGenSetLauncherWake(void (*wake) (void));
extern Oid	IdemGenNextSwitchWanted(int *cursor);
extern void IdemGenRootAnnounce(int32 nsid);
extern void IdemGenRootAnnounceAll(void);
extern bool IdemGenRootMayHold(int32 nsid);
extern void IdemGenRootClear(void);

#endif							/* IDEM_GENFILTER_H */
