/*
 * genfilter.c
 *	  Shared state of the claim generations: the "definitely absent" filters
 *	  of sealed generations and the namespaces announced in open ones.
 *
 * Claims live in generations (generation.c).  A claim of a new id must
 * know that no other live generation holds its id, without a btree descent
 * into each of them.  Two structures in shared memory answer that:
 *
 *	 - A sealed generation takes no new claims, so the seal builds a blocked
 *	   Bloom filter of its (namespace, key) pairs: one 64-byte block per
 *	   claim, nhashes bits set in it, so a test is one cache miss.  It has
 *	   false positives only: the seal reads every tuple of the generation,
 *	   visible or not, after no transaction can insert into it any more.
 *	   The filter is stored in idempotency.generations, so it is WAL-logged,
 *	   replicated, dumped and restored with the generation, and loaded into
 *	   shared memory by the first backend that needs it, after a restart and
 *	   on a standby alike.  Its size is what a drop's WAL pays for (the
 *	   full-page images of its TOAST pages), so it is kept coarse
 *	   (filter_bits_per_claim, 12).  The seal also builds a finer one
 *	   (filter_memory_bits_per_claim, 28) in the same pass, which only
 *	   shared memory holds: the sealing backend loads it when its
 *	   transaction commits, in place of the stored one.  After a restart
 *	   the purge worker rebuilds it from the generation's table for the
 *	   stored filters claimers loaded (not on a standby, which has none).
 *	   The stored filter's hash count says its layout: IDEM_FILTER_MIXED,
 *	   or 1.0's double hashing, which filters sealed by 1.0 keep.
 *	 - An open generation takes claims, so its filter would go stale at
 *	   once.  Instead each claimer announces its namespace in the
 *	   generation's bitmap before inserting into it (a full barrier), and
 *	   checks the bitmaps of the other open generations after inserting into
 *	   its own.  Of two claimers of one id in two open generations, at least
 *	   one sees the other's announcement and probes its generation; see
 *	   claimstore.c for what it does then.  A slot created for a generation
 *	   that already existed (after a restart, say) starts with every bit
 *	   set, since nobody knows what was announced before; only the session
 *	   that creates a generation starts its bitmap empty.
 *
 * idempotency.claims itself has such a bitmap too, which starts full: our
 * claims announce in it, any SQL write to the table fills it (an executor
 * and a COPY hook in generation.c), and the maintenance pass empties it
 * only while no transaction can be writing the table and its index holds
 * no entry at all.
 *
 * Slots are keyed by database and generation id.  Readers take no lock.
 * Freeing a slot is always safe (whoever needs it again makes a full one,
 * and loads the filter again from the committed row), and clears the key
 * before its memory can be reused.  A slot's ready field holds the number
 * of the load that filled it (0: none), and a reader checks the key and
 * that number before and after reading, so that a filter freed or replaced
 * under its feet reads as "not loaded", never as "absent".  A filter is
 * loaded only from a committed row, or from a seal's or a refinement's
 * scan once their transaction has committed; a finer filter replaces a
 * stored one (generation.c refines them after a restart).
 *
 * Each database has an entry beside the slots: its count of generations
 * opened (which claimers read to notice a switch their map missed), the
 * switches in flight, and idempotency.claims's bitmap.  Entries are taken
 * on demand, one per database a backend claims in; a backend stays
 * attached to its database's entry until it exits, and an entry nobody is
 * attached to may go to another database, its own getting a fresh one
 * when it comes back (IdemGenDbGet).  There are more entries than
 * backends, so any number of databases have one while they claim.
 *
 * Without shared_preload_libraries there is no shared state: every
 * generation that might hold an id is probed through its index, which
 * gives the same answers, slower, and a claimer notices a switch its map
 * missed through the map's invalidation (IdemGenOpensSeen).
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "genfilter.h"
#include "genstripe.h"

/* One generation's shared state */
typedef struct IdemGenSlot
{
	pg_atomic_uint64 key;		/* database << 32 | generation id; 0: free */
	pg_atomic_uint32 ready;		/* 0, or the load's number: see IdemGenFilterTest */
	uint64		offset;			/* of the filter in the arena, in bytes */
	uint32		nblocks;
	int			nhashes;
	bool		fine;			/* the finer filter of a seal, not the stored one */
	bool		fine_failed;	/* a finer one did not fit: keep the stored one */
	int			stripe_ref;		/* its finer filter's stripe lane, or IDEM_STRIPE_NO_LANE */
	pg_atomic_uint64 claims;	/* inserted by our claims: see IdemGenCountClaim */
	bool		ns_unknown;		/* made full, not knowing what it held */
	pg_atomic_uint64 nsbits[IDEM_GEN_NS_WORDS];
} IdemGenSlot;

/*
 * One database's shared state beside its generations'.  Made when a
 * backend of the database first needs it, and kept while a backend that
 * read it is alive (attached): a claimer compares the count of opens it
 * read with the count now, so the entry it read must be the one it reads
 * again.  An entry no backend is attached to, and with no switch in
 * flight, may be taken by another database (IdemGenDbGet); its database
 * then gets a fresh one: a full root bitmap, and a count of opens that no
 * backend has read.
 */
typedef struct IdemGenDb
{
	pg_atomic_uint32 dbid;		/* 0: free */
	pg_atomic_uint32 attached;	/* backends that got it: see IdemGenDbGet */
	pg_atomic_uint64 left_at;	/* db_clock when the last one detached */
	pg_atomic_uint64 opens;		/* generations opened: see IdemGenOpensRead */
	pg_atomic_uint32 switching; /* transactions that opened one, in flight */
	pg_atomic_uint32 switch_wanted; /* an open one reached its size bound */
	pg_atomic_uint64 rootbits[IDEM_GEN_NS_WORDS];	/* idempotency.claims */
} IdemGenDb;

/*
 * Database entries beyond one per backend (MaxBackends): a backend is
 * attached to one entry at most, so there is always one to take; the
 * spare ones keep the root bitmaps of databases idle for a while
 */
#define IDEM_GEN_DB_SPARE			16

/* The whole shared state; the arena follows, cache-line aligned */
typedef struct IdemGenShared
{
	LWLock	   *lock;			/* taken to create, load or free a slot */
	uint64		arena_size;
	uint32		loads;			/* filters loaded: each load's number */
	int			ndbs;			/* entries in dbs */
	pg_atomic_uint64 db_clock;	/* ticks at each detach: the entries' age */
	IdemGenSlot slots[IDEM_GEN_SLOTS];
	IdemGenDb	dbs[FLEXIBLE_ARRAY_MEMBER];
} IdemGenShared;

int			idem_filter_memory_kb = 262144;
int			idem_filter_bits_per_claim = 12;
int			idem_filter_memory_bits_per_claim = 28;
bool		idem_debug_legacy_filters = false;

PG_FUNCTION_INFO_V1(idem_generation_filter);

static IdemGenShared *idem_gen_shared = NULL;
/* Wakes the launcher (purge/worker.c) for a wanted switch; set at init */
static void (*idem_gen_wake_launcher) (void) = NULL;

/* Register what wakes the launcher; called from _PG_init */
void
IdemGenSetLauncherWake(void (*wake) (void))
{
	idem_gen_wake_launcher = wake;
}

static int	idem_gen_ndbs = 0;		/* of the shared state, once sized */
static IdemGenDb *idem_gen_mine = NULL; /* this database's, attached */
static IdemGenDb *idem_gen_switching_db = NULL;	/* counted as switching there */
static char *idem_gen_arena = NULL;

/* Claims this backend inserted into one open generation, not yet counted */
#define IDEM_GEN_COUNT_BATCH	64
static int32 idem_count_gen = 0;
static int	idem_count_slot = -1;
static uint32 idem_count_pending = 0;
static uint64 idem_count_limit = 0;

/*
 * Database entries of the shared state: one per backend that may claim,
 * and spares.  Computed once, so that the size the postmaster asked for
 * is the one it creates.
 */
static int
IdemGenDbCount(void)
{
	if (idem_gen_ndbs == 0)
	{
		idem_gen_ndbs = Max(IdemMaxBackends(), 1) + IDEM_GEN_DB_SPARE;
	}
	return idem_gen_ndbs;
}

/* Bytes of the shared state before the arena */
static Size
IdemGenSharedSize(void)
{
	return MAXALIGN(add_size(offsetof(IdemGenShared, dbs),
							 mul_size(IdemGenDbCount(), sizeof(IdemGenDb))));
}

/* Bytes of shared memory */
Size
IdemGenFilterShmemSize(void)
{
	Size		size = IdemGenSharedSize();

	size = add_size(size, PG_CACHE_LINE_SIZE);
	return add_size(size, mul_size((Size) idem_filter_memory_kb, 1024));
}

/* Create or attach; the caller holds AddinShmemInitLock */
void
IdemGenFilterShmemInit(void)
{
	bool		found;
	int			i;

	idem_gen_shared = ShmemInitStruct("idempotency generations",
									  IdemGenFilterShmemSize(), &found);
	idem_gen_arena = (char *) TYPEALIGN(PG_CACHE_LINE_SIZE,
										(char *) idem_gen_shared + IdemGenSharedSize());
	if (found)
		return;
	idem_gen_shared->lock = idem_shared->lock;
	idem_gen_shared->arena_size = (uint64) idem_filter_memory_kb * 1024;
	idem_gen_shared->loads = 0;
	idem_gen_shared->ndbs = IdemGenDbCount();
	pg_atomic_init_u64(&idem_gen_shared->db_clock, 0);
	for (i = 0; i < idem_gen_shared->ndbs; i++)
	{
		int			w;

		pg_atomic_init_u32(&idem_gen_shared->dbs[i].dbid, 0);
		pg_atomic_init_u32(&idem_gen_shared->dbs[i].attached, 0);
		pg_atomic_init_u64(&idem_gen_shared->dbs[i].left_at, 0);
		pg_atomic_init_u64(&idem_gen_shared->dbs[i].opens, 0);
		pg_atomic_init_u32(&idem_gen_shared->dbs[i].switching, 0);
		pg_atomic_init_u32(&idem_gen_shared->dbs[i].switch_wanted, 0);
		for (w = 0; w < IDEM_GEN_NS_WORDS; w++)
			pg_atomic_init_u64(&idem_gen_shared->dbs[i].rootbits[w], PG_UINT64_MAX);
	}
	for (i = 0; i < IDEM_GEN_SLOTS; i++)
	{
		IdemGenSlot *s = &idem_gen_shared->slots[i];
		int			w;

		pg_atomic_init_u64(&s->key, 0);
		pg_atomic_init_u32(&s->ready, 0);
		s->offset = 0;
		s->nblocks = 0;
		s->nhashes = 0;
		s->stripe_ref = IDEM_STRIPE_NO_LANE;
		pg_atomic_init_u64(&s->claims, 0);
		for (w = 0; w < IDEM_GEN_NS_WORDS; w++)
			pg_atomic_init_u64(&s->nsbits[w], 0);
	}
}

/* The hash of a claim's identity that filters are built on */
uint64
IdemFilterHash(int32 nsid, const bytea *key)
{
	return hash_bytes_extended((const unsigned char *) VARDATA_ANY(key),
							   VARSIZE_ANY_EXHDR(key),
							   (uint64) (uint32) nsid * UINT64CONST(0x9E3779B97F4A7C15) + 1);
}

/* Size a filter for nclaims claims at bits_per_claim bits each */
void
IdemFilterInit(IdemFilter *filter, uint64 nclaims, int bits_per_claim)
{
	uint64		bits = Max(nclaims, 1) * (uint64) bits_per_claim;
	uint64		nblocks = (bits + IDEM_FILTER_BLOCK_BYTES * 8 - 1) / (IDEM_FILTER_BLOCK_BYTES * 8);

	/* ln 2 * bits per claim hashes minimise false positives */
	filter->nhashes = Max(1, Min(16, (int) (bits_per_claim * 0.69 + 0.5)));
	if (!idem_debug_legacy_filters)
		filter->nhashes |= IDEM_FILTER_MIXED;
	filter->nblocks = (uint32) Min(nblocks, (uint64) (MaxAllocHugeSize / IDEM_FILTER_BLOCK_BYTES));
	filter->bits = palloc_extended((Size) filter->nblocks * IDEM_FILTER_BLOCK_BYTES,
								   MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
}

/* Add a claim's hash to a filter */
void
IdemFilterAdd(IdemFilter *filter, uint64 hash)
{
	uint64	   *block = filter->bits + (Size) IdemFilterBlock(hash, filter->nblocks) * 8;
	bool		mixed = (filter->nhashes & IDEM_FILTER_MIXED) != 0;
	int			k = filter->nhashes & IDEM_FILTER_HASHES_MASK;
	uint64		w = IdemFilterMix(hash);
	int			i;

	for (i = 0; i < k; i++)
	{
		uint32		bit = IdemFilterBit(hash, &w, i, mixed);

		block[bit >> 6] |= UINT64CONST(1) << (bit & 63);
	}
}

/* May the filter contain hash?  false means definitely not */
bool
IdemFilterMayContain(const uint64 *bits, uint32 nblocks, int nhashes, uint64 hash)
{
	const uint64 *block = bits + (Size) IdemFilterBlock(hash, nblocks) * 8;
	bool		mixed = (nhashes & IDEM_FILTER_MIXED) != 0;
	int			k = nhashes & IDEM_FILTER_HASHES_MASK;
	uint64		w = IdemFilterMix(hash);
	int			i;

	for (i = 0; i < k; i++)
	{
		uint32		bit = IdemFilterBit(hash, &w, i, mixed);

		if ((block[bit >> 6] & (UINT64CONST(1) << (bit & 63))) == 0)
			return false;
	}
	return true;
}

/* Is there shared memory for filters (shared_preload_libraries)? */
bool
IdemGenFiltersShared(void)
{
	return idem_gen_shared != NULL && idem_gen_shared->arena_size > 0;
}

/* The slot key of generation gen_id of this database */
static inline uint64
IdemGenSlotKey(int32 gen_id)
{
	return ((uint64) MyDatabaseId << 32) | (uint32) gen_id;
}

/*
 * The slot of generation gen_id of this database, or -1.  With create, a
 * missing slot is made: its bitmap empty if fresh (the caller is creating
 * the generation), full otherwise.  -1 without shared memory or with every
 * slot taken.
 */
int
IdemGenSlotFind(int32 gen_id, bool create, bool fresh)
{
	uint64		key = IdemGenSlotKey(gen_id);
	int			i;
	int			free_slot = -1;

	if (idem_gen_shared == NULL || gen_id <= 0)
		return -1;
	for (i = 0; i < IDEM_GEN_SLOTS; i++)
		if (pg_atomic_read_u64(&idem_gen_shared->slots[i].key) == key)
			return i;
	if (!create)
		return -1;

	LWLockAcquire(idem_gen_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < IDEM_GEN_SLOTS; i++)
	{
		uint64		k = pg_atomic_read_u64(&idem_gen_shared->slots[i].key);

		if (k == key)
		{
			LWLockRelease(idem_gen_shared->lock);
			return i;
		}
		if (k == 0 && free_slot < 0)
			free_slot = i;
	}
	if (free_slot >= 0)
	{
		IdemGenSlot *s = &idem_gen_shared->slots[free_slot];
		int			w;

		pg_atomic_write_u32(&s->ready, 0);
		s->nblocks = 0;
		s->fine = false;
		s->fine_failed = false;
		s->stripe_ref = IDEM_STRIPE_NO_LANE;
		pg_atomic_write_u64(&s->claims, 0);
		s->ns_unknown = !fresh;
		for (w = 0; w < IDEM_GEN_NS_WORDS; w++)
			pg_atomic_write_u64(&s->nsbits[w], fresh ? 0 : PG_UINT64_MAX);
		pg_write_barrier();
		pg_atomic_write_u64(&s->key, key);
	}
	LWLockRelease(idem_gen_shared->lock);
	return free_slot;
}

/* Free a slot; the caller holds the lock.  Freeing is always safe */
static void
IdemGenSlotFreeAt(int i)
{
	IdemGenSlot *s = &idem_gen_shared->slots[i];

	if (s->stripe_ref != IDEM_STRIPE_NO_LANE)
		IdemGenStripeFreeLane(s->stripe_ref,
							  (int32) (uint32) pg_atomic_read_u64(&s->key));
	s->stripe_ref = IDEM_STRIPE_NO_LANE;
	pg_atomic_write_u64(&idem_gen_shared->slots[i].key, 0);
	pg_atomic_write_u32(&idem_gen_shared->slots[i].ready, 0);
}

/* Free the slot of a dropped generation of this database */
void
IdemGenSlotFree(int32 gen_id)
{
	int			slot = IdemGenSlotFind(gen_id, false, false);

	if (slot < 0)
		return;
	LWLockAcquire(idem_gen_shared->lock, LW_EXCLUSIVE);
	if (pg_atomic_read_u64(&idem_gen_shared->slots[slot].key) == IdemGenSlotKey(gen_id))
		IdemGenSlotFreeAt(slot);
	LWLockRelease(idem_gen_shared->lock);
}

/*
 * Free the slots of this database's generations that are not among the
 * nlive ids of live: those of generations dropped, or never committed
 */
void
IdemGenSlotSweep(const int32 *live, int nlive)
{
	int			i;
	int			j;

	if (idem_gen_shared == NULL)
		return;
	LWLockAcquire(idem_gen_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < IDEM_GEN_SLOTS; i++)
	{
		uint64		k = pg_atomic_read_u64(&idem_gen_shared->slots[i].key);
		bool		found = false;

		if (k == 0 || (Oid) (k >> 32) != MyDatabaseId)
			continue;
		for (j = 0; j < nlive && !found; j++)
			found = ((uint32) live[j] == (uint32) k);
		if (!found)
			IdemGenSlotFreeAt(i);
	}
	LWLockRelease(idem_gen_shared->lock);
}

/* Is slot still generation gen_id's, of this database? */
static inline bool
IdemGenSlotIs(int slot, int32 gen_id)
{
	return slot >= 0 &&
		pg_atomic_read_u64(&idem_gen_shared->slots[slot].key) == IdemGenSlotKey(gen_id);
}

/* Set namespace nsid's bit in a bitmap, writing only if it is not set yet */
static inline void
IdemBitmapAnnounce(pg_atomic_uint64 *words, int32 nsid)
{
	uint32		bit = (uint32) nsid % IDEM_GEN_NS_BITS;
	pg_atomic_uint64 *word = &words[bit / 64];

	/* set once by the first claimer: no write to a line every backend reads */
	if ((pg_atomic_read_u64(word) & (UINT64CONST(1) << (bit % 64))) != 0)
	{
		pg_memory_barrier();
		return;
	}
	(void) pg_atomic_fetch_or_u64(word, UINT64CONST(1) << (bit % 64));
}

/* Is namespace nsid's bit set?  After a full barrier */
static inline bool
IdemBitmapHas(pg_atomic_uint64 *words, int32 nsid)
{
	uint32		bit = (uint32) nsid % IDEM_GEN_NS_BITS;

	pg_memory_barrier();
	return (pg_atomic_read_u64(&words[bit / 64]) & (UINT64CONST(1) << (bit % 64))) != 0;
}

/*
 * Announce that this backend is about to insert a claim of namespace nsid
 * into generation gen_id.  A full barrier: the insertion that follows is
 * ordered after it.
 */
void
IdemGenAnnounce(int slot, int32 gen_id, int32 nsid)
{
	if (IdemGenSlotIs(slot, gen_id))
		IdemBitmapAnnounce(idem_gen_shared->slots[slot].nsbits, nsid);
}

/*
 * Does open generation gen_id's bitmap say "may hold" for every namespace,
 * having been made without knowing which it holds (after a restart)?
 * Makes its slot so if it has none; false without a slot.  (A generation
 * whose switch found every slot taken gets a slot made so later: it is
 * switched again, once.)
 */
bool
IdemGenNsUnknown(int32 gen_id)
{
	int			slot = IdemGenSlotFind(gen_id, true, false);

	return slot >= 0 && IdemGenSlotIs(slot, gen_id) &&
		idem_gen_shared->slots[slot].ns_unknown;
}

/*
 * Might open generation gen_id hold claims of nsid?  Called after our own
 * insertion, which the barrier orders before the read.  true when unsure.
 */
bool
IdemGenMayHoldNamespace(int slot, int32 gen_id, int32 nsid)
{
	bool		has;

	if (slot < 0)
		return true;
	has = IdemBitmapHas(idem_gen_shared->slots[slot].nsbits, nsid);
	pg_read_barrier();
	if (!IdemGenSlotIs(slot, gen_id))
		return true;
	return has;
}

/*
 * Generation gen_id's stripe lane moved from from_ref to to_ref
 * (genstripe.c): so does its slot's reference.  Under the lock.
 */
void
IdemGenSlotMoveLane(int32 gen_id, int from_ref, int to_ref)
{
	int			slot = IdemGenSlotFind(gen_id, false, false);

	if (slot >= 0 && idem_gen_shared->slots[slot].stripe_ref == from_ref)
		idem_gen_shared->slots[slot].stripe_ref = to_ref;
	else
		elog(WARNING, "generation %d has no slot for its stripe lane", gen_id);
}

/* The stripe lane of generation gen_id's slot, or IDEM_STRIPE_NO_LANE */
int
IdemGenSlotStripeRef(int slot, int32 gen_id)
{
	if (!IdemGenSlotIs(slot, gen_id))
		return IDEM_STRIPE_NO_LANE;
	return *(volatile int *) &idem_gen_shared->slots[slot].stripe_ref;
}

/* Is generation gen_id's filter loaded in slot? */
bool
IdemGenFilterReady(int slot, int32 gen_id)
{
	return IdemGenSlotIs(slot, gen_id) &&
		pg_atomic_read_u32(&idem_gen_shared->slots[slot].ready) != 0;
}

/* The filters' arena in shared memory (NULL without it) */
char *
IdemGenArena(void)
{
	return idem_gen_arena;
}

/* Where slot o's loaded filter ends in the arena; false if none is loaded */
static inline bool
IdemGenSlotFilterEnd(IdemGenSlot *o, uint64 *end)
{
	if (pg_atomic_read_u64(&o->key) == 0 || pg_atomic_read_u32(&o->ready) == 0)
		return false;
	*end = o->offset + (uint64) o->nblocks * IDEM_FILTER_BLOCK_BYTES;
	return true;
}

/* Does [start, start + len) overlap a filter loaded in a slot, or a stripe? */
static bool
IdemGenArenaTaken(uint64 start, uint64 len)
{
	for (int j = 0; j < IDEM_GEN_SLOTS; j++)
	{
		IdemGenSlot *o = &idem_gen_shared->slots[j];
		uint64		oend;

		if (IdemGenSlotFilterEnd(o, &oend) && start < oend && o->offset < start + len)
			return true;
	}
	return IdemGenStripeOverlaps(start, len);
}

/*
 * Find room for len bytes in the arena, first fit between the filters
 * loaded and the stripes (genstripe.c): at 0, then after each of them.
 * The caller holds the lock, and fills the room before releasing it.
 */
bool
IdemGenArenaPlace(uint64 len, uint64 *offset)
{
	uint64		start;
	int			c;

	if (idem_gen_shared == NULL || len == 0)
		return false;
	for (c = -1; c < IDEM_GEN_SLOTS + IDEM_GEN_STRIPES; c++)
	{
		if (c < 0)
			start = 0;
		else if (c < IDEM_GEN_SLOTS)
		{
			if (!IdemGenSlotFilterEnd(&idem_gen_shared->slots[c], &start))
				continue;
		}
		else if (!IdemGenStripeEnd(c - IDEM_GEN_SLOTS, &start))
			continue;
		start = TYPEALIGN(PG_CACHE_LINE_SIZE, start);
		if (start + len <= idem_gen_shared->arena_size && !IdemGenArenaTaken(start, len))
		{
			*offset = start;
			return true;
		}
	}
	return false;
}

/*
 * Take the lock if slot is still generation gen_id's, and return it; NULL
 * (the lock not held) otherwise
 */
static IdemGenSlot *
IdemGenSlotLock(int slot, int32 gen_id)
{
	IdemGenSlot *s;

	if (idem_gen_shared == NULL || slot < 0)
		return NULL;
	s = &idem_gen_shared->slots[slot];
	LWLockAcquire(idem_gen_shared->lock, LW_EXCLUSIVE);
	if (pg_atomic_read_u64(&s->key) != IdemGenSlotKey(gen_id))
	{
		LWLockRelease(idem_gen_shared->lock);
		return NULL;
	}
	return s;
}

/*
 * Load a filter into the arena, first fit between the filters loaded.
 * Returns false if no filter is loaded after all (the slot is not the
 * generation's, the length is wrong, or this one does not fit).  A fine
 * filter (a seal's finer one) replaces a stored one already loaded; the
 * old one's space is free once the slot points at the new one, and a
 * reader in the middle of a test sees the slot's load number change.
 */
bool
IdemGenFilterLoad(int slot, int32 gen_id, const char *bits, Size len, int nhashes,
				  bool fine)
{
	IdemGenSlot *s;
	uint64		offset = 0;
	bool		placed = false;
	bool		loaded;

	if (len == 0 || len % IDEM_FILTER_BLOCK_BYTES != 0 ||
		(s = IdemGenSlotLock(slot, gen_id)) == NULL)
		return false;
	loaded = pg_atomic_read_u32(&s->ready) != 0;
	if (loaded && (!fine || s->fine))
	{
		LWLockRelease(idem_gen_shared->lock);
		return true;
	}
	placed = IdemGenArenaPlace(len, &offset);
	if (!placed && fine && loaded)
		s->fine_failed = true;	/* no room beside the stored one */
	if (placed)
	{
		uint32		n;

		memcpy(idem_gen_arena + offset, bits, len);
		/* readers of the old filter see 0 or another number after this */
		pg_atomic_write_u32(&s->ready, 0);
		pg_write_barrier();
		s->offset = offset;
		s->nblocks = (uint32) (len / IDEM_FILTER_BLOCK_BYTES);
		s->nhashes = nhashes;
		s->fine = fine;
		pg_write_barrier();
		n = ++idem_gen_shared->loads;
		if (n == 0)
			n = ++idem_gen_shared->loads;
		pg_atomic_write_u32(&s->ready, n);
	}
	LWLockRelease(idem_gen_shared->lock);
	return placed || loaded;
}

/*
 * Put generation gen_id's finer filter, of class ttl_class, into a stripe
 * lane (genstripe.c) in place of the filter its slot holds.  false if no
 * stripe can take it: the caller loads it as it is.
 */
bool
IdemGenFilterPlaceLane(int slot, int32 gen_id, int32 ttl_class, const IdemFilter *filter)
{
	IdemGenSlot *s;
	int			ref;

	if ((s = IdemGenSlotLock(slot, gen_id)) == NULL)
		return false;
	if (s->stripe_ref != IDEM_STRIPE_NO_LANE)
	{
		LWLockRelease(idem_gen_shared->lock);
		return true;
	}
	ref = IdemGenStripePlace(gen_id, ttl_class, filter);
	if (ref != IDEM_STRIPE_NO_LANE)
	{
		s->stripe_ref = ref;
		/* the stored filter's room goes back: tests read the lane */
		pg_atomic_write_u32(&s->ready, 0);
	}
	LWLockRelease(idem_gen_shared->lock);
	return ref != IDEM_STRIPE_NO_LANE;
}

/*
 * Does generation gen_id's slot hold a stored filter that a finer one could
 * replace (one that claimers use, and for which there was room so far)?
 */
bool
IdemGenFilterWantsFine(int slot, int32 gen_id)
{
	return IdemGenFilterReady(slot, gen_id) && !idem_gen_shared->slots[slot].fine &&
		!idem_gen_shared->slots[slot].fine_failed &&
		idem_gen_shared->slots[slot].stripe_ref == IDEM_STRIPE_NO_LANE;
}

/*
 * Does any slot of this database want a finer filter?  Read without the
 * lock, from shared memory alone, so that a purge round with nothing to
 * refine (the usual case) starts no transaction for it.
 */
bool
IdemGenAnyWantsFine(void)
{
	int			i;

	if (idem_gen_shared == NULL)
		return false;
	for (i = 0; i < IDEM_GEN_SLOTS; i++)
	{
		IdemGenSlot *s = &idem_gen_shared->slots[i];

		if ((pg_atomic_read_u64(&s->key) >> 32) == MyDatabaseId &&
			pg_atomic_read_u32(&s->ready) != 0 && !s->fine && !s->fine_failed &&
			s->stripe_ref == IDEM_STRIPE_NO_LANE)
			return true;
	}
	return false;
}

/*
 * Test hash against generation gen_id's filter: 0 if the generation
 * definitely holds no such claim, 1 if it may, -1 if the filter is not
 * loaded (or was freed or replaced meanwhile).
 */
int
IdemGenFilterTest(int slot, int32 gen_id, uint64 hash)
{
	IdemGenSlot *s;
	uint32		load;
	uint64		offset;
	uint32		nblocks;
	int			nhashes;
	bool		maybe;

	if (!IdemGenSlotIs(slot, gen_id))
		return -1;
	s = &idem_gen_shared->slots[slot];
	{
		int			ref = *(volatile int *) &s->stripe_ref;

		/*
		 * In a lane: a test that could not tell (the stripe changing under
		 * it) says "may hold", one probe, rather than "not loaded", which
		 * would load the stored filter again into the room the lane freed
		 */
		if (ref != IDEM_STRIPE_NO_LANE)
		{
			int			t = IdemGenStripeTest(ref, gen_id, hash);

			if (t >= 0)
				return t;
			if (IdemGenSlotIs(slot, gen_id) && s->stripe_ref == ref)
				return 1;
		}
	}
	load = pg_atomic_read_u32(&s->ready);
	if (load == 0)
		return -1;
	pg_read_barrier();
	/* a replacement under our feet may pair one filter's offset with another's size */
	offset = s->offset;
	nblocks = s->nblocks;
	nhashes = s->nhashes;
	if (nblocks == 0 || offset + (uint64) nblocks * IDEM_FILTER_BLOCK_BYTES > idem_gen_shared->arena_size)
		return -1;
	maybe = IdemFilterMayContain((const uint64 *) (idem_gen_arena + offset),
								 nblocks, nhashes, hash);
	pg_read_barrier();
	/* the same load of the same generation throughout */
	if (!IdemGenSlotIs(slot, gen_id) || pg_atomic_read_u32(&s->ready) != load)
		return -1;
	return maybe ? 1 : 0;
}

/* The backend exits: it no longer holds what it read of its entry */
static void
IdemGenDbDetach(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	IdemGenDb  *db = idem_gen_mine;

	if (db == NULL)
		return;
	idem_gen_mine = NULL;
	pg_atomic_write_u64(&db->left_at,
						pg_atomic_fetch_add_u64(&idem_gen_shared->db_clock, 1) + 1);
	pg_write_barrier();
	(void) pg_atomic_fetch_sub_u32(&db->attached, 1);
}

/*
 * This database's shared state, got once per backend, which stays attached
 * to it until it exits (see IdemGenDb); NULL without shared memory or
 * outside a database.  A database without an entry takes a free one, or
 * else the one detached longest ago among those no backend is attached
 * to, no switch is in flight in, and preferably no switch is wanted in
 * (the launcher would not run the round asked for: the next purge round
 * switches instead).  Made with its root bitmap full and its count of
 * opens at 0: nobody attached has read the old one.  There are more
 * entries than backends (IdemGenDbCount), so one can always be taken;
 * were none, the caller goes without, as without shared memory.
 */
static IdemGenDb *
IdemGenDbGet(void)
{
	static bool exit_hook = false;
	IdemGenDb  *found = NULL;
	IdemGenDb  *victim = NULL;
	int			victim_rank = 0;
	int			i;

	/* not again once exiting: IdemGenDbDetach may have run already */
	if (idem_gen_mine != NULL || idem_gen_shared == NULL || !OidIsValid(MyDatabaseId) ||
		proc_exit_inprogress)
		return idem_gen_mine;
	LWLockAcquire(idem_gen_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < idem_gen_shared->ndbs && found == NULL; i++)
	{
		IdemGenDb  *db = &idem_gen_shared->dbs[i];
		Oid			id = pg_atomic_read_u32(&db->dbid);
		int			rank;

		if (id == MyDatabaseId)
		{
			found = db;
			break;
		}
		/* 3: free; 2: idle; 1: idle but a switch wanted; 0: in use */
		if (id == InvalidOid)
			rank = 3;
		else if (pg_atomic_read_u32(&db->attached) != 0 ||
				 pg_atomic_read_u32(&db->switching) != 0)
			rank = 0;
		else
			rank = pg_atomic_read_u32(&db->switch_wanted) != 0 ? 1 : 2;
		if (rank > victim_rank ||
			(rank == victim_rank && rank > 0 && rank < 3 &&
			 pg_atomic_read_u64(&db->left_at) < pg_atomic_read_u64(&victim->left_at)))
		{
			victim = db;
			victim_rank = rank;
		}
	}
	if (found == NULL && victim != NULL)
	{
		int			w;

		if (victim_rank < 3)
			elog(DEBUG1, "database %u takes the shared generation state of database %u, idle",
				 MyDatabaseId, pg_atomic_read_u32(&victim->dbid));
		/* nobody is attached to it: only the launcher reads it, locked */
		pg_atomic_write_u32(&victim->dbid, InvalidOid);
		for (w = 0; w < IDEM_GEN_NS_WORDS; w++)
			pg_atomic_write_u64(&victim->rootbits[w], PG_UINT64_MAX);
		pg_atomic_write_u64(&victim->opens, 0);
		pg_atomic_write_u32(&victim->switching, 0);
		pg_atomic_write_u32(&victim->switch_wanted, 0);
		pg_atomic_write_u64(&victim->left_at, 0);
		pg_write_barrier();
		pg_atomic_write_u32(&victim->dbid, MyDatabaseId);
		found = victim;
	}
	if (found != NULL)
		(void) pg_atomic_fetch_add_u32(&found->attached, 1);
	LWLockRelease(idem_gen_shared->lock);
	if (found != NULL && !exit_hook)
	{
		/*
		 * on_shmem_exit, not before_shmem_exit: it runs after the abort of
		 * a transaction in flight (ShutdownPostgres), whose callbacks may
		 * still count claims here, and shared memory is still attached
		 */
		on_shmem_exit(IdemGenDbDetach, (Datum) 0);
		exit_hook = true;
	}
	return idem_gen_mine = found;
}

/*
 * How many generations this database has opened, or PG_UINT64_MAX if
 * unknown.  A switch counts before it commits; a claimer reads it before
 * reading its map and again after its insertion (a full barrier), and
 * reads the map again if it moved (claimstore.c).
 */
uint64
IdemGenOpensRead(void)
{
	IdemGenDb  *db = IdemGenDbGet();

	if (db == NULL)
		return PG_UINT64_MAX;
	pg_memory_barrier();
	return pg_atomic_read_u64(&db->opens);
}

/*
 * Count a generation about to be opened; before its transaction commits.
 * The transaction counts as switching (IdemGenSwitchInFlight) until it
 * ends, first, so that whoever reads the count of opens including this one
 * and then finds no switch in flight knows this one committed (or
 * aborted) before.
 */
void
IdemGenOpensBump(void)
{
	IdemGenDb  *db = IdemGenDbGet();

	if (db == NULL)
		return;
	if (idem_gen_switching_db == NULL)
	{
		(void) pg_atomic_fetch_add_u32(&db->switching, 1);
		idem_gen_switching_db = db;
	}
	(void) pg_atomic_fetch_add_u64(&db->opens, 1);
}

/*
 * Is a transaction that opened a generation in flight in this database?
 * Read after the count of opens: if not, every open counted there has
 * committed, and is seen by a snapshot taken next, or has aborted.
 */
bool
IdemGenSwitchInFlight(void)
{
	IdemGenDb  *db = IdemGenDbGet();

	if (db == NULL)
		return false;
	pg_memory_barrier();
	return pg_atomic_read_u32(&db->switching) > 0;
}

/*
 * The transaction ends (transaction callback): it no longer counts as
 * switching.  At commit this runs once the transaction is visible to new
 * snapshots.  A transaction that opened a generation cannot be prepared:
 * its generation would stay unseen while counted.
 */
void
IdemGenSwitchEnd(XactEvent event)
{
	if (idem_gen_switching_db == NULL)
		return;
	if (event == XACT_EVENT_PRE_PREPARE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that has opened a claim generation")));
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
	{
		(void) pg_atomic_fetch_sub_u32(&idem_gen_switching_db->switching, 1);
		idem_gen_switching_db = NULL;
	}
}

/*
 * The extension is being dropped in this database: forget its slots, and
 * fill its root bitmap, since a new extension starts its ids over
 */
void
IdemGenDbForget(void)
{
	IdemGenDb  *db = IdemGenDbGet();
	int			i;

	if (idem_gen_shared == NULL)
		return;
	LWLockAcquire(idem_gen_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < IDEM_GEN_SLOTS; i++)
	{
		uint64		k = pg_atomic_read_u64(&idem_gen_shared->slots[i].key);

		if (k != 0 && (Oid) (k >> 32) == MyDatabaseId)
			IdemGenSlotFreeAt(i);
	}
	LWLockRelease(idem_gen_shared->lock);
	if (db != NULL)
	{
		IdemGenRootAnnounceAll();
		(void) pg_atomic_fetch_add_u64(&db->opens, 1);
	}
}

/*
 * Add this backend's pending count to its generation's (before a
 * maintenance pass reads it, at transaction end, and every batch), and ask
 * for a switch if that made it reach the limit: only the backend whose
 * addition crosses it asks, once per generation.  Nothing is pending
 * without shared memory.
 */
void
IdemGenCountFlushPending(void)
{
	uint64		before;

	if (idem_count_pending == 0)
		return;
	if (IdemGenSlotIs(idem_count_slot, idem_count_gen))
	{
		before = pg_atomic_fetch_add_u64(&idem_gen_shared->slots[idem_count_slot].claims,
										 idem_count_pending);
		if (idem_count_limit > 0 && before < idem_count_limit &&
			before + idem_count_pending >= idem_count_limit)
			IdemGenWantSwitch();
	}
	idem_count_pending = 0;
}

/*
 * Count a claim this backend inserted into open generation gen_id, whose
 * class switches at limit claims (0: no bound).  Counted in batches, so a
 * generation may take a batch per backend more than its bound before the
 * switch is asked for, and then whatever arrives until the switch.
 */
void
IdemGenCountClaim(int slot, int32 gen_id, uint64 limit)
{
	if (idem_gen_shared == NULL || slot < 0)
		return;
	if (gen_id != idem_count_gen || slot != idem_count_slot)
	{
		IdemGenCountFlushPending();
		idem_count_gen = gen_id;
		idem_count_slot = slot;
	}
	idem_count_limit = limit;
	if (++idem_count_pending >= IDEM_GEN_COUNT_BATCH)
		IdemGenCountFlushPending();
}

/*
 * The claims counted in open generation gen_id since its slot was made:
 * since it was opened, or since the server started.  0 when unknown.
 */
uint64
IdemGenSlotClaims(int slot, int32 gen_id)
{
	uint64		n;

	if (idem_gen_shared == NULL || slot < 0)
		return 0;
	n = pg_atomic_read_u64(&idem_gen_shared->slots[slot].claims);
	pg_read_barrier();
	return IdemGenSlotIs(slot, gen_id) ? n : 0;
}

/*
 * An open generation of this database reached its size bound: flag the
 * database and wake the launcher, which runs a generations-only round here
 * without waiting for the next purge interval.
 */
void
IdemGenWantSwitch(void)
{
	IdemGenDb  *db = IdemGenDbGet();

	if (db == NULL)
		return;
	pg_atomic_write_u32(&db->switch_wanted, 1);
	pg_memory_barrier();
	if (idem_gen_wake_launcher)
		idem_gen_wake_launcher();
}

/*
 * For the launcher: a database that asked for a switch since the last
 * call, its flag cleared; InvalidOid when none.  *cursor starts at 0.
 */
Oid
IdemGenNextSwitchWanted(int *cursor)
{
	Oid			wanted = InvalidOid;

	if (idem_gen_shared == NULL)
		return InvalidOid;
	/* an entry is given to another database under the lock only */
	LWLockAcquire(idem_gen_shared->lock, LW_SHARED);
	for (; *cursor < idem_gen_shared->ndbs && wanted == InvalidOid; (*cursor)++)
	{
		IdemGenDb  *db = &idem_gen_shared->dbs[*cursor];
		Oid			dbid = pg_atomic_read_u32(&db->dbid);

		if (dbid != InvalidOid && pg_atomic_read_u32(&db->switch_wanted) != 0 &&
			pg_atomic_exchange_u32(&db->switch_wanted, 0) != 0)
			wanted = dbid;
	}
	LWLockRelease(idem_gen_shared->lock);
	return wanted;
}

/* Announce a claim of nsid about to be inserted into idempotency.claims */
void
IdemGenRootAnnounce(int32 nsid)
{
	IdemGenDb  *db = IdemGenDbGet();

	if (db != NULL)
		IdemBitmapAnnounce(db->rootbits, nsid);
}

/* Something writes idempotency.claims by hand: any namespace may follow */
void
IdemGenRootAnnounceAll(void)
{
	IdemGenDb  *db = IdemGenDbGet();
	int			w;

	if (db == NULL)
		return;
	for (w = 0; w < IDEM_GEN_NS_WORDS; w++)
		if (pg_atomic_read_u64(&db->rootbits[w]) != PG_UINT64_MAX)
			(void) pg_atomic_fetch_or_u64(&db->rootbits[w], PG_UINT64_MAX);
	pg_memory_barrier();
}

/* Might idempotency.claims hold claims of nsid?  true when unsure */
bool
IdemGenRootMayHold(int32 nsid)
{
	IdemGenDb  *db = IdemGenDbGet();

	return db == NULL || IdemBitmapHas(db->rootbits, nsid);
}

/*
 * idempotency.claims holds no entry and nobody can be writing it (the
 * caller holds a SHARE lock on it): forget every announcement
 */
void
IdemGenRootClear(void)
{
	IdemGenDb  *db = IdemGenDbGet();
	int			w;

	if (db == NULL)
		return;
	for (w = 0; w < IDEM_GEN_NS_WORDS; w++)
		pg_atomic_write_u64(&db->rootbits[w], 0);
	pg_memory_barrier();
}

/*
 * Start loading the filter block of hash in generation gen_id's filter, so
 * that the tests of several generations' filters overlap their cache misses
 */
void
IdemGenFilterPrefetch(int slot, int32 gen_id, uint64 hash)
{
#ifdef __GNUC__
	IdemGenSlot *s;

	if (!IdemGenFilterReady(slot, gen_id))
		return;
	s = &idem_gen_shared->slots[slot];
	__builtin_prefetch(idem_gen_arena + s->offset +
					   (Size) IdemFilterBlock(hash, s->nblocks) * IDEM_FILTER_BLOCK_BYTES);
#endif
}

/*
 * idem_generation_filter(generation integer) returns text
 *
 * What shared memory holds of a sealed generation's filter, as the view
 * idem_generations shows it: 'stripe of N lanes' (a lane of a stripe of
 * its class, genstripe.c), 'fine' (its finer filter), 'stored' (the one
 * stored with it), or NULL (none loaded yet, or no shared memory).
 */
Datum
idem_generation_filter(PG_FUNCTION_ARGS)
{
	int32		gen_id = PG_GETARG_INT32(0);
	int			slot = IdemGenSlotFind(gen_id, false, false);
	int			width;
	IdemGenSlot *s;
	bool		fine;

	if (slot < 0)
		PG_RETURN_NULL();
	s = &idem_gen_shared->slots[slot];
	width = IdemGenStripeWidth(IdemGenSlotStripeRef(slot, gen_id), gen_id);
	if (width > 0)
		PG_RETURN_TEXT_P(cstring_to_text(psprintf("stripe of %d lanes", width)));
	if (!IdemGenFilterReady(slot, gen_id))
		PG_RETURN_NULL();
	fine = s->fine;
	PG_RETURN_TEXT_P(cstring_to_text(fine ? "fine" : "stored"));
}
