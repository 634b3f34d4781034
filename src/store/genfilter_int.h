/*
 * genfilter_int.h
 *	  The shared state of genfilter.c and gendb.c: the slots of the
 *	  generations, the entries of the databases, the arena of the filters.
 *	  Internal to store/.
 */
#ifndef IDEM_GENFILTER_INT_H
#define IDEM_GENFILTER_INT_H

#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/lwlock.h"

#include "genfilter.h"

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

extern IdemGenShared *idem_gen_shared;
extern char *idem_gen_arena;

extern void IdemGenSlotFreeAt(int i);

/* The slot key of generation gen_id of this database */
static inline uint64
IdemGenSlotKey(int32 gen_id)
{
	return ((uint64) MyDatabaseId << 32) | (uint32) gen_id;
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

#endif							/* IDEM_GENFILTER_INT_H */
