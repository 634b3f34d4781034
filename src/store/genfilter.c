/*
 * genfilter.c
 *	  Shared state of the claim generations: the "definitely absent" filters
 *	  of sealed generations and the namespaces announced in open ones.
 *	  This file holds the shared slots and the arena that the filters are
 *	  placed in (a first-fit allocator); the Bloom filters' mathematics is
 *	  bloom.c's, the per-database entries gendb.c's.
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
 * and a COPY hook, generation.c's parts of init.c's), and the maintenance pass empties it
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
#include "genfilter_int.h"
#include "genstripe.h"

int			idem_filter_memory_kb = 262144;
int			idem_filter_bits_per_claim = 12;
int			idem_filter_memory_bits_per_claim = 28;
bool		idem_debug_legacy_filters = false;

PG_FUNCTION_INFO_V1(idem_generation_filter);

IdemGenShared *idem_gen_shared = NULL;
static int	idem_gen_ndbs = 0;		/* of the shared state, once sized */
char	   *idem_gen_arena = NULL;

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

/* Is there shared memory for filters (shared_preload_libraries)? */
bool
IdemGenFiltersShared(void)
{
	return idem_gen_shared != NULL && idem_gen_shared->arena_size > 0;
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
void
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
