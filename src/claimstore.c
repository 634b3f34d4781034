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
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "catalog.h"
#include "citus.h"
#include "claimcache.h"
#include "claimkey.h"
#include "claimstore.h"
#include "compat.h"
#include "idempotency.h"
#include "rowseek.h"
#include "spectoken.h"
#include "stats.h"

/*
 * One claim operation's probe of the claims: the seek loop it runs, and
 * what the last probe found for its key.
 */
typedef struct IdemProbe
{
	IdemRowSeek seek;			/* first: the callbacks cast it back */
	IdemStore  *store;
	IdemNamespace *ns;
	const bytea *key;
	IdemClaimRow row;			/* what a new claim stores */
	uint64		hash;			/* the key's claim cache hash */
	SnapshotData dirty;
	bool		cached;			/* the claim cache answered the next probe */
	ItemPointerData inserted;	/* TID of the claim this operation made */
	/* what the probe found */
	bool		found;
	TimestampTz claimed_at;
	bool		has_fp;
	int64		fp;
} IdemProbe;

/*
 * Open the claims table for one operation, and check that the direct path
 * may do op on it.  Indexes are opened on first use, since a duplicate
 * found through the claim cache needs none.
 */
void
IdemStoreOpen(IdemStore *store, IdemClaimOp op, bool bulk)
{
	store->catalog = IdemGetCatalog();
	store->lockmode = op == IDEM_OP_CHECK ? AccessShareLock : RowExclusiveLock;
	store->heap = table_open(store->catalog.claims, store->lockmode);
	store->layout = IdemClaimRelGet(store->heap, op);
	if (op == IDEM_OP_RELEASE || op == IDEM_OP_PURGE)
		CheckCmdReplicaIdentity(store->heap, CMD_DELETE);
	if (op == IDEM_OP_CLAIM)
		IdemCitusCheckClaim();	/* not beside distributed writes on a coordinator */
	if (store->layout->nindexes <= IDEM_STORE_INLINE_INDEXES)
	{
		memset(store->inline_indexes, 0, sizeof(store->inline_indexes));
		store->indexes = store->inline_indexes;
	}
	else
		store->indexes = palloc0(sizeof(Relation) * store->layout->nindexes);
	store->all_indexes = false;
	store->bistate = bulk ? GetBulkInsertState() : NULL;
	store->now = GetCurrentTransactionStartTimestamp();
}

/* Index i of the layout, opened on first use */
static inline Relation
IdemStoreIndexAt(IdemStore *store, int i)
{
	if (store->indexes[i] == NULL)
		store->indexes[i] = index_open(store->layout->index_oids[i],
									   store->lockmode);
	return store->indexes[i];
}

/* The unique index that probes read */
static inline Relation
IdemStoreIndex(IdemStore *store)
{
	return IdemStoreIndexAt(store, store->layout->probe);
}

/* Open every index, for an insertion that must maintain them all */
static void
IdemStoreOpenIndexes(IdemStore *store)
{
	int			i;

	if (store->all_indexes)
		return;
	for (i = 0; i < store->layout->nindexes; i++)
		(void) IdemStoreIndexAt(store, i);
	store->all_indexes = true;
}

/* Close what IdemStoreOpen opened; locks are kept until transaction end */
void
IdemStoreClose(IdemStore *store)
{
	int			i;

	if (store->bistate != NULL)
		FreeBulkInsertState(store->bistate);
	for (i = 0; i < store->layout->nindexes; i++)
		if (store->indexes[i] != NULL)
			index_close(store->indexes[i], NoLock);
	if (store->indexes != store->inline_indexes)
		pfree(store->indexes);
	table_close(store->heap, NoLock);
}

/*
 * Record in probe what a visible tuple says: who to wait for, whose it is,
 * when it was claimed.  The caller holds a lock on buffer.
 */
static void
IdemProbeFill(IdemStore *store, HeapTuple tuple, Buffer buffer,
			  Snapshot snapshot, IdemProbe *probe)
{
	TupleDesc	desc = RelationGetDescr(store->heap);
	IdemClaimRel *cr = store->layout;
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

/*
 * Probe the unique index for (ns, key) under snapshot, which is either a
 * dirty snapshot (to see in-flight claims, as unique checks do) or an MVCC
 * one (for read-only checks).  Fills probe with the first visible tuple.
 */
static void
IdemProbeKey(IdemStore *store, int32 nsid, const bytea *key,
			 Snapshot snapshot, IdemProbe *probe)
{
	ScanKeyData skeys[2];
	IndexScanDesc scan;
	ItemPointer tid;
	Buffer		buffer = InvalidBuffer;
	AttrNumber	keycol = store->layout->probe_key_col;

	probe->found = false;

	ScanKeyInit(&skeys[keycol - 1], keycol, BTEqualStrategyNumber, F_BYTEAEQ,
				PointerGetDatum(key));
	ScanKeyInit(&skeys[2 - keycol], 3 - keycol, BTEqualStrategyNumber, F_INT4EQ,
				Int32GetDatum(nsid));

	scan = index_beginscan(store->heap, IdemStoreIndex(store), snapshot, 2, 0);
	index_rescan(scan, skeys, 2, NULL, 0);

	while ((tid = index_getnext_tid(scan, ForwardScanDirection)) != NULL)
	{
		HeapTupleData tuple;
		ItemPointerData htid = *tid;
		bool		all_dead = false;
		bool		visible;

		buffer = ReleaseAndReadBuffer(buffer, store->heap,
									  ItemPointerGetBlockNumber(&htid));
		LockBuffer(buffer, BUFFER_LOCK_SHARE);
		visible = heap_hot_search_buffer(&htid, store->heap, buffer, snapshot,
										 &tuple, &all_dead, true);
		if (visible)
			IdemProbeFill(store, &tuple, buffer, snapshot, probe);
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

/*
 * Look for (ns, key) where the claim cache says it was.  Returns true and
 * fills probe if a candidate TID holds a visible tuple with exactly this
 * key and namespace; false means "ask the index".
 */
static bool
IdemProbeCached(IdemStore *store, int32 nsid, const bytea *key, uint64 hash,
				Snapshot snapshot, IdemProbe *probe)
{
	ItemPointerData tids[IDEM_CACHE_MAX_CANDIDATES];
	int			ntids = IdemClaimCacheLookup(hash, tids);
	int			i;

	for (i = 0; i < ntids; i++)
	{
		HeapTupleData tuple;
		ItemPointerData htid = tids[i];
		bool		all_dead;
		bool		match = false;
		Buffer		buffer;

		if (!IdemClaimCacheBlockExists(store->heap, ItemPointerGetBlockNumber(&htid)))
			continue;
		buffer = ReadBuffer(store->heap, ItemPointerGetBlockNumber(&htid));
		LockBuffer(buffer, BUFFER_LOCK_SHARE);
		if (heap_hot_search_buffer(&htid, store->heap, buffer, snapshot,
								   &tuple, &all_dead, true))
		{
			TupleDesc	desc = RelationGetDescr(store->heap);
			bool		isnull;
			Datum		d;

			d = heap_getattr(&tuple, store->layout->att_ns, desc, &isnull);
			if (!isnull && DatumGetInt32(d) == nsid)
			{
				bytea	   *stored;

				d = heap_getattr(&tuple, store->layout->att_key, desc, &isnull);
				stored = (bytea *) DatumGetPointer(d);
				match = !isnull &&
					VARSIZE_ANY_EXHDR(stored) == VARSIZE_ANY_EXHDR(key) &&
					memcmp(VARDATA_ANY(stored), VARDATA_ANY(key),
						   VARSIZE_ANY_EXHDR(key)) == 0;
			}
			if (match)
				IdemProbeFill(store, &tuple, buffer, snapshot, probe);
		}
		UnlockReleaseBuffer(buffer);
		if (match)
			return true;
	}
	return false;
}

/* Is the claim a probe found past its namespace's TTL? */
static inline bool
IdemProbeExpired(IdemStore *store, IdemNamespace *ns, IdemProbe *probe)
{
	return IdemNamespaceExpiry(ns, probe->claimed_at) < store->now;
}

/* The serialization failure a REPEATABLE READ claimer gets */
static void
pg_attribute_noreturn()
IdemReportUnseen(IdemRowSeek *seek pg_attribute_unused())
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access due to concurrent claim"),
			 errdetail("A transaction that committed after this transaction's snapshot was taken claimed or released the event.")));
}

/*
 * Insert a new claim speculatively.  Returns false if a concurrent
 * transaction inserted the same key meanwhile, in which case our tuple has
 * been super-deleted and the caller must probe again.
 *
 * As INSERT ... ON CONFLICT DO NOTHING does: constraints are checked
 * first, then the heap tuple is inserted under a speculative token, and
 * ExecInsertIndexTuples inserts into every index that is ready for
 * inserts, every unique one checking with UNIQUE_CHECK_PARTIAL.
 */
static bool
IdemInsertSpeculative(IdemStore *store, IdemNamespace *ns, const bytea *key,
					  const IdemClaimRow *row, ItemPointer tid)
{
	IdemClaimRel *cr = store->layout;
	TupleTableSlot *slot = cr->slot;
	HeapTuple	tuple;
	TransactionId xid;
	uint32		token;
	bool		conflict = false;
	List	   *recheck;

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

	tuple = heap_form_tuple(RelationGetDescr(store->heap), slot->tts_values,
							slot->tts_isnull);
	IdemStoreOpenIndexes(store);

	xid = GetCurrentTransactionId();
	token = IdemSpecTokenAcquire(xid);
	HeapTupleHeaderSetSpeculativeToken(tuple->t_data, token);
	heap_insert(store->heap, tuple, GetCurrentCommandId(true),
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
		conflict = !index_insert(store->indexes[0], ivalues, inulls,
								 &tuple->t_self, store->heap, UNIQUE_CHECK_PARTIAL,
#if PG_VERSION_NUM >= 140000
								 false,
#endif
								 cr->rri->ri_IndexRelationInfo[0]);
	}
	else
	{
		cr->rri->ri_IndexRelationDescs = store->indexes;
		recheck = IdemExecInsertIndexTuples(cr->rri, slot, cr->estate, &conflict);
		list_free(recheck);
		ResetPerTupleExprContext(cr->estate);
	}

	if (!conflict)
		heap_finish_speculative(store->heap, &tuple->t_self);
	else
		heap_abort_speculative(store->heap, &tuple->t_self);
	IdemSpecTokenRelease(xid, token);
	*tid = tuple->t_self;
	heap_freetuple(tuple);
	return !conflict;
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
	probe->seek.heap = store->heap;
	probe->seek.oper = oper;
	probe->seek.probe = IdemProbeNext;
	probe->seek.conflict = IdemReportUnseen;
	probe->store = store;
	probe->ns = ns;
	probe->key = key;
	InitDirtySnapshot(probe->dirty);
}

/* The seek's probe: what the claim cache found first, then the index */
static bool
IdemProbeNext(IdemRowSeek *seek)
{
	IdemProbe  *probe = (IdemProbe *) seek;

	if (probe->cached)
		probe->cached = false;
	else
		IdemProbeKey(probe->store, probe->ns->id, probe->key, &probe->dirty, probe);
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

/* A claim of an absent key inserts it */
static bool
IdemClaimAbsent(IdemRowSeek *seek)
{
	IdemProbe  *probe = (IdemProbe *) seek;

	return IdemInsertSpeculative(probe->store, probe->ns, probe->key,
								 &probe->row, &probe->inserted);
}

/*
 * A release's vanished test, under a transaction snapshot: the snapshot
 * (with all of our own changes) still sees a live claim that a transaction
 * committed since removed, so a DELETE would fail to serialize.  An expired
 * claim counts as absent either way.
 */
static bool
IdemReleaseVanished(IdemRowSeek *seek)
{
	IdemProbe  *probe = (IdemProbe *) seek;
	SnapshotData snap = *GetTransactionSnapshot();

	snap.curcid = InvalidCommandId;
	IdemProbeKey(probe->store, probe->ns->id, probe->key, &snap, probe);
	return probe->found && !IdemProbeExpired(probe->store, probe->ns, probe);
}

/* A release deletes whatever claim it finds */
static IdemRowAction
IdemReleaseDecide(IdemRowSeek *seek pg_attribute_unused())
{
	return IDEM_ROW_DELETE;
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
	bool		cache_miss;
	IdemRowResult result;

	IdemProbeInit(&probe, store, ns, key, XLTW_InsertIndex);
	probe.row = *row;
	probe.seek.nowait = nowait;
	probe.seek.decide = IdemClaimDecide;
	probe.seek.absent = IdemClaimAbsent;
	probe.hash = IdemClaimCacheHash(store->heap, ns->id, key);

	/* Shortcut for duplicates: where the claim was last seen */
	probe.cached = IdemProbeCached(store, ns->id, key, probe.hash,
								   &probe.dirty, &probe);
	cache_miss = !probe.cached;

	/* Shortcut for new ids: let the index insertion check uniqueness */
	if (cache_miss && IdemMissInsertFirst(ns->id))
	{
		bool		inserted = IdemClaimAbsent(&probe.seek);

		IdemMissRecord(ns->id, !inserted);
		if (inserted)
			goto claimed;
		cache_miss = false;		/* recorded */
	}

	result = IdemRowSeekRun(&probe.seek);
	IdemStatsAdd(ns->stats, IDEM_STAT_WAITS, probe.seek.waits);
	switch (result)
	{
		case IDEM_ROW_BUSY:
			IdemStatsCount(ns->stats, IDEM_STAT_BUSY);
			return IDEM_CLAIM_BUSY;
		case IDEM_ROW_KEPT:
			if (cache_miss)
				IdemMissRecord(ns->id, true);
			IdemClaimCacheRemember(probe.hash, &probe.seek.tid);
			if (check_fp && row->has_fp && probe.has_fp && probe.fp != row->fp)
				IdemReportFingerprintMismatch(ns, key);
			IdemStatsCount(ns->stats, IDEM_STAT_DUPLICATES);
			return IDEM_CLAIM_DUPLICATE;
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
	IdemClaimCacheRemember(probe.hash, &probe.inserted);
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
 * Does a live claim exist for (ns, key)?  Reads as a SELECT in this
 * transaction would, and also sees everything this transaction did itself,
 * including claims made earlier in the same statement.  Never waits.
 */
bool
IdemStoreIsClaimed(IdemStore *store, IdemNamespace *ns, const bytea *key)
{
	SnapshotData snap;
	IdemProbe	probe;

	snap = ActiveSnapshotSet() ? *GetActiveSnapshot() : *GetTransactionSnapshot();
	snap.curcid = InvalidCommandId; /* see all of our own changes */
	probe.found = false;
	if (!IdemProbeCached(store, ns->id, key,
						 IdemClaimCacheHash(store->heap, ns->id, key),
						 &snap, &probe))
		IdemProbeKey(store, ns->id, key, &snap, &probe);
	return probe.found && !IdemProbeExpired(store, ns, &probe);
}

/*
 * Remove the claim on (ns, key).  Waits for an in-flight claimer, as a
 * claim would.  Returns true if a live claim was removed; an expired claim
 * is removed too, but counts as absent.
 */
bool
IdemStoreRelease(IdemStore *store, IdemNamespace *ns, const bytea *key)
{
	IdemProbe	probe;
	IdemRowResult result;

	IdemProbeInit(&probe, store, ns, key, XLTW_Delete);
	probe.seek.decide = IdemReleaseDecide;
	probe.seek.vanished = IdemReleaseVanished;
	result = IdemRowSeekRun(&probe.seek);
	IdemStatsAdd(ns->stats, IDEM_STAT_WAITS, probe.seek.waits);
	if (result != IDEM_ROW_DELETED)
		return false;
	if (probe.seek.ours || !IdemProbeExpired(store, ns, &probe))
	{
		IdemStatsCount(ns->stats, IDEM_STAT_RELEASES);
		return true;
	}
	return false;
}

#if PG_VERSION_NUM >= 140000
/* bsearch comparator: a namespace id against an IdemNamespace */
static int
IdemNamespaceIdCompare(const void *key, const void *elem)
{
	int32		a = *(const int32 *) key;
	int32		b = ((const IdemNamespace *) elem)->id;

	return (a > b) - (a < b);
}

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
	scan = table_beginscan_tidrange(store->heap, &snap, cursor, &maxtid);
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
		ns = bsearch(&nsid, nss, nns, sizeof(IdemNamespace), IdemNamespaceIdCompare);
		if (ns == NULL || IdemNamespaceExpiry(ns, claimed_at) >= store->now)
			continue;

		*cursor = tid;
		result = heap_delete(store->heap, &tid, cid, InvalidSnapshot,
							 false, &tmfd, false);
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
