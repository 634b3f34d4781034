/*
 * claimstore.c
 *	  Reading and writing claims directly in the heap and its unique index.
 *
 * A claim is a row of idempotency.claims, unique on (key, ns) through the
 * index claims_pkey.  The functions here talk to heapam and the index AM
 * directly, with no SPI or executor start-up, and follow the protocol of
 * INSERT ... ON CONFLICT DO NOTHING (see nodeModifyTable.c and
 * execIndexing.c):
 *
 *	1. Probe the unique index with a dirty snapshot.  A committed live claim
 *	   means a duplicate; one whose inserting or deleting transaction is
 *	   still running means waiting for that transaction, then probing again.
 *	   Our own transaction's claim is a duplicate too.
 *	2. Otherwise insert the heap tuple speculatively, under a speculative
 *	   insertion lock, and insert the index entry with UNIQUE_CHECK_PARTIAL.
 *	3. If the index reports a possible conflict (someone inserted the same
 *	   key between 1 and 2), "super-delete" our tuple and start again at 1;
 *	   otherwise confirm the tuple.
 *
 * Waiting goes through the lock manager, so it honours lock_timeout,
 * statement_timeout and deadlock detection, exactly as a unique index does.
 *
 * Two shortcuts keep the common cases to one btree descent or none:
 *
 *	 - Duplicates: claimcache.c remembers the heap TID of recent claims.  A
 *	   hit is checked against the heap tuple with the same dirty snapshot
 *	   and exact key comparison as step 1, so a duplicate found there needs
 *	   no index descent at all.
 *	 - New ids: on a cache miss, steps 2 and 3 can run first, since the
 *	   unique check inside the index insertion finds any conflict anyway;
 *	   only on a conflict do we super-delete and run step 1.  This saves the
 *	   probe's descent for new ids but wastes an insertion on an uncached
 *	   duplicate, so each backend tracks, per namespace, how often a cache
 *	   miss turns out to be a duplicate, and probes first when that exceeds
 *	   a quarter.  Either order gives the same answers.
 *
 * Expiry: a claim lives until claimed_at + its namespace's TTL.  An expired
 * claim counts as absent: a new claim deletes it and inserts its own row in
 * the same transaction, so a rollback restores the old (still expired) row.
 *
 * Time is the transaction's now(), both for claimed_at and for expiry, so
 * one transaction sees a consistent picture.
 *
 * Generations (generation.c): claims of long TTLs live in tables that
 * inherit from idempotency.claims, one open generation per TTL class.  A
 * claim goes to the open generation of its namespace's class (or to
 * idempotency.claims if the class has none), where the protocol above runs
 * unchanged; uniqueness across the other relations is kept as an
 * exclusion constraint keeps it across rows no unique index covers
 * (IdemCheckElsewhere): with our tuple still speculative, every other
 * relation that might hold the key is probed under the dirty snapshot,
 * and of two speculative inserters that see each other the older xid
 * waits while the younger withdraws.  With our token held, nothing there
 * waits for a lock or a transaction, since the deadlock detector cannot
 * see a wait for our token (spectoken.c): a relation whose lock is not
 * free at once, or a claimer that is not an insertion younger than ours,
 * makes us withdraw, release the token, wait, and start over.  "Might hold" is answered without a
 * probe for most relations: a sealed generation by its namespaces, their
 * expiry and its filter (the generations to ask at all are the scope's,
 * genscope.c, narrowed by the class's stripes); an open one, and
 * idempotency.claims itself, by the namespaces announced in them
 * (genfilter.c).  A sealed generation's index is read through its fences
 * (btprobe.c).  A claimer whose map missed a switch catches up
 * (IdemStoreCatchUp).  The claim cache tags each TID with the low bits of
 * its generation's id.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/nbtree.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/visibilitymap.h"
#include "access/xact.h"
#include "catalog/pg_am_d.h"
#include "catalog/index.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "btprobe.h"
#include "base/base.h"
#include "claimcache.h"
#include "claimkey.h"
#include "claimstore.h"
#include "generation.h"
#include "filter.h"
#include "genfilter.h"
#include "catalog/idem_catalog.h"

/* What a look at the relations other than a claim's target found */
typedef enum IdemElsewhere
{
	IDEM_ELSEWHERE_NONE,		/* no live claim of the key anywhere else */
	IDEM_ELSEWHERE_DUP,			/* a live claim, committed or ours */
	IDEM_ELSEWHERE_RETRY,		/* waited for (or must wait for) a claimer */
	IDEM_ELSEWHERE_UNSEEN,		/* committed after our transaction snapshot */
	IDEM_ELSEWHERE_AGAIN		/* withdrew to wait for a lock: start over */
} IdemElsewhere;

/*
 * One claim operation's probe of the claims: the seek loop it runs on one
 * relation, and what the last probe found for its key.
 */
typedef struct IdemProbe
{
	IdemRowSeek seek;			/* first: the callbacks cast it back */
	IdemStore  *store;
	IdemStoreRel *rel;			/* where the seek looks (a claim's target) */
	IdemNamespace *ns;
	const bytea *key;
	IdemClaimRow row;			/* what a new claim stores */
	uint64		hash;			/* the key's claim cache hash */
	uint64		fhash;			/* the key's generation filter hash */
	SnapshotData dirty;
	bool		cached;			/* the claim cache answered the next probe */
	ItemPointerData inserted;	/* TID of the claim this operation made */
	IdemStoreRel *inserted_in;
	IdemElsewhere elsewhere;	/* why absent settled without inserting */
	IdemStoreRel *found_in;		/* where a duplicate elsewhere was found */
	bool		want_fp;		/* a duplicate's stored fingerprint is needed */
	/* a claimer in another relation to wait for once ours is withdrawn */
	TransactionId wait_xid;
	uint32		wait_token;
	IdemStoreRel *wait_rel;
	ItemPointerData wait_tid;
	/* a relation to lock once ours is withdrawn (its lock was not free) */
	IdemStoreRel *wait_lock;
	/* what the probe found */
	bool		found;
	TimestampTz claimed_at;
	bool		has_fp;
	int64		fp;
} IdemProbe;

/* citus/'s check before a claim is written, registered at init */
static void (*idem_store_claim_check) (void);

/* Register the check a claim makes before it writes; from _PG_init */
void
IdemStoreSetClaimCheck(void (*check) (void))
{
	idem_store_claim_check = check;
}

/* Set up the indexes of a store relation whose layout is known */
static void
IdemStoreRelIndexesInit(IdemStoreRel *r)
{
	if (r->layout->nindexes <= IDEM_STORE_INLINE_INDEXES)
	{
		memset(r->inline_indexes, 0, sizeof(r->inline_indexes));
		r->indexes = r->inline_indexes;
	}
	else
		r->indexes = palloc0(sizeof(Relation) * r->layout->nindexes);
	r->all_indexes = false;
}

/* Close what a store relation opened; locks are kept to transaction end */
static void
IdemStoreRelClose(IdemStoreRel *r)
{
	int			i;

	if (r->heap == NULL)
		return;
	for (i = 0; i < r->layout->nindexes; i++)
		if (r->indexes[i] != NULL)
			index_close(r->indexes[i], NoLock);
	if (r->indexes != r->inline_indexes)
		pfree(r->indexes);
	table_close(r->heap, NoLock);
	r->heap = NULL;
}

/* Close the store's generations, and forget them */
static void
IdemStoreCloseGenerations(IdemStore *store)
{
	int			i;

	for (i = 0; i < store->nmade; i++)
	{
		IdemStoreRel *r = store->rels[store->made[i]];

		IdemStoreRelClose(r);
		if (r < store->inline_rels || r >= store->inline_rels + IDEM_STORE_INLINE_RELS)
			pfree(r);
	}
	if (store->rels != NULL && store->rels != store->inline_gens)
	{
		pfree(store->rels);
		pfree(store->made);
		pfree(store->sel);
	}
	store->rels = NULL;
	store->made = NULL;
	store->nmade = 0;
	store->ninline_rels = 0;
	store->sel = NULL;
	store->nsel = 0;
	store->nrels = 0;
	for (i = 0; i < store->nextra; i++)
		IdemStoreRelClose(&store->extra[i]);
	store->nextra = 0;
}

/* Point the store at the generations as last committed */
static void
IdemStoreLoadMap(IdemStore *store)
{
	IdemStoreCloseGenerations(store);
	store->map = IdemGenMapGet();
	store->opens = store->map->opens;
	store->nrels = store->map->ngens;
	if (store->nrels <= IDEM_STORE_INLINE_GENS)
	{
		store->rels = store->inline_gens;
		memset(store->rels, 0, sizeof(store->inline_gens));
		store->made = store->inline_made;
		store->sel = store->inline_sel;
	}
	else
	{
		store->rels = palloc0(sizeof(IdemStoreRel *) * store->nrels);
		store->made = palloc(sizeof(int) * store->nrels);
		store->sel = palloc(sizeof(int) * store->nrels);
	}
	store->nmade = 0;
	store->nsel = 0;
}

/* The store relation of generation j of the map, made on first use */
static IdemStoreRel *
IdemStoreGenRel(IdemStore *store, int j)
{
	IdemStoreRel *r = store->rels[j];

	if (r == NULL)
	{
		if (store->ninline_rels < IDEM_STORE_INLINE_RELS)
		{
			r = &store->inline_rels[store->ninline_rels++];
			memset(r, 0, sizeof(IdemStoreRel));
		}
		else
			r = palloc0(sizeof(IdemStoreRel));
		r->gen = &store->map->gens[j];
		r->gen_id = r->gen->id;
		r->in_map = true;
		store->rels[j] = r;
		store->made[store->nmade++] = j;
	}
	return r;
}

/*
 * Open the claims table for one operation, and check that the direct path
 * may do op on it.  Generations and indexes are opened on first use, since
 * a duplicate found through the claim cache needs only one of each.
 */
void
IdemStoreOpen(IdemStore *store, IdemClaimOp op, bool bulk)
{
	store->catalog = IdemGetCatalog();
	store->op = op;
	store->lockmode = op == IDEM_OP_CHECK ? AccessShareLock : RowExclusiveLock;

	/*
	 * A claim writes idempotency.claims only if its namespace's class has no
	 * generation: it locks the table for reading until it knows
	 * (IdemStoreTarget), so that the maintenance pass can take a SHARE lock
	 * on it beside claims that go to generations.
	 */
	store->heap = table_open(store->catalog.claims,
							 op == IDEM_OP_CLAIM ? AccessShareLock : store->lockmode);
	store->layout = IdemClaimRelGet(store->heap, op);
	if (op == IDEM_OP_RELEASE || op == IDEM_OP_PURGE)
		CheckCmdReplicaIdentity(store->heap, CMD_DELETE);
	if (op == IDEM_OP_CLAIM)
		idem_store_claim_check();	/* not beside distributed writes on a coordinator */

	memset(&store->root, 0, sizeof(store->root));
	store->root.opened = true;
	store->root.locked = op == IDEM_OP_CLAIM ? AccessShareLock : store->lockmode;
	store->root.heap = store->heap;
	store->root.layout = store->layout;
	IdemStoreRelIndexesInit(&store->root);
	store->map = NULL;
	store->nrels = 0;
	store->rels = NULL;
	store->made = NULL;
	store->nmade = 0;
	store->ninline_rels = 0;
	store->sel = NULL;
	store->nsel = 0;
	store->nextra = 0;
	store->maxextra = 0;
	store->extra = NULL;
	if (op != IDEM_OP_PURGE)
		IdemStoreLoadMap(store);
	store->bistate = bulk ? GetBulkInsertState() : NULL;
	store->bistate_relid = store->catalog.claims;
	store->now = GetCurrentTransactionStartTimestamp();
}

/*
 * Lock an open relation of the store more strongly, for writing: an index
 * may have been added under the weaker lock, so the layout is read again
 * (the lock's invalidations have retired a stale one)
 */
static void
IdemStoreRelRelock(IdemStore *store, IdemStoreRel *r, LOCKMODE mode)
{
	int			i;

	LockRelationOid(RelationGetRelid(r->heap), mode);
	r->locked = mode;
	for (i = 0; i < r->layout->nindexes; i++)
		if (r->indexes[i] != NULL)
			index_close(r->indexes[i], NoLock);
	if (r->indexes != r->inline_indexes)
		pfree(r->indexes);
	r->layout = IdemClaimRelGet(r->heap, store->op);
	IdemStoreRelIndexesInit(r);
	if (r->gen == NULL)
		store->layout = r->layout;
}

/* What opening a store relation without waiting found */
typedef enum IdemOpen
{
	IDEM_OPEN_OK,				/* open, its probe index too */
	IDEM_OPEN_GONE,				/* its table was dropped */
	IDEM_OPEN_BUSY				/* a lock it needs is not free */
} IdemOpen;

/*
 * Open a generation of the store with at least mode: IDEM_OPEN_GONE if its
 * table was dropped since the map was read (only an expired generation is,
 * but for a DROP TABLE by hand).  With nowait (mode AccessShareLock, for a
 * look at the other relations while our speculative token is held: see
 * IdemCheckElsewhere), its probe index is opened too, and a lock that is
 * not free at once gives IDEM_OPEN_BUSY, the relation left unopened.
 */
static IdemOpen
IdemStoreRelOpenExt(IdemStore *store, IdemStoreRel *r, LOCKMODE mode, bool nowait)
{
	Oid			relid;
	LOCKTAG		tag;

	Assert(!nowait || mode == AccessShareLock);
	if (r->opened)
	{
		if (r->gone)
			return IDEM_OPEN_GONE;
		if (mode > r->locked)
			IdemStoreRelRelock(store, r, mode);
	}
	else
	{
		relid = r->gen->relid;
		if (!OidIsValid(relid))
		{
			r->opened = true;
			r->gone = true;
			return IDEM_OPEN_GONE;
		}
		SET_LOCKTAG_RELATION(tag, MyDatabaseId, relid);
		if (!IdemLockHeldByMe(&tag, mode))
		{
			/* not locked yet in this transaction: it may have been dropped */
			if (!nowait)
				LockRelationOid(relid, mode);
			else if (!ConditionalLockRelationOid(relid, mode))
				return IDEM_OPEN_BUSY;
			if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
			{
				UnlockRelationOid(relid, mode);
				r->opened = true;
				r->gone = true;
				return IDEM_OPEN_GONE;
			}
		}
		r->opened = true;
		r->locked = mode;
		r->heap = relation_open(relid, NoLock);
		r->layout = IdemClaimRelGet(r->heap, store->op);
		IdemStoreRelIndexesInit(r);
	}
	if (nowait && r->indexes[r->layout->probe] == NULL)
	{
		/* REINDEX INDEX, say, holds the index alone */
		Oid			indexid = r->layout->index_oids[r->layout->probe];

		if (!ConditionalLockRelationOid(indexid, r->locked))
			return IDEM_OPEN_BUSY;
		r->indexes[r->layout->probe] = index_open(indexid, NoLock);
	}
	return IDEM_OPEN_OK;
}

/* Open a generation of the store, waiting as needed: see IdemStoreRelOpenExt */
static bool
IdemStoreRelOpen(IdemStore *store, IdemStoreRel *r, LOCKMODE mode)
{
	return IdemStoreRelOpenExt(store, r, mode, false) == IDEM_OPEN_OK;
}

/* Index i of a relation's layout, opened on first use */
static inline Relation
IdemStoreIndexAt(IdemStoreRel *r, int i)
{
	if (r->indexes[i] == NULL)
		r->indexes[i] = index_open(r->layout->index_oids[i], r->locked);
	return r->indexes[i];
}

/* The unique index that probes of a relation read */
static inline Relation
IdemStoreIndex(IdemStoreRel *r)
{
	return IdemStoreIndexAt(r, r->layout->probe);
}

/* Open every index, for an insertion that must maintain them all */
static void
IdemStoreOpenIndexes(IdemStoreRel *r)
{
	int			i;

	if (r->all_indexes)
		return;
	for (i = 0; i < r->layout->nindexes; i++)
		(void) IdemStoreIndexAt(r, i);
	r->all_indexes = true;
}

/* Close what IdemStoreOpen opened; locks are kept until transaction end */
void
IdemStoreClose(IdemStore *store)
{
	if (store->bistate != NULL)
		FreeBulkInsertState(store->bistate);
	IdemStoreCloseGenerations(store);
	if (store->extra != NULL)
		pfree(store->extra);
	IdemStoreRelClose(&store->root);
}

/*
 * Catch up with switches that committed after the store's map was read,
 * whose invalidations this backend may not have processed yet (it holds
 * every lock it needs already, say, in a batch): if the count of opens
 * moved, read the generations afresh and add the new ones to those the
 * operation looks at.  A switch counts before it commits, and a claimer
 * reads the count after its insertion, so of a claimer in the old open
 * generation and one in the new, one sees the other (see genfilter.c).
 * Without that count, the invalidations of the map stand for it
 * (IdemGenOpensSeen).
 */
static void
IdemStoreCatchUp(IdemStore *store)
{
	uint64		opens = IdemGenOpensSeen();
	IdemGenMap *fresh;
	int			i;
	int			j;

	if (store->map == NULL ||
		(opens != PG_UINT64_MAX && opens == store->opens))
		return;
	fresh = IdemGenMapFresh();
	store->opens = fresh->opens;
	for (i = 0; i < fresh->ngens; i++)
	{
		IdemGeneration *g = &fresh->gens[i];
		bool		known = false;

		for (j = 0; j < store->nrels && !known; j++)
			known = (store->map->gens[j].id == g->id);
		for (j = 0; j < store->nextra && !known; j++)
			known = (store->extra[j].gen_id == g->id);
		if (known)
			continue;
		if (store->nextra == store->maxextra)
		{
			store->maxextra = Max(4, store->maxextra * 2);
			store->extra = store->extra == NULL ?
				palloc(sizeof(IdemStoreRel) * store->maxextra) :
				repalloc(store->extra, sizeof(IdemStoreRel) * store->maxextra);
		}
		memset(&store->extra[store->nextra], 0, sizeof(IdemStoreRel));
		store->extra[store->nextra].gen = g;
		store->extra[store->nextra].gen_id = g->id;
		store->nextra++;
	}
}

/*
 * Start a look for a claim of ns whose filter hash is fhash through the
 * relations that may hold it: returns how many IdemStoreScanAt serves.
 * Catches up with switches first.
 */
static int
IdemStoreScan(IdemStore *store, IdemNamespace *ns, uint64 fhash)
{
	IdemStoreCatchUp(store);
	store->nsel = store->map == NULL ? 0 :
		IdemFilterSelect(store->map, ns, fhash, store->sel);
	return store->nsel + 1 + store->nextra;
}

/*
 * The i-th relation of a look: the generations that may hold the claim
 * (filter.c), then the claims table, then the generations opened since
 * the store's map was read
 */
static inline IdemStoreRel *
IdemStoreScanAt(IdemStore *store, int i)
{
	if (i < store->nsel)
		return IdemStoreGenRel(store, store->sel[i]);
	if (i == store->nsel)
		return &store->root;
	return &store->extra[i - store->nsel - 1];
}

/* The cache tag of a generation id: its low bits */
static inline uint8
IdemStoreTagOf(int32 gen_id)
{
	return (uint8) (gen_id & IDEM_CACHE_GEN_MASK);
}

/* The cache tag of a relation */
static inline uint8
IdemStoreRelTag(const IdemStoreRel *r)
{
	return IdemStoreTagOf(r->gen_id);
}

/*
 * Record in probe what a visible tuple says: who to wait for, whose it is,
 * when it was claimed.  The caller holds a lock on buffer.
 */
static void
IdemProbeFill(IdemStoreRel *r, HeapTuple tuple, Buffer buffer,
			  Snapshot snapshot, IdemProbe *probe)
{
	TupleDesc	desc = RelationGetDescr(r->heap);
	IdemClaimRel *cr = r->layout;
	bool		isnull;
	Datum		d;

	probe->found = true;
	if (snapshot->snapshot_type == SNAPSHOT_DIRTY)
		IdemRowSeekNoteDirty(&probe->seek, snapshot, tuple, buffer);
	else
		probe->seek.tid = tuple->t_self;

	d = heap_getattr(tuple, cr->att_claimed_at, desc, &isnull);
	probe->claimed_at = DatumGetTimestampTz(d);
	d = heap_getattr(tuple, cr->att_fingerprint, desc, &isnull);
	probe->has_fp = !isnull;
	probe->fp = isnull ? 0 : DatumGetInt64(d);
}

/* Begin a scan of relation r's probe index for exactly (nsid, key) */
static IndexScanDesc
IdemProbeBeginScan(IdemStoreRel *r, int32 nsid, const bytea *key, Snapshot snapshot)
{
	ScanKeyData skeys[2];
	IndexScanDesc scan;
	AttrNumber	keycol = r->layout->probe_key_col;

	ScanKeyInit(&skeys[keycol - 1], keycol, BTEqualStrategyNumber, F_BYTEAEQ,
				PointerGetDatum(key));
	ScanKeyInit(&skeys[2 - keycol], 3 - keycol, BTEqualStrategyNumber, F_INT4EQ,
				Int32GetDatum(nsid));
	scan = IdemIndexBeginScan(r->heap, IdemStoreIndex(r), snapshot, 2, 0);
	index_rescan(scan, skeys, 2, NULL, 0);
	return scan;
}

/*
 * Probe relation r's unique index for (ns, key) under snapshot, which is
 * either a dirty snapshot (to see in-flight claims, as unique checks do) or
 * an MVCC one (for read-only checks).  Fills probe with the first visible
 * tuple.
 */
static void
IdemProbeKey(IdemStoreRel *r, int32 nsid, const bytea *key,
			 Snapshot snapshot, IdemProbe *probe)
{
	IndexScanDesc scan = IdemProbeBeginScan(r, nsid, key, snapshot);
	ItemPointer tid;
	Buffer		buffer = InvalidBuffer;

	probe->found = false;

	while ((tid = index_getnext_tid(scan, ForwardScanDirection)) != NULL)
	{
		HeapTupleData tuple;
		ItemPointerData htid = *tid;
		bool		all_dead = false;
		bool		visible;

		buffer = ReleaseAndReadBuffer(buffer, r->heap,
									  ItemPointerGetBlockNumber(&htid));
		LockBuffer(buffer, BUFFER_LOCK_SHARE);
		visible = heap_hot_search_buffer(&htid, r->heap, buffer, snapshot,
										 &tuple, &all_dead, true);
		if (visible)
			IdemProbeFill(r, &tuple, buffer, snapshot, probe);
		LockBuffer(buffer, BUFFER_LOCK_UNLOCK);

		if (visible)
			break;

		/* Let the index AM mark entries of dead tuples as killed */
		if (!scan->xactStartedInRecovery)
			scan->kill_prior_tuple = all_dead;
	}

	if (BufferIsValid(buffer))
		ReleaseBuffer(buffer);
	index_endscan(scan);
}

/* Does tid in r hold a visible tuple of exactly (nsid, key)?  Fills probe */
static bool
IdemProbeTid(IdemStoreRel *r, int32 nsid, const bytea *key, ItemPointer tid,
			 Snapshot snapshot, IdemProbe *probe)
{
	HeapTupleData tuple;
	ItemPointerData htid = *tid;
	bool		all_dead;
	bool		match = false;
	Buffer		buffer;

	if (!IdemClaimCacheBlockExists(r->heap, ItemPointerGetBlockNumber(&htid)))
		return false;
	buffer = ReadBuffer(r->heap, ItemPointerGetBlockNumber(&htid));
	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	if (heap_hot_search_buffer(&htid, r->heap, buffer, snapshot,
							   &tuple, &all_dead, true))
	{
		TupleDesc	desc = RelationGetDescr(r->heap);
		bool		isnull;
		Datum		d;

		d = heap_getattr(&tuple, r->layout->att_ns, desc, &isnull);
		if (!isnull && DatumGetInt32(d) == nsid)
		{
			bytea	   *stored;

			d = heap_getattr(&tuple, r->layout->att_key, desc, &isnull);
			stored = (bytea *) DatumGetPointer(d);
			match = !isnull &&
				VARSIZE_ANY_EXHDR(stored) == VARSIZE_ANY_EXHDR(key) &&
				memcmp(VARDATA_ANY(stored), VARDATA_ANY(key),
					   VARSIZE_ANY_EXHDR(key)) == 0;
		}
		if (match)
			IdemProbeFill(r, &tuple, buffer, snapshot, probe);
	}
	UnlockReleaseBuffer(buffer);
	return match;
}

/*
 * Look for (ns, key) where the claim cache says it was.  Returns the
 * relation where a candidate TID holds a visible tuple with exactly this
 * key and namespace, and fills probe; NULL means "ask the indexes".
 */
static IdemStoreRel *
IdemProbeCached(IdemStore *store, IdemNamespace *ns, const bytea *key, uint64 hash,
				Snapshot snapshot, IdemProbe *probe)
{
	int32		nsid = ns->id;
	ItemPointerData tids[IDEM_CACHE_MAX_CANDIDATES];
	uint8		tags[IDEM_CACHE_MAX_CANDIDATES];
	int			ntids = IdemClaimCacheLookup(hash, tids, tags);
	int			i;
	int			j;

	for (i = 0; i < ntids; i++)
	{
		if (tags[i] == IdemStoreRelTag(&store->root) &&
			IdemProbeTid(&store->root, nsid, key, &tids[i], snapshot, probe))
			return &store->root;
		for (j = 0; j < store->nrels; j++)
		{
			IdemGeneration *g = &store->map->gens[j];
			IdemStoreRel *r;

			/* an expired generation is not read: the purge may be dropping it */
			if (tags[i] != IdemStoreTagOf(g->id) ||
				(g->state == IDEM_GEN_SEALED && IdemGenSealedExpired(g, ns, store->now)))
				continue;
			r = IdemStoreGenRel(store, j);
			if (!IdemStoreRelOpen(store, r, AccessShareLock))
				continue;
			if (IdemProbeTid(r, nsid, key, &tids[i], snapshot, probe))
				return r;
		}
	}
	return NULL;
}

/* Is the claim a probe found past its namespace's TTL? */
static inline bool
IdemProbeExpired(IdemStore *store, IdemNamespace *ns, IdemProbe *probe)
{
	return IdemNamespaceExpiry(ns, probe->claimed_at) < store->now;
}

/* The serialization failure a REPEATABLE READ claimer gets */
pg_noreturn static void
IdemReportUnseen(IdemRowSeek *seek pg_attribute_unused())
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access due to concurrent claim"),
			 errdetail("A transaction that committed after this transaction's snapshot was taken claimed or released the event.")));
}

/*
 * Might relation r, other than the one a claim of ns goes to, hold a live
 * claim of the key?  The claims table always might.  A sealed generation
 * answers through its namespaces, their expiry and its filter; an open or
 * closed one through the namespaces announced in it.
 */
static bool
IdemStoreRelMayHold(IdemStore *store, IdemStoreRel *r, IdemNamespace *ns,
					uint64 fhash)
{
	if (r->gen != NULL && r->opened && r->gone)
		return false;
	return IdemFilterMayHold(r->gen, ns, store->now, fhash);
}

/*
 * Probe relation r's index for the probe's key without reading the heap:
 * 0 if the index has no entry for it, 1 if it has one on a page the
 * visibility map says is all-visible (a committed, undeleted claim; probe
 * gets its TID, and no fingerprint), -1 if only the heap can tell.  A
 * sealed generation's index is read through its fences (btprobe.c).
 */
static int
IdemProbeIndexOnly(IdemStore *store, IdemStoreRel *r, IdemProbe *probe)
{
	/* a sealed generation of the store's map keeps its fences in the map */
	IdemBtreeFences **fences = (r->in_map && r->gen->state == IDEM_GEN_SEALED) ?
		&r->gen->fences : NULL;
	ItemPointerData tid;
	Buffer		vmbuffer = InvalidBuffer;
	int			result;

	result = IdemBtreeFirst(IdemStoreIndex(r), fences, GetMemoryChunkContext(store->map),
							r->layout->probe_key_col, probe->ns->id, probe->key, &tid);
	if (result <= 0)
		return result;
	if (!VM_ALL_VISIBLE(r->heap, ItemPointerGetBlockNumber(&tid), &vmbuffer))
		result = -1;
	else
	{
		probe->found = true;
		probe->seek.tid = tid;
		probe->seek.xwait = InvalidTransactionId;
		probe->seek.spec_token = 0;
		probe->seek.ours = false;
		probe->seek.unseen = false;
		probe->has_fp = false;
	}
	if (BufferIsValid(vmbuffer))
		ReleaseBuffer(vmbuffer);
	return result;
}

/*
 * Has a btree no root page, so that it holds no entry?  _bt_getrootheight
 * caches the metapage only once there is a root, and gives 0 for a root
 * that is a leaf too.
 */
static inline bool
IdemIndexIsEmpty(Relation index)
{
	return index->rd_rel->relam == BTREE_AM_OID &&
		_bt_getrootheight(index) == 0 && index->rd_amcache == NULL;
}

/*
 * Look for a live claim of the probe's key in every relation but its
 * target, as a unique check across them would.  With pending, our own
 * speculative insertion into the target is in place, and the wait follows
 * check_exclusion_or_unique_constraint's livelock-preventing rule: of two
 * speculative inserters that see each other, the one with the older xid
 * waits for the other's speculative insertion to end, while the other
 * withdraws (the caller super-deletes) and waits for the first before
 * starting over.  With pending, no lock is waited for either: a relation
 * whose lock is not free gives IDEM_ELSEWHERE_AGAIN, and the caller takes
 * the lock once our token is released.  Without pending, an in-flight
 * claimer, or a lock, is simply waited for.  A committed live claim, or
 * one of our own, fills probe.
 */
static IdemElsewhere
IdemCheckElsewhere(IdemProbe *probe, bool pending)
{
	IdemStore  *store = probe->store;
	IdemStoreRel *target = probe->rel;
	int			n = IdemStoreScan(store, probe->ns, probe->fhash);
	int			i;

	for (i = 0; i < n; i++)
	{
		IdemStoreRel *r = IdemStoreScanAt(store, i);

		if (r == target || !IdemStoreRelMayHold(store, r, probe->ns, probe->fhash))
			continue;
		if (pending)
		{
			/*
			 * Our token is held: no waiting for a lock (whoever holds it
			 * may be waiting for a claimer that waits for our token, and
			 * the deadlock detector cannot see that wait).  Withdraw, lock
			 * without the token, and start over.
			 */
			IdemOpen	o = IdemStoreRelOpenExt(store, r, AccessShareLock, true);

			if (o == IDEM_OPEN_GONE)
				continue;
			if (o == IDEM_OPEN_BUSY)
			{
				probe->wait_lock = r;
				return IDEM_ELSEWHERE_AGAIN;
			}
		}
		else if (!IdemStoreRelOpen(store, r, AccessShareLock))
			continue;

		/*
		 * An index without a root page holds nothing: reading its metapage
		 * is cheaper than a probe.  Typically the claims table itself, once
		 * every class has generations.  (A claimer inserting there after
		 * this read sees our announcement and probes our generation.)
		 */
		if (IdemIndexIsEmpty(IdemStoreIndex(r)))
			continue;
		/*
		 * A sealed generation whose claims of the namespace are all live,
		 * once VACUUM marked its pages all-visible: the index entry alone
		 * says "a committed live claim", as an index-only scan would, with
		 * no heap page to read (unless the fingerprint is wanted).
		 */
		if (r->gen != NULL && r->gen->state == IDEM_GEN_SEALED && !probe->want_fp &&
			IdemGenSealedAllLive(r->gen, probe->ns, store->now))
		{
			int			io = IdemProbeIndexOnly(store, r, probe);

			if (io == 0)
				continue;		/* no entry: not there */
			if (io > 0)
			{
				probe->found_in = r;
				return IDEM_ELSEWHERE_DUP;
			}
		}
		for (;;)
		{
			CHECK_FOR_INTERRUPTS();
			IdemProbeKey(r, probe->ns->id, probe->key, &probe->dirty, probe);
			if (!probe->found)
				break;
			if (TransactionIdIsValid(probe->seek.xwait))
			{
				if (probe->seek.nowait)
				{
					probe->wait_xid = InvalidTransactionId;
					return IDEM_ELSEWHERE_RETRY;
				}
				if (pending &&
					!(probe->seek.spec_token != 0 &&
					  TransactionIdPrecedes(GetCurrentTransactionId(), probe->seek.xwait)))
				{
					probe->wait_xid = probe->seek.xwait;
					probe->wait_token = probe->seek.spec_token;
					probe->wait_rel = r;
					probe->wait_tid = probe->seek.tid;
					return IDEM_ELSEWHERE_RETRY;
				}
				probe->seek.waits++;
				if (probe->seek.spec_token != 0)
					IdemSpecTokenWait(probe->seek.xwait, probe->seek.spec_token);
				else
					XactLockTableWait(probe->seek.xwait, r->heap, &probe->seek.tid,
									  XLTW_InsertIndex);
				continue;
			}
			if (probe->seek.unseen)
				return IDEM_ELSEWHERE_UNSEEN;
			if (probe->seek.ours || !IdemProbeExpired(store, probe->ns, probe))
			{
				probe->found_in = r;
				return IDEM_ELSEWHERE_DUP;
			}
			break;				/* expired: absent; it goes with its relation */
		}
	}
	return IDEM_ELSEWHERE_NONE;
}

/*
 * Wait for what made us withdraw, our token released: the claimer in
 * another relation, or the lock of one
 */
static void
IdemWaitElsewhere(IdemProbe *probe)
{
	if (probe->wait_lock != NULL)
	{
		IdemStoreRel *r = probe->wait_lock;

		probe->wait_lock = NULL;
		if (IdemStoreRelOpen(probe->store, r, AccessShareLock))
			(void) IdemStoreIndex(r);
		return;
	}
	if (!TransactionIdIsValid(probe->wait_xid))
		return;
	probe->seek.waits++;
	if (probe->wait_token != 0)
		IdemSpecTokenWait(probe->wait_xid, probe->wait_token);
	else
		XactLockTableWait(probe->wait_xid, probe->wait_rel->heap, &probe->wait_tid,
						  XLTW_InsertIndex);
	probe->wait_xid = InvalidTransactionId;
}

/*
 * Insert a new claim speculatively into the probe's target.  Returns false
 * if a concurrent transaction inserted the same key into the target
 * meanwhile, in which case our tuple has been super-deleted and the caller
 * must probe again.  Returns true if the claim is settled: inserted, or,
 * with probe->elsewhere set, withdrawn because of a claim in another
 * relation.
 *
 * As INSERT ... ON CONFLICT DO NOTHING does: constraints are checked
 * first, then the heap tuple is inserted under a speculative token, and
 * ExecInsertIndexTuples inserts into every index that is ready for
 * inserts, every unique one checking with UNIQUE_CHECK_PARTIAL.  Then,
 * with the tuple still speculative, the other relations are checked
 * (IdemCheckElsewhere), as an exclusion constraint rechecks after its
 * insertion; a generation is announced before the insertion, so that a
 * claimer of the same key in another one sees us.
 */
static bool
IdemInsertSpeculative(IdemProbe *probe)
{
	IdemStore  *store = probe->store;
	IdemStoreRel *r = probe->rel;
	IdemNamespace *ns = probe->ns;
	const bytea *key = probe->key;
	const IdemClaimRow *row = &probe->row;
	IdemClaimRel *cr = r->layout;
	TupleTableSlot *slot;
	HeapTuple	tuple;
	TransactionId xid;
	uint32		token;
	bool		conflict = false;
	IdemElsewhere els = IDEM_ELSEWHERE_NONE;
	List	   *recheck;

	probe->elsewhere = IDEM_ELSEWHERE_NONE;
	IdemClaimRelForInsert(cr, r->heap);
	slot = cr->slot;
	ExecClearTuple(slot);
	memset(slot->tts_isnull, true, sizeof(bool) * cr->natts);
	slot->tts_values[cr->att_claimed_at - 1] = TimestampTzGetDatum(row->claimed_at);
	slot->tts_isnull[cr->att_claimed_at - 1] = false;
	slot->tts_values[cr->att_ns - 1] = Int32GetDatum(ns->id);
	slot->tts_isnull[cr->att_ns - 1] = false;
	slot->tts_values[cr->att_key - 1] = PointerGetDatum(key);
	slot->tts_isnull[cr->att_key - 1] = false;
	if (row->has_fp)
	{
		slot->tts_values[cr->att_fingerprint - 1] = Int64GetDatum(row->fp);
		slot->tts_isnull[cr->att_fingerprint - 1] = false;
	}
	ExecStoreVirtualTuple(slot);
	if (cr->constraints)
		ExecConstraints(cr->rri, slot, cr->estate);

	tuple = heap_form_tuple(RelationGetDescr(r->heap), slot->tts_values,
							slot->tts_isnull);
	IdemStoreOpenIndexes(r);
	if (r->gen != NULL)
		IdemGenAnnounce(r->gen->slot, r->gen->id, ns->id);
	else
		IdemGenRootAnnounce(ns->id);
	if (store->bistate != NULL && store->bistate_relid != RelationGetRelid(r->heap))
	{
		FreeBulkInsertState(store->bistate);
		store->bistate = GetBulkInsertState();
		store->bistate_relid = RelationGetRelid(r->heap);
	}

	xid = GetCurrentTransactionId();
	token = IdemSpecTokenAcquire(xid);
	HeapTupleHeaderSetSpeculativeToken(tuple->t_data, token);
	heap_insert(r->heap, tuple, GetCurrentCommandId(true),
				HEAP_INSERT_SPECULATIVE, store->bistate);
	slot->tts_tid = tuple->t_self;

	if (cr->nindexes == 1 && cr->probe == 0)
	{
		/*
		 * Only the unique index on (key, ns), on plain columns: what
		 * ExecInsertIndexTuples would do comes down to this one call.
		 * Calling it directly kept new ids at 0.35 of the bench baseline,
		 * against 0.37 through ExecInsertIndexTuples, and the bar is 0.4.
		 */
		Datum		ivalues[2];
		bool		inulls[2] = {false, false};

		ivalues[cr->probe_key_col - 1] = PointerGetDatum(key);
		ivalues[2 - cr->probe_key_col] = Int32GetDatum(ns->id);
		conflict = !IdemIndexInsert(r->indexes[0], ivalues, inulls,
									&tuple->t_self, r->heap, UNIQUE_CHECK_PARTIAL,
									false, cr->rri->ri_IndexRelationInfo[0]);
	}
	else
	{
		cr->rri->ri_IndexRelationDescs = r->indexes;
		recheck = IdemExecInsertIndexTuples(cr->rri, slot, cr->estate, &conflict);
		list_free(recheck);
		ResetPerTupleExprContext(cr->estate);
	}

	if (!conflict)
		els = IdemCheckElsewhere(probe, true);

	if (!conflict && els == IDEM_ELSEWHERE_NONE)
	{
		heap_finish_speculative(r->heap, &tuple->t_self);
		if (r->gen != NULL)
			IdemGenCountClaim(r->gen->slot, r->gen->id,
							  (uint64) idem_generation_max_claims);
	}
	else
		heap_abort_speculative(r->heap, &tuple->t_self);
	IdemSpecTokenRelease(xid, token);
	probe->inserted = tuple->t_self;
	probe->inserted_in = r;
	heap_freetuple(tuple);
	if (conflict)
		return false;
	if (els == IDEM_ELSEWHERE_UNSEEN)
		IdemReportUnseen(&probe->seek);
	probe->elsewhere = els;
	if (els == IDEM_ELSEWHERE_RETRY || els == IDEM_ELSEWHERE_AGAIN)
		IdemWaitElsewhere(probe);
	return true;
}

/* Raise the fingerprint-mismatch error for a duplicate claim */
static void
IdemReportFingerprintMismatch(IdemNamespace *ns, const bytea *key)
{
	IdemStatsCount(ns->stats, IDEM_STAT_FINGERPRINT_MISMATCHES);
	ereport(ERROR,
			(errcode(ERRCODE_IDEM_FINGERPRINT_MISMATCH),
			 errmsg("event id reused with a different fingerprint"),
			 errdetail("Event id \"%s\" in namespace \"%s\" was claimed with another fingerprint.",
					   text_to_cstring(IdemDecodeKey(key)), ns->name),
			 errhint("An id must identify one payload; send a new id for a different payload.")));
}

/*
 * Per-namespace record of what cache misses turned out to be, deciding
 * whether a miss inserts first or probes first.  Direct-mapped by namespace
 * id; a collision merely restarts the count.
 */
typedef struct IdemMissHistory
{
	int32		nsid;
	uint32		news;			/* misses that were new ids */
	uint32		dups;			/* misses that were duplicates */
} IdemMissHistory;

#define IDEM_MISS_SLOTS		64
#define IDEM_MISS_WINDOW	256

static IdemMissHistory idem_miss_history[IDEM_MISS_SLOTS];

/* The history slot of a namespace */
static inline IdemMissHistory *
IdemMissSlot(int32 nsid)
{
	IdemMissHistory *h = &idem_miss_history[(uint32) nsid % IDEM_MISS_SLOTS];

	if (h->nsid != nsid)
	{
		h->nsid = nsid;
		h->news = h->dups = 0;
	}
	return h;
}

/* Should a cache miss in this namespace try the insertion first? */
static inline bool
IdemMissInsertFirst(int32 nsid)
{
	IdemMissHistory *h = IdemMissSlot(nsid);

	return h->dups * 4 <= h->news + h->dups;
}

/* Record what a cache miss turned out to be */
static inline void
IdemMissRecord(int32 nsid, bool duplicate)
{
	IdemMissHistory *h = IdemMissSlot(nsid);

	if (duplicate)
		h->dups++;
	else
		h->news++;
	if (h->news + h->dups > IDEM_MISS_WINDOW)
	{
		h->news /= 2;
		h->dups /= 2;
	}
}

static bool IdemProbeNext(IdemRowSeek *seek);

/* Set up a probe of (ns, key) for one claim operation */
static void
IdemProbeInit(IdemProbe *probe, IdemStore *store, IdemNamespace *ns,
			  const bytea *key, XLTW_Oper oper)
{
	memset(probe, 0, sizeof(*probe));
	probe->seek.oper = oper;
	probe->seek.probe = IdemProbeNext;
	probe->seek.conflict = IdemReportUnseen;
	probe->store = store;
	probe->rel = &store->root;
	probe->seek.heap = store->root.heap;
	probe->ns = ns;
	probe->key = key;
	probe->fhash = IdemFilterHash(ns->id, key);
	InitDirtySnapshot(probe->dirty);
}

/* Point the probe's seek at relation r */
static inline void
IdemProbeAt(IdemProbe *probe, IdemStoreRel *r)
{
	probe->rel = r;
	probe->seek.heap = r->heap;
}

/* The seek's probe: what the claim cache found first, then the index */
static bool
IdemProbeNext(IdemRowSeek *seek)
{
	IdemProbe  *probe = (IdemProbe *) seek;

	if (probe->cached)
		probe->cached = false;
	else
		IdemProbeKey(probe->rel, probe->ns->id, probe->key, &probe->dirty, probe);
	return probe->found;
}

/* A claim's decision: an expired claim of another is taken over */
static IdemRowAction
IdemClaimDecide(IdemRowSeek *seek)
{
	IdemProbe  *probe = (IdemProbe *) seek;

	if (!seek->ours && IdemProbeExpired(probe->store, probe->ns, probe))
		return IDEM_ROW_DELETE;
	return IDEM_ROW_KEEP;		/* a live claim: a duplicate */
}

/* A claim of a key absent from its target inserts it */
static bool
IdemClaimAbsent(IdemRowSeek *seek)
{
	return IdemInsertSpeculative((IdemProbe *) seek);
}

/*
 * A release's vanished test (rowseek.c): a live claim under snap.  An
 * expired claim counts as absent either way.
 */
static bool
IdemReleaseVanished(IdemRowSeek *seek, Snapshot snap)
{
	IdemProbe  *probe = (IdemProbe *) seek;

	IdemProbeKey(probe->rel, probe->ns->id, probe->key, snap, probe);
	return probe->found && !IdemProbeExpired(probe->store, probe->ns, probe);
}

/* A release deletes whatever claim it finds */
static IdemRowAction
IdemReleaseDecide(IdemRowSeek *seek pg_attribute_unused())
{
	return IDEM_ROW_DELETE;
}

/*
 * Raise the error of a claim whose class's open generation has no table:
 * dropped by hand, since the maintenance pass drops only expired sealed
 * generations.  Guessing another relation could put the claim where the
 * seal and the filters do not expect it, so the claim fails until a new
 * generation is opened.
 */
pg_noreturn static void
IdemReportGenerationGone(IdemNamespace *ns, int32 gen_id)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_TABLE),
			 errmsg("table of open generation %d does not exist", gen_id),
			 errdetail("Table idempotency.claims_g%d, which takes the new claims of namespace \"%s\", was dropped.",
					   gen_id, ns->name),
			 errhint("SELECT idem_generation_switch() opens a new generation for its claims; so does the purge worker's next round.")));
}

/*
 * Choose the relation a claim of ns goes to: the open generation of its
 * TTL class, or the claims table if the class has none.  After locking a
 * generation, the map is read again: if a switch committed meanwhile, the
 * lock's invalidations have replaced it, and we choose again.  So nobody
 * inserts into a generation after the seal took its SHARE lock.
 *
 * An open generation whose table is gone (DROP TABLE by hand; nothing of
 * the extension drops one) would make that loop run forever, since
 * dropping a table changes nothing in idempotency.generations.  The map
 * might just be stale, read before a switch whose invalidations we had not
 * received yet, so it is read once afresh, after any maintenance pass in
 * flight has ended (IdemGenMaintenanceWait); if its open generation still
 * has no table, the claim fails (IdemReportGenerationGone).
 */
static IdemStoreRel *
IdemStoreTarget(IdemStore *store, IdemNamespace *ns)
{
	bool		reread = false;

	for (;;)
	{
		IdemGeneration *g;
		IdemStoreRel *r;

		CHECK_FOR_INTERRUPTS();
		g = IdemGenTarget(store->map, ns);
		if (g == NULL)
		{
			(void) IdemStoreRelOpen(store, &store->root, RowExclusiveLock);
			if (IdemGenMapGet() == store->map)
				return &store->root;
			IdemStoreLoadMap(store);
			continue;
		}
		r = IdemStoreGenRel(store, g - store->map->gens);
		if (IdemStoreRelOpen(store, r, RowExclusiveLock))
		{
			if (IdemGenMapGet() == store->map)
				return r;
			IdemStoreLoadMap(store);
			continue;
		}
		/* its table is gone */
		if (reread)
			IdemReportGenerationGone(ns, g->id);
		reread = true;
		IdemGenMaintenanceWait();
		AcceptInvalidationMessages();
		(void) IdemGenMapFresh();	/* drops the cached map too */
		IdemStoreLoadMap(store);
	}
}

/* The outcome of a duplicate: the cache, the fingerprint check, the stats */
static IdemClaimOutcome
IdemClaimDuplicate(IdemProbe *probe, IdemStoreRel *r, bool check_fp)
{
	IdemNamespace *ns = probe->ns;

	IdemClaimCacheRemember(probe->hash, &probe->seek.tid, IdemStoreRelTag(r));
	if (check_fp && probe->row.has_fp && probe->has_fp && probe->fp != probe->row.fp)
		IdemReportFingerprintMismatch(ns, probe->key);
	IdemStatsCount(ns->stats, IDEM_STAT_DUPLICATES);
	return IDEM_CLAIM_DUPLICATE;
}

/*
 * Claim key in namespace ns for the current transaction, storing row if the
 * claim is new.  With nowait, returns IDEM_CLAIM_BUSY instead of waiting
 * for another in-flight transaction.  With check_fp, a duplicate whose
 * stored fingerprint differs from row's raises
 * ERRCODE_IDEM_FINGERPRINT_MISMATCH; a claim without a fingerprint, or a
 * stored claim without one, matches any.
 */
static IdemClaimOutcome
IdemStoreClaimRow(IdemStore *store, IdemNamespace *ns, const bytea *key,
				  const IdemClaimRow *row, bool check_fp, bool nowait)
{
	IdemProbe	probe;
	IdemStoreRel *target;
	IdemStoreRel *hit;
	bool		cache_miss;
	IdemRowResult result;

	target = IdemStoreTarget(store, ns);
	IdemProbeInit(&probe, store, ns, key, XLTW_InsertIndex);
	IdemFilterPrefetch(store->map, ns, probe.fhash);
	IdemProbeAt(&probe, target);
	probe.row = *row;
	probe.want_fp = check_fp && row->has_fp;
	probe.seek.nowait = nowait;
	probe.seek.decide = IdemClaimDecide;
	probe.seek.absent = IdemClaimAbsent;
	probe.hash = IdemClaimCacheHash(store->heap, ns->id, key);

	/* Shortcut for duplicates: where the claim was last seen */
	hit = IdemProbeCached(store, ns, key, probe.hash, &probe.dirty, &probe);
	if (hit != NULL && hit != target)
	{
		/* in another relation: settled if committed (or ours) and live */
		if (!TransactionIdIsValid(probe.seek.xwait) && !probe.seek.unseen &&
			(probe.seek.ours || !IdemProbeExpired(store, ns, &probe)))
			return IdemClaimDuplicate(&probe, hit, check_fp);
		hit = NULL;
	}
	probe.cached = (hit != NULL);
	cache_miss = !probe.cached;

	/* Shortcut for new ids: let the index insertion check uniqueness */
	if (cache_miss && IdemMissInsertFirst(ns->id))
	{
		bool		settled = IdemInsertSpeculative(&probe);

		if (settled && probe.elsewhere == IDEM_ELSEWHERE_NONE)
		{
			IdemMissRecord(ns->id, false);
			goto claimed;
		}
		if (settled && probe.elsewhere == IDEM_ELSEWHERE_DUP)
		{
			IdemMissRecord(ns->id, true);
			return IdemClaimDuplicate(&probe, probe.found_in, check_fp);
		}
		if (!settled || probe.elsewhere != IDEM_ELSEWHERE_AGAIN)
		{
			IdemMissRecord(ns->id, true);
			cache_miss = false; /* recorded */
		}
	}

	for (;;)
	{
		IdemElsewhere els;

		CHECK_FOR_INTERRUPTS();
		probe.elsewhere = IDEM_ELSEWHERE_NONE;
		/* Another relation may hold it: look there first, waiting as needed */
		if (!probe.cached)
		{
			els = IdemCheckElsewhere(&probe, false);
			if (els == IDEM_ELSEWHERE_UNSEEN)
				IdemReportUnseen(&probe.seek);
			if (els == IDEM_ELSEWHERE_RETRY)
			{
				IdemStatsCount(ns->stats, IDEM_STAT_BUSY);
				return IDEM_CLAIM_BUSY; /* only with nowait */
			}
			if (els == IDEM_ELSEWHERE_DUP)
			{
				if (cache_miss)
					IdemMissRecord(ns->id, true);
				IdemStatsAdd(ns->stats, IDEM_STAT_WAITS, probe.seek.waits);
				return IdemClaimDuplicate(&probe, probe.found_in, check_fp);
			}
		}

		result = IdemRowSeekRun(&probe.seek);
		IdemStatsAdd(ns->stats, IDEM_STAT_WAITS, probe.seek.waits);
		if ((result == IDEM_ROW_ABSENT || result == IDEM_ROW_DELETED) &&
			probe.elsewhere != IDEM_ELSEWHERE_NONE)
		{
			if (probe.elsewhere == IDEM_ELSEWHERE_DUP)
			{
				if (cache_miss)
					IdemMissRecord(ns->id, true);
				return IdemClaimDuplicate(&probe, probe.found_in, check_fp);
			}
			if (probe.elsewhere == IDEM_ELSEWHERE_AGAIN)
			{
				probe.cached = false;
				continue;		/* took a lock without our token: again */
			}
			if (nowait)
			{
				IdemStatsCount(ns->stats, IDEM_STAT_BUSY);
				return IDEM_CLAIM_BUSY;
			}
			probe.cached = false;
			continue;			/* waited for a claimer elsewhere: again */
		}
		break;
	}
	switch (result)
	{
		case IDEM_ROW_BUSY:
			IdemStatsCount(ns->stats, IDEM_STAT_BUSY);
			return IDEM_CLAIM_BUSY;
		case IDEM_ROW_KEPT:
			if (cache_miss)
				IdemMissRecord(ns->id, true);
			return IdemClaimDuplicate(&probe, target, check_fp);
		case IDEM_ROW_DELETED:
			IdemStatsCount(ns->stats, IDEM_STAT_TAKEOVERS);
			break;
		case IDEM_ROW_ABSENT:
			break;
		case IDEM_ROW_LOCKED:
			Assert(false);		/* claims never lock */
			break;
	}
	if (cache_miss)
		IdemMissRecord(ns->id, false);

claimed:
	IdemClaimCacheRemember(probe.hash, &probe.inserted, IdemStoreRelTag(target));
	IdemStatsCount(ns->stats, IDEM_STAT_CLAIMS);
	return IDEM_CLAIM_NEW;
}

/*
 * Claim key in namespace ns for the current transaction, now: see
 * IdemStoreClaimRow.
 */
IdemClaimOutcome
IdemStoreClaim(IdemStore *store, IdemNamespace *ns, const bytea *key,
			   const text *fingerprint, bool nowait)
{
	IdemClaimRow row;

	row.claimed_at = store->now;
	row.has_fp = fingerprint != NULL;
	row.fp = row.has_fp ? IdemFingerprintHash(fingerprint) : 0;
	return IdemStoreClaimRow(store, ns, key, &row, true, nowait);
}

/*
 * Import a claim made elsewhere (resharding): as a claim, but storing row's
 * claimed_at and fingerprint hash.  A live claim already here wins, whatever
 * its fingerprint.  The caller checks that row is not expired.
 */
IdemClaimOutcome
IdemStoreImport(IdemStore *store, IdemNamespace *ns, const bytea *key,
				const IdemClaimRow *row)
{
	return IdemStoreClaimRow(store, ns, key, row, false, false);
}

/*
 * Might relation r hold a live claim of (ns, key), for a reader?  As for a
 * claim's other relations, but every open generation is read: nothing
 * makes a reader's answer depend on an announcement.
 */
static bool
IdemStoreRelMayHoldRead(IdemStore *store, IdemStoreRel *r, IdemNamespace *ns,
						uint64 fhash)
{
	if (r->gen == NULL || r->gen->state != IDEM_GEN_SEALED)
		return !(r->opened && r->gone);
	return IdemStoreRelMayHold(store, r, ns, fhash);
}

/*
 * Does a live claim exist for (ns, key)?  Reads as a SELECT in this
 * transaction would, and also sees everything this transaction did itself,
 * including claims made earlier in the same statement.  Never waits.
 */
bool
IdemStoreIsClaimed(IdemStore *store, IdemNamespace *ns, const bytea *key)
{
	SnapshotData snap;
	IdemProbe	probe;
	uint64		fhash = IdemFilterHash(ns->id, key);
	int			n;
	int			i;

	snap = ActiveSnapshotSet() ? *GetActiveSnapshot() : *GetTransactionSnapshot();
	snap.curcid = InvalidCommandId; /* see all of our own changes */
	probe.found = false;
	if (IdemProbeCached(store, ns, key,
						IdemClaimCacheHash(store->heap, ns->id, key),
						&snap, &probe) != NULL &&
		!IdemProbeExpired(store, ns, &probe))
		return true;
	n = IdemStoreScan(store, ns, fhash);
	for (i = 0; i < n; i++)
	{
		IdemStoreRel *r = IdemStoreScanAt(store, i);

		if (!IdemStoreRelMayHoldRead(store, r, ns, fhash) ||
			!IdemStoreRelOpen(store, r, AccessShareLock))
			continue;
		IdemProbeKey(r, ns->id, key, &snap, &probe);
		if (probe.found && !IdemProbeExpired(store, ns, &probe))
			return true;
	}
	return false;
}

/*
 * Remove the claim on (ns, key), from every relation that holds one.
 * Waits for an in-flight claimer, as a claim would.  Returns true if a
 * live claim was removed; an expired claim is removed too, but counts as
 * absent.
 */
bool
IdemStoreRelease(IdemStore *store, IdemNamespace *ns, const bytea *key)
{
	IdemProbe	probe;
	bool		released = false;
	uint64		fhash = IdemFilterHash(ns->id, key);
	int			waits = 0;
	int			n;
	int			i;

	n = IdemStoreScan(store, ns, fhash);
	for (i = 0; i < n; i++)
	{
		IdemStoreRel *r = IdemStoreScanAt(store, i);
		IdemRowResult result;

		if (!IdemStoreRelMayHoldRead(store, r, ns, fhash) ||
			!IdemStoreRelOpen(store, r, RowExclusiveLock))
			continue;
		IdemProbeInit(&probe, store, ns, key, XLTW_Delete);
		IdemProbeAt(&probe, r);
		probe.seek.decide = IdemReleaseDecide;
		probe.seek.vanished = IdemReleaseVanished;
		result = IdemRowSeekRun(&probe.seek);
		waits += probe.seek.waits;
		if (result == IDEM_ROW_DELETED &&
			(probe.seek.ours || !IdemProbeExpired(store, ns, &probe)))
			released = true;
	}
	IdemStatsAdd(ns->stats, IDEM_STAT_WAITS, waits);
	if (released)
		IdemStatsCount(ns->stats, IDEM_STAT_RELEASES);
	return released;
}

#ifdef IDEM_HAVE_TID_RANGE_SCAN
/*
 * The purge's batch on the claims table: delete up to batch expired claims
 * after *cursor, in TID order, with a TID range scan and heap_delete, as
 * the equivalent DELETE would but without locking each row first.  A claim
 * being taken over, released or purged by a transaction in flight is
 * skipped, never waited for (heap_delete without wait), and so is one
 * changed since our snapshot, or row-locked (by this transaction too); a
 * claim whose inserter is in flight is invisible to the scan.  nss holds
 * every namespace sorted by id; counts, parallel to it, gets the claims
 * deleted per namespace.  A batch reads at most IDEM_PURGE_WINDOW_BLOCKS
 * pages, however few expired claims they hold, so that it stays short in
 * a store of mostly live claims.  Advances *cursor past what it read;
 * *more is false when the scan reached the end of the table.  Returns the
 * number of claims deleted.
 */
int64
IdemStorePurgeBatch(IdemStore *store, const IdemNamespace *nss, int nns,
					int64 *counts, int batch, ItemPointer cursor, bool *more)
{
	IdemClaimRel *cr = store->layout;
	ItemPointerData maxtid;
	TableScanDesc scan;
	TupleTableSlot *slot;
	CommandId	cid = GetCurrentCommandId(true);
	SnapshotData snap;
	int64		deleted = 0;
	int			met = 0;

	/*
	 * See what heap_delete will see at cid: not the claims this transaction
	 * deleted before (an earlier idem_purge in the same statement, say),
	 * which the statement's snapshot still shows.
	 */
	snap = *GetActiveSnapshot();
	snap.curcid = cid;

	IdemPurgeWindowEnd(cursor, &maxtid);
	scan = IdemTableBeginScanTidRange(store->heap, &snap, cursor, &maxtid);
	slot = table_slot_create(store->heap, NULL);
	*more = false;
	while (table_scan_getnextslot_tidrange(scan, ForwardScanDirection, slot))
	{
		ItemPointerData tid = slot->tts_tid;
		const IdemNamespace *ns;
		TimestampTz claimed_at;
		int32		nsid;
		TM_FailureData tmfd;
		TM_Result	result;

		if (ItemPointerCompare(&tid, cursor) <= 0)
			continue;			/* the range starts at the cursor itself */
		slot_getsomeattrs(slot, Max(cr->att_claimed_at, cr->att_ns));
		claimed_at = DatumGetTimestampTz(slot->tts_values[cr->att_claimed_at - 1]);
		nsid = DatumGetInt32(slot->tts_values[cr->att_ns - 1]);
		ns = IdemNamespaceFindById(nss, nns, nsid);
		if (ns == NULL || IdemNamespaceExpiry(ns, claimed_at) >= store->now)
			continue;

		*cursor = tid;
		result = IdemHeapDelete(store->heap, &tid, cid, InvalidSnapshot,
								false, &tmfd);
		if (result == TM_Ok)
		{
			deleted++;
			counts[ns - nss]++;
		}
		else if (result != TM_BeingModified && result != TM_Updated &&
				 result != TM_Deleted && result != TM_SelfModified)
			elog(ERROR, "unexpected heap_delete result %d", (int) result);

		if (++met >= batch)
		{
			*more = true;
			break;
		}
	}
	if (!*more)
		*more = IdemPurgeWindowFinish(cursor, &maxtid,
									  RelationGetNumberOfBlocks(store->heap));
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	return deleted;
}
#endif
