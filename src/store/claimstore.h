/*
 * claimstore.h
 *	  Reading and writing claims directly in the heap and its unique index.
 */
#ifndef IDEM_CLAIMSTORE_H
#define IDEM_CLAIMSTORE_H

#include "postgres.h"

#include "access/heapam.h"
#include "nodes/execnodes.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"

#include "base/base.h"
#include "claimrel.h"
#include "catalog/idem_catalog.h"

/* Indexes an IdemStore holds without allocating */
#define IDEM_STORE_INLINE_INDEXES	4

/*
 * Generations a store keeps room for in itself, and store relations it
 * makes there: a claim in a store of a few generations pallocs nothing
 */
#define IDEM_STORE_INLINE_GENS		8
#define IDEM_STORE_INLINE_RELS		2

/* What IdemStoreClaim decided */
typedef enum IdemClaimOutcome
{
	IDEM_CLAIM_NEW,				/* this transaction now holds the claim */
	IDEM_CLAIM_DUPLICATE,		/* a live claim exists, committed or ours */
	IDEM_CLAIM_BUSY				/* nowait, and another in-flight transaction
								 * holds the claim */
} IdemClaimOutcome;

/* What a new claim stores besides its key and namespace */
typedef struct IdemClaimRow
{
	TimestampTz claimed_at;
	bool		has_fp;
	int64		fp;				/* the fingerprint's hash */
} IdemClaimRow;

/*
 * One relation claims live in, open for one operation: idempotency.claims
 * itself, or a generation (generation.c)
 */
typedef struct IdemStoreRel
{
	struct IdemGeneration *gen; /* NULL for idempotency.claims */
	int32		gen_id;			/* 0 for idempotency.claims */
	bool		in_map;			/* a generation of the store's map, not one
								 * it caught up with */
	bool		opened;			/* tried to open it */
	bool		gone;			/* dropped since the map was read */
	LOCKMODE	locked;			/* the lock we took on it */
	Relation	heap;
	IdemClaimRel *layout;		/* what the direct path knows of it */
	Relation   *indexes;		/* its indexes, in layout order, each NULL
								 * until first needed */
	Relation	inline_indexes[IDEM_STORE_INLINE_INDEXES];	/* room for the
															 * usual few, to
															 * spare a palloc */
	bool		all_indexes;	/* all of them are open */
} IdemStoreRel;

/* The claims relations, open for one operation */
typedef struct IdemStore
{
	IdemCatalog catalog;		/* OIDs of the internal relations */
	IdemClaimOp op;
	Relation	heap;			/* idempotency.claims */
	IdemClaimRel *layout;		/* what the direct path knows of it */
	IdemStoreRel root;			/* idempotency.claims, as a store relation */
	struct IdemGenMap *map;		/* the generations, or NULL (the purge) */
	int			nrels;			/* generations: parallel to map->gens, */
	IdemStoreRel **rels;		/* each made on first use (IdemStoreGenRel) */
	int		   *made;			/* which, in the order they were made */
	int			nmade;
	int		   *sel;			/* the generations a look goes through */
	int			nsel;
	/* room for the arrays above, for a map of few generations */
	IdemStoreRel *inline_gens[IDEM_STORE_INLINE_GENS];
	int			inline_made[IDEM_STORE_INLINE_GENS];
	int			inline_sel[IDEM_STORE_INLINE_GENS];
	/* room for the first relations made */
	IdemStoreRel inline_rels[IDEM_STORE_INLINE_RELS];
	int			ninline_rels;
	uint64		opens;			/* generations opened, as of the map */
	int			nextra;			/* generations opened since map was read */
	int			maxextra;
	IdemStoreRel *extra;
	LOCKMODE	lockmode;
	BulkInsertState bistate;	/* for batches, else NULL */
	Oid			bistate_relid;	/* the relation bistate serves */
	TimestampTz now;			/* the transaction's now() */
} IdemStore;

/*
 * The check a claim makes of a Citus cluster before it writes (citus/, a
 * higher folder): registered at init.
 */
extern void IdemStoreSetClaimCheck(void (*check) (void));

extern void IdemStoreOpen(IdemStore *store, IdemClaimOp op, bool bulk);
extern void IdemStoreClose(IdemStore *store);
extern IdemClaimOutcome IdemStoreClaim(IdemStore *store, IdemNamespace *ns,
									   const bytea *key,
									   const text *fingerprint, bool nowait);
extern IdemClaimOutcome IdemStoreImport(IdemStore *store, IdemNamespace *ns,
										const bytea *key, const IdemClaimRow *row);
extern bool IdemStoreIsClaimed(IdemStore *store, IdemNamespace *ns,
							   const bytea *key);
extern bool IdemStoreRelease(IdemStore *store, IdemNamespace *ns,
							 const bytea *key);
/*
 * Pages one purge batch reads at most (8 MB), so that a batch over a store
 * of mostly live rows ends in milliseconds and the purge moves on through
 * a table of any size, batch by batch and round by round.
 */
#define IDEM_PURGE_WINDOW_BLOCKS	1024

/* The last TID of the window of a batch starting after start */
static inline void
IdemPurgeWindowEnd(ItemPointer start, ItemPointer end)
{
	ItemPointerSet(end,
				   Min((uint64) ItemPointerGetBlockNumberNoCheck(start) + IDEM_PURGE_WINDOW_BLOCKS - 1,
					   (uint64) MaxBlockNumber),
				   PG_UINT16_MAX);
}

/*
 * A batch read its whole window, ending at end: the cursor goes past it;
 * returns whether the table goes on after it
 */
static inline bool
IdemPurgeWindowFinish(ItemPointer cursor, ItemPointer end, BlockNumber nblocks)
{
	*cursor = *end;
	return ItemPointerGetBlockNumberNoCheck(end) + 1 < nblocks;
}

#ifdef IDEM_HAVE_TID_RANGE_SCAN
extern int64 IdemStorePurgeBatch(IdemStore *store, const IdemNamespace *nss,
								 int nns, int64 *counts, int batch,
								 ItemPointer cursor, bool *more);
#endif

#endif							/* IDEM_CLAIMSTORE_H */
