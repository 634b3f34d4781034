/*
 * claimcache.c
 *	  A cache of where claims live in the heap, to skip the index descent.
 *
 * Finding a duplicate through the unique index costs a btree descent: a
 * few page visits and some twenty key comparisons, mostly cache misses once
 * the index outgrows the CPU caches.  Most duplicates are redeliveries of
 * recent events, so we remember where recent claims were stored: a hash of
 * (database, relfilenode, namespace, key) maps to the heap TID of the claim.
 *
 * The cache is only a hint.  A hit is checked against the heap tuple it
 * points to, with the same dirty-snapshot rules as the index probe, and its
 * key and namespace are compared exactly; anything that does not match
 * (a purged, released or vacuumed claim, a reused TID, a hash collision)
 * just falls back to the index.  So the cache needs no invalidation, and a
 * wrong or torn entry can cost time but never change an answer.
 *
 * Layout: sets of IDEM_CACHE_WAYS 64-bit words, one cache line per set.
 * Each word packs a 15-bit tag, the low 8 bits of the generation the claim
 * lives in (0 for idempotency.claims itself; see generation.c), the block
 * number and the offset, so it is read and written with single atomic
 * operations, without locks.  The hash is of the claims table itself, so
 * it stays the same whichever generation holds the claim.
 *
 * A cached block number may lie past the end of the relation if VACUUM
 * truncated it; we check against the relation's length, which cannot
 * shrink while we hold our lock on the table, and refresh that length once
 * per transaction.
 *
 * With shared_preload_libraries the cache lives in shared memory and serves
 * all backends; otherwise each backend keeps a small private one.
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/bufmgr.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "claimcache.h"
#include "base/base.h"

/* Bits of a cache word */
#define IDEM_CACHE_OFFSET_BITS	9
#define IDEM_CACHE_BLOCK_BITS	32
#define IDEM_CACHE_GEN_SHIFT	(IDEM_CACHE_OFFSET_BITS + IDEM_CACHE_BLOCK_BITS)
#define IDEM_CACHE_TAG_BITS		15
#define IDEM_CACHE_TAG_SHIFT	(IDEM_CACHE_GEN_SHIFT + IDEM_CACHE_GEN_BITS)
#define IDEM_CACHE_TAG_MASK		((UINT64CONST(1) << IDEM_CACHE_TAG_BITS) - 1)
#define IDEM_CACHE_OFFSET_MASK	((1 << IDEM_CACHE_OFFSET_BITS) - 1)

StaticAssertDecl(IDEM_CACHE_TAG_SHIFT + IDEM_CACHE_TAG_BITS == 64,
				 "a cache word packs tag, generation, block and offset into 64 bits");

/* Slots of the private cache used without shared_preload_libraries */
#define IDEM_LOCAL_CACHE_SLOTS	65536

int			idem_claim_cache_size = 1048576;

/* The slots, in shared or local memory, and their number of sets */
static pg_atomic_uint64 *idem_cache_slots = NULL;
static uint64 idem_cache_nsets = 0;
static bool idem_cache_local_tried = false;

/* Lengths of the claims heaps, as last seen in this transaction */
#define IDEM_CACHE_LENGTHS		32
static IdemRelFile idem_cache_node[IDEM_CACHE_LENGTHS];
static BlockNumber idem_cache_nblocks[IDEM_CACHE_LENGTHS];
static int	idem_cache_nlengths = 0;

/* Rotates the victim slot of a full set */
static uint32 idem_cache_victim = 0;

/* relfilenode of the claims heap at the last hash, to prefetch early */
static uint64 idem_cache_last_rel = 0;

/* Forget the relation length at transaction end; VACUUM may shrink it */
static void
IdemClaimCacheXactCallback(XactEvent event, void *arg pg_attribute_unused())
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PARALLEL_ABORT || event == XACT_EVENT_PREPARE)
		idem_cache_nlengths = 0;
}

/*
 * A subtransaction rolled back released the locks it took, so VACUUM may
 * shrink a table it had locked: forget the lengths
 */
static void
IdemClaimCacheSubXactCallback(SubXactEvent event, SubTransactionId mySubid pg_attribute_unused(),
							  SubTransactionId parentSubid pg_attribute_unused(),
							  void *arg pg_attribute_unused())
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		idem_cache_nlengths = 0;
}

/*
 * Forget the relation lengths now: a TRUNCATE in the transaction that
 * created or last truncated a table shortens it in place, keeping its file
 */
void
IdemClaimCacheForgetLengths(void)
{
	idem_cache_nlengths = 0;
}

/* Register callbacks; called from _PG_init */
void
IdemClaimCacheInit(void)
{
	RegisterXactCallback(IdemClaimCacheXactCallback, NULL);
	RegisterSubXactCallback(IdemClaimCacheSubXactCallback, NULL);
}

/* Number of sets for a given number of slots: a power of two, maybe 0 */
static uint64
IdemClaimCacheSets(int slots)
{
	uint64		nsets = 1;

	if (slots < IDEM_CACHE_WAYS)
		return 0;
	while (nsets * 2 * IDEM_CACHE_WAYS <= (uint64) slots)
		nsets *= 2;
	return nsets;
}

/* Shared memory for the cache, plus room to align it to a cache line */
Size
IdemClaimCacheShmemSize(void)
{
	uint64		nsets = IdemClaimCacheSets(idem_claim_cache_size);

	if (nsets == 0)
		return 0;
	return add_size(mul_size(nsets * IDEM_CACHE_WAYS, sizeof(pg_atomic_uint64)),
					PG_CACHE_LINE_SIZE);
}

/* Create or attach to the shared cache; caller holds AddinShmemInitLock */
void
IdemClaimCacheShmemInit(void)
{
	Size		size = IdemClaimCacheShmemSize();
	bool		found;
	char	   *mem;
	uint64		i;

	if (size == 0)
		return;
	mem = ShmemInitStruct("idempotency claim cache", size, &found);
	idem_cache_nsets = IdemClaimCacheSets(idem_claim_cache_size);
	idem_cache_slots = (pg_atomic_uint64 *) TYPEALIGN(PG_CACHE_LINE_SIZE, mem);
	if (!found)
	{
		for (i = 0; i < idem_cache_nsets * IDEM_CACHE_WAYS; i++)
			pg_atomic_init_u64(&idem_cache_slots[i], 0);
	}
	idem_cache_local_tried = true;
}

/* Make sure some cache exists: the shared one, or a private one */
static inline bool
IdemClaimCacheReady(void)
{
	if (idem_cache_slots != NULL)
		return true;
	if (idem_cache_local_tried)
		return false;

	idem_cache_local_tried = true;
	if (!IdemShmemReady())
	{
		char	   *mem;
		uint64		i;

		idem_cache_nsets = IdemClaimCacheSets(IDEM_LOCAL_CACHE_SLOTS);
		mem = MemoryContextAlloc(TopMemoryContext,
								 idem_cache_nsets * IDEM_CACHE_WAYS * sizeof(pg_atomic_uint64) +
								 PG_CACHE_LINE_SIZE);
		idem_cache_slots = (pg_atomic_uint64 *) TYPEALIGN(PG_CACHE_LINE_SIZE, mem);
		for (i = 0; i < idem_cache_nsets * IDEM_CACHE_WAYS; i++)
			pg_atomic_init_u64(&idem_cache_slots[i], 0);
	}
	return idem_cache_slots != NULL;
}

/* Hash of a claim's identity, including where the claims table lives */
uint64
IdemClaimCacheHash(Relation heap, int32 nsid, const bytea *key)
{
	uint64		rel = IdemRelFileNumber(heap);
	uint64		seed;

	idem_cache_last_rel = rel;
	seed = hash_combine64(((uint64) MyDatabaseId << 32) | rel,
						  (uint64) (uint32) nsid * UINT64CONST(0x9E3779B97F4A7C15));
	return hash_bytes_extended((const unsigned char *) VARDATA_ANY(key),
							   VARSIZE_ANY_EXHDR(key), seed);
}

/*
 * Start loading the cache line where (nsid, key) would live, before the
 * claims heap is even open, so that the memory access overlaps with the
 * work of opening it.  Uses the relfilenode seen last; if it changed, the
 * prefetch was merely useless.
 */
void
IdemClaimCachePrefetch(int32 nsid, const bytea *key)
{
	uint64		seed;
	uint64		hash;

	if (idem_cache_slots == NULL || idem_cache_last_rel == 0)
		return;
	seed = hash_combine64(((uint64) MyDatabaseId << 32) | idem_cache_last_rel,
						  (uint64) (uint32) nsid * UINT64CONST(0x9E3779B97F4A7C15));
	hash = hash_bytes_extended((const unsigned char *) VARDATA_ANY(key),
							   VARSIZE_ANY_EXHDR(key), seed);
#ifdef __GNUC__
	__builtin_prefetch(&idem_cache_slots[((hash >> IDEM_CACHE_TAG_BITS) & (idem_cache_nsets - 1)) *
										 IDEM_CACHE_WAYS]);
#endif
}

/* The set and tag of a hash */
static inline pg_atomic_uint64 *
IdemClaimCacheSet(uint64 hash, uint64 *tag)
{
	*tag = hash & IDEM_CACHE_TAG_MASK;
	if (*tag == 0)
		*tag = 1;				/* 0 marks an empty slot */
	return &idem_cache_slots[((hash >> IDEM_CACHE_TAG_BITS) & (idem_cache_nsets - 1)) *
							 IDEM_CACHE_WAYS];
}

/*
 * Fill tids with the locations cached under hash; returns how many.  The
 * caller must verify each one against the heap.
 */
int
IdemClaimCacheLookup(uint64 hash, ItemPointerData *tids, uint8 *gens)
{
	pg_atomic_uint64 *set;
	uint64		tag;
	int			n = 0;
	int			i;

	if (!IdemClaimCacheReady())
		return 0;
	set = IdemClaimCacheSet(hash, &tag);
	for (i = 0; i < IDEM_CACHE_WAYS; i++)
	{
		uint64		word = pg_atomic_read_u64(&set[i]);

		if ((word >> IDEM_CACHE_TAG_SHIFT) != tag)
			continue;
		gens[n] = (uint8) ((word >> IDEM_CACHE_GEN_SHIFT) & IDEM_CACHE_GEN_MASK);
		/* ItemPointerSet evaluates its first argument more than once */
		ItemPointerSet(&tids[n],
					   (BlockNumber) ((word >> IDEM_CACHE_OFFSET_BITS) & 0xFFFFFFFF),
					   (OffsetNumber) (word & IDEM_CACHE_OFFSET_MASK));
		n++;
	}
	return n;
}

/* Remember that the claim with this hash lives at tid of generation gen */
void
IdemClaimCacheRemember(uint64 hash, ItemPointer tid, uint8 gen)
{
	pg_atomic_uint64 *set;
	uint64		tag;
	uint64		word;
	OffsetNumber offset = ItemPointerGetOffsetNumber(tid);
	int			target = -1;
	int			i;

	if (offset > IDEM_CACHE_OFFSET_MASK || !IdemClaimCacheReady())
		return;
	set = IdemClaimCacheSet(hash, &tag);
	word = (tag << IDEM_CACHE_TAG_SHIFT) |
		((uint64) (gen & IDEM_CACHE_GEN_MASK) << IDEM_CACHE_GEN_SHIFT) |
		((uint64) ItemPointerGetBlockNumber(tid) << IDEM_CACHE_OFFSET_BITS) |
		offset;

	for (i = 0; i < IDEM_CACHE_WAYS; i++)
	{
		uint64		old = pg_atomic_read_u64(&set[i]);

		if (old == word)
			return;
		if ((old >> IDEM_CACHE_TAG_SHIFT) == tag)
		{
			target = i;			/* same key, moved: overwrite */
			break;
		}
		if (old == 0 && target < 0)
			target = i;
	}
	if (target < 0)
		target = (idem_cache_victim++) % IDEM_CACHE_WAYS;
	pg_atomic_write_u64(&set[target], word);
}

/*
 * Does block exist in heap?  Checked before following a cached TID, since
 * VACUUM may have truncated the table since the TID was cached.  The
 * caller holds a lock on heap that keeps VACUUM from truncating it now.
 */
bool
IdemClaimCacheBlockExists(Relation heap, BlockNumber block)
{
	IdemRelFile node = IdemRelFileOf(heap);
	int			i;

	for (i = 0; i < idem_cache_nlengths; i++)
		if (memcmp(&node, &idem_cache_node[i], sizeof(node)) == 0)
		{
			if (block < idem_cache_nblocks[i])
				return true;
			break;
		}
	if (i == idem_cache_nlengths)
	{
		if (idem_cache_nlengths == IDEM_CACHE_LENGTHS)
			i = 0;				/* start over: a transaction of many tables */
		else
			idem_cache_nlengths++;
		idem_cache_node[i] = node;
	}
	idem_cache_nblocks[i] = RelationGetNumberOfBlocks(heap);
	return block < idem_cache_nblocks[i];
}
