/*
 * watermark.c
 *	  idem_advance(stream, partition, seq, epoch): per-partition high-water
 *	  marks of ordered streams, advanced in the caller's transaction.
 *
 * A consumer of an ordered partition (a Kafka topic partition, a Kinesis
 * shard, a feed read by LSN or id) needs no row per event: it keeps the
 * highest sequence number it applied, in the same transaction as the
 * business write, and a redelivery at or below the mark is harmless.  The
 * marks are rows of idempotency.watermarks, unique on (stream, partition).
 *
 * The row is found and changed through rowseek.c's loop, as an UPDATE
 * would: a dirty-snapshot probe of the primary key, waiting for whoever is
 * changing the row; a decision on the stable row; and only if the mark (or
 * the epoch) moves, a row lock and an update of seq, epoch and updated_at.
 * While the table is as the install script made it (no trigger, CHECK
 * constraint or index beyond the primary key: checked at each call from
 * the relcache), the update is a heap_update of the version decided on, as
 * UPDATE does it: it waits for a concurrent locker, and a concurrent update
 * sends us back to the probe.  Once a DBA adds any of those, the row is
 * locked first and updated through the executor's simple update path, so
 * that they all see an UPDATE of those columns.  A concurrent advance of the same pair therefore
 * waits for the first and answers against the mark it committed (in READ
 * COMMITTED; a serialization failure under a transaction snapshot).
 *
 * A pair without a row is inserted under a lock on the pair's hash (an
 * advisory tag of our own), taken before probing again and released once
 * the row is in: a second first advance waits for the tag, then finds the
 * first's row and waits for its transaction, as for any row in flight.
 *
 * Fencing: with an epoch, a call whose epoch is below the highest recorded
 * for the pair raises ERRCODE_IDEM_FENCED (a zombie consumer that lost its
 * partition); a higher epoch is recorded, even by a redelivery.  Once a
 * pair has an epoch, a call without one is fenced too, so that a caller
 * that does not take part in fencing cannot move a fenced partition.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type_d.h"
#include "commands/trigger.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_relation.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "store/store.h"

PG_FUNCTION_INFO_V1(idem_advance);

/* Columns of idempotency.watermarks */
#define IDEM_WM_STREAM		1
#define IDEM_WM_PARTITION	2
#define IDEM_WM_SEQ			3
#define IDEM_WM_EPOCH		4
#define IDEM_WM_UPDATED_AT	5
#define IDEM_WM_NATTS		5
/* Columns the table may have, dropped ones included (see IdemWmCheckLayout) */
#define IDEM_WM_MAX_ATTS	64

/* Longest stream name, in bytes */
#define IDEM_WM_MAX_STREAM	256

/* field4 of the advisory tag a first advance of a pair takes */
#define IDEM_WM_LOCK_FIELD4	0x1df

/* One advance: the seek loop's state */
typedef struct IdemWmSeek
{
	IdemRowSeek seek;			/* first: the callbacks cast it back */
	Relation	index;			/* watermarks_pkey */
	text	   *stream;
	int32		partition;
	int64		seq;
	bool		has_epoch;
	int64		epoch;
	SnapshotData dirty;
	uint64		hash;			/* of (stream, partition), for the TID cache */
	ItemPointerData root;		/* the found row's root TID (its index entry's) */
	bool		key_locked;		/* the pair's advisory tag is held */
	LOCKTAG		key_tag;		/* that tag */
	bool		predicate_locked;	/* SERIALIZABLE: the snapshot read done */
	bool		inserted;		/* absent: we inserted the pair's row */
	/* the decision on the row last found */
	bool		plain;			/* the table is as installed: IdemWmPlain */
	bool		direct;			/* update the version found without locking it */
	bool		advances;		/* seq is above its mark */
	bool		new_epoch;		/* epoch is above its recorded one */
} IdemWmSeek;

/*
 * Where each backend last found a pair: the root TID of its row's HOT
 * chain (what its primary-key entry points at), so that a consumer
 * advancing the same partitions over and over follows the chain instead of
 * descending the index.  A hint only: a candidate counts only if the chain
 * holds a version the dirty snapshot sees with exactly this stream and
 * partition; anything else falls back to the index.
 */
#define IDEM_WM_CACHE_SIZE	4096	/* a power of two: 96 kB a backend */

typedef struct IdemWmCacheEntry
{
	uint64		hash;			/* of (stream, partition); 0: empty */
	Oid			relid;
	Oid			relnode;		/* its file: TRUNCATE and VACUUM FULL change it */
	ItemPointerData root;
} IdemWmCacheEntry;

static IdemWmCacheEntry idem_wm_cache[IDEM_WM_CACHE_SIZE];

/* Validate the arguments; returns the stream */
static text *
IdemWmArgs(FunctionCallInfo fcinfo, IdemWmSeek *ws)
{
	text	   *stream = DatumGetTextPP(IdemArgNotNull(fcinfo, 0, "stream"));
	int			len = VARSIZE_ANY_EXHDR(stream);

	IdemValidateName("stream", VARDATA_ANY(stream), len, IDEM_WM_MAX_STREAM);
	ws->partition = DatumGetInt32(IdemArgNotNull(fcinfo, 1, "partition"));
	if (ws->partition < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("partition must not be negative"),
				 errdetail("The partition is %d.", ws->partition)));
	ws->seq = DatumGetInt64(IdemArgNotNull(fcinfo, 2, "sequence number"));
	if (ws->seq < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("sequence number must not be negative"),
				 errdetail("The sequence number is " INT64_FORMAT ".", ws->seq)));
	ws->hash = hash_bytes_extended((const unsigned char *) VARDATA_ANY(stream), len,
								   (uint64) (uint32) ws->partition);
	if (ws->hash == 0)
		ws->hash = 1;			/* 0 marks an empty cache entry */
	ws->has_epoch = PG_NARGS() > 3 && !PG_ARGISNULL(3);
	ws->epoch = ws->has_epoch ? PG_GETARG_INT64(3) : 0;
	if (ws->epoch < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("epoch must not be negative"),
				 errdetail("The epoch is " INT64_FORMAT ".", ws->epoch)));
	return stream;
}

/* The pair's row version under snapshot, into the seek's slot */
static bool
IdemWmIndexScan(IdemWmSeek *ws, Snapshot snapshot)
{
	ScanKeyData skeys[2];
	IndexScanDesc scan;
	bool		found;

	ScanKeyInit(&skeys[0], 1, BTEqualStrategyNumber, F_TEXTEQ,
				PointerGetDatum(ws->stream));
	skeys[0].sk_collation = ws->index->rd_indcollation[0];
	ScanKeyInit(&skeys[1], 2, BTEqualStrategyNumber, F_INT4EQ,
				Int32GetDatum(ws->partition));
	scan = IdemIndexBeginScan(ws->seek.heap, ws->index, snapshot, 2, 0);
	index_rescan(scan, skeys, 2, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, ws->seek.lockslot);
	if (found)
		ws->root = scan->xs_heaptid;
	index_endscan(scan);
	return found;
}

/* The cache entry of the seek's pair */
static inline IdemWmCacheEntry *
IdemWmCacheSlot(IdemWmSeek *ws)
{
	return &idem_wm_cache[ws->hash & (IDEM_WM_CACHE_SIZE - 1)];
}

/* Remember (or, with an invalid TID, forget) where the pair's row is */
static void
IdemWmCacheSet(IdemWmSeek *ws, ItemPointer root)
{
	IdemWmCacheEntry *e = IdemWmCacheSlot(ws);

	if (!ItemPointerIsValid(root))
	{
		if (e->hash == ws->hash)
			e->hash = 0;
		return;
	}
	e->hash = ws->hash;
	e->relid = RelationGetRelid(ws->seek.heap);
	e->relnode = (Oid) IdemRelFileNumber(ws->seek.heap);
	e->root = *root;
}

/*
 * The probe through the cache: the version of the cached chain that the
 * dirty snapshot sees, if it is the pair's, into the seek's slot
 */
static bool
IdemWmProbeCached(IdemWmSeek *ws)
{
	IdemWmCacheEntry *e = IdemWmCacheSlot(ws);
	Relation	rel = ws->seek.heap;
	TupleDesc	desc = RelationGetDescr(rel);
	ItemPointerData htid;
	HeapTupleData tuple;
	Buffer		buffer;
	bool		all_dead;
	bool		match = false;

	if (e->hash != ws->hash || e->relid != RelationGetRelid(rel) ||
		e->relnode != (Oid) IdemRelFileNumber(rel) ||
		!IdemClaimCacheBlockExists(rel, ItemPointerGetBlockNumber(&e->root)))
		return false;
	htid = e->root;
	buffer = ReadBuffer(rel, ItemPointerGetBlockNumber(&htid));
	/* prune the page as an index fetch would, so that updates stay HOT */
	IdemHeapPagePruneOpt(rel, buffer);
	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	if (heap_hot_search_buffer(&htid, rel, buffer, &ws->dirty, &tuple, &all_dead, true))
	{
		bool		isnull;
		Datum		d = heap_getattr(&tuple, IDEM_WM_PARTITION, desc, &isnull);

		if (!isnull && DatumGetInt32(d) == ws->partition)
		{
			Datum		sd = heap_getattr(&tuple, IDEM_WM_STREAM, desc, &isnull);
			text	   *stored = (text *) DatumGetPointer(sd);

			/* a compressed or external name (written by hand): ask the index */
			match = !isnull && !VARATT_IS_EXTERNAL(stored) && !VARATT_IS_COMPRESSED(stored) &&
				VARSIZE_ANY_EXHDR(stored) == VARSIZE_ANY_EXHDR(ws->stream) &&
				memcmp(VARDATA_ANY(stored), VARDATA_ANY(ws->stream),
					   VARSIZE_ANY_EXHDR(ws->stream)) == 0;
		}
	}
	if (match)
	{
		BufferHeapTupleTableSlot *bslot = (BufferHeapTupleTableSlot *) ws->seek.lockslot;

		/* as an index fetch stores it: the header in the slot's own storage */
		ExecClearTuple(ws->seek.lockslot);
		bslot->base.tupdata = tuple;
		ExecStoreBufferHeapTuple(&bslot->base.tupdata, ws->seek.lockslot, buffer);
		IdemRowSeekNoteDirty(&ws->seek, &ws->dirty, &bslot->base.tupdata, buffer);
		ws->root = e->root;
	}
	LockBuffer(buffer, BUFFER_LOCK_UNLOCK);
	ReleaseBuffer(buffer);
	return match;
}

/*
 * The seek's probe: the pair's first row version under a dirty snapshot
 * (under SERIALIZABLE, read through the transaction snapshot first, for
 * the predicate locks the scan of an UPDATE takes)
 */
static bool
IdemWmProbe(IdemRowSeek *seek)
{
	IdemWmSeek *ws = (IdemWmSeek *) seek;

	/* SERIALIZABLE: read the pair through the snapshot once, for SSI */
	if (IsolationIsSerializable() && !ws->predicate_locked)
	{
		(void) IdemWmIndexScan(ws, GetActiveSnapshot());
		ws->predicate_locked = true;
	}
	if (IdemWmProbeCached(ws))
		return true;
	if (!IdemWmIndexScan(ws, &ws->dirty))
		return false;
	IdemRowSeekNoteSlot(seek, &ws->dirty, seek->lockslot);
	return true;
}

/* The seek's vanished test (rowseek.c): the row under snap */
static bool
IdemWmVanished(IdemRowSeek *seek, Snapshot snap)
{
	return IdemWmIndexScan((IdemWmSeek *) seek, snap);
}

/* A zombie's call: refused */
pg_noreturn static void
IdemWmFenced(IdemWmSeek *ws, bool has_stored, int64 stored)
{
	char	   *stream = text_to_cstring(ws->stream);

	if (!ws->has_epoch)
		ereport(ERROR,
				(errcode(ERRCODE_IDEM_FENCED),
				 errmsg("partition %d of stream \"%s\" is fenced", ws->partition, stream),
				 errdetail("The partition has epoch " INT64_FORMAT "; this call gives none.", stored),
				 errhint("Pass the consumer's epoch to idem_advance().")));
	ereport(ERROR,
			(errcode(ERRCODE_IDEM_FENCED),
			 errmsg("partition %d of stream \"%s\" is fenced", ws->partition, stream),
			 has_stored ?
			 errdetail("This call's epoch " INT64_FORMAT " is below the partition's epoch " INT64_FORMAT ".",
					   ws->epoch, stored) : 0,
			 errhint("A consumer with a newer epoch owns the partition: stop consuming it.")));
}

/* The seek's decision: does the mark, or the epoch, move? */
static IdemRowAction
IdemWmDecide(IdemRowSeek *seek)
{
	IdemWmSeek *ws = (IdemWmSeek *) seek;
	bool		isnull;
	int64		mark = DatumGetInt64(slot_getattr(seek->lockslot, IDEM_WM_SEQ, &isnull));
	Datum		e = slot_getattr(seek->lockslot, IDEM_WM_EPOCH, &isnull);

	if (!isnull)
	{
		int64		stored = DatumGetInt64(e);

		if (!ws->has_epoch || ws->epoch < stored)
			IdemWmFenced(ws, true, stored);
		ws->new_epoch = ws->epoch > stored;
	}
	else
		ws->new_epoch = ws->has_epoch;
	ws->advances = ws->seq > mark;
	if (!ws->advances && !ws->new_epoch)
		return IDEM_ROW_KEEP;
	/*
	 * A plain table is updated as UPDATE updates a row: heap_update of the
	 * version decided on, which waits for a concurrent locker and reports a
	 * concurrent update (then the caller seeks again).  Otherwise the row
	 * is locked first, for the executor's update path.
	 */
	ws->direct = ws->plain;
	return ws->direct ? IDEM_ROW_KEEP : IDEM_ROW_LOCK;
}

/*
 * The seek's action on an absent pair: take the pair's lock and look
 * again, then insert its row
 */
static bool
IdemWmAbsent(IdemRowSeek *seek)
{
	IdemWmSeek *ws = (IdemWmSeek *) seek;
	int			natts = RelationGetDescr(seek->heap)->natts;
	Datum		values[IDEM_WM_MAX_ATTS];
	bool		nulls[IDEM_WM_MAX_ATTS];

	if (!ws->key_locked)
	{
		SET_LOCKTAG_ADVISORY(ws->key_tag, MyDatabaseId, (uint32) (ws->hash >> 32),
							 (uint32) ws->hash, IDEM_WM_LOCK_FIELD4);
		(void) LockAcquire(&ws->key_tag, ExclusiveLock, false, false);
		ws->key_locked = true;
		return false;			/* look again, under the lock */
	}

	/* columns a DBA added and dropped again are null, as in any new row */
	memset(values, 0, sizeof(Datum) * natts);
	memset(nulls, true, sizeof(bool) * natts);
	memset(nulls, false, sizeof(bool) * IDEM_WM_NATTS);
	values[IDEM_WM_STREAM - 1] = PointerGetDatum(ws->stream);
	values[IDEM_WM_PARTITION - 1] = Int32GetDatum(ws->partition);
	values[IDEM_WM_SEQ - 1] = Int64GetDatum(ws->seq);
	values[IDEM_WM_EPOCH - 1] = Int64GetDatum(ws->epoch);
	nulls[IDEM_WM_EPOCH - 1] = !ws->has_epoch;
	values[IDEM_WM_UPDATED_AT - 1] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());

	IdemRowWriteInsert(seek->heap, values, nulls, &ws->root);	/* a new chain */
	ws->inserted = true;
	return true;
}

/*
 * Does the table have nothing beyond what the install script gave it: no
 * trigger, no CHECK constraint or generated column, no index but the
 * primary key?  Then an update needs no executor: see IdemWmUpdate.
 */
static bool
IdemWmPlain(Relation rel)
{
	TupleConstr *constr = RelationGetDescr(rel)->constr;
	List	   *indexes;
	bool		plain;

	if (rel->trigdesc != NULL ||
		(constr != NULL && (constr->num_check > 0 || constr->has_generated_stored)))
		return false;
	indexes = RelationGetIndexList(rel);
	plain = list_length(indexes) == 1;
	list_free(indexes);
	return plain;
}

/*
 * The update of a plain table: heap_update of the version decided on, HOT when
 * the page has room (no indexed column changes), else a new primary-key
 * entry, inserted as an UPDATE inserts it (a unique check that finds only
 * the version we replaced, and the indexUnchanged hint).
 */
static TM_Result
IdemWmUpdatePlain(IdemWmSeek *ws, Datum *values, bool *nulls)
{
	Relation	rel = ws->seek.heap;
	HeapTuple	newtup = heap_form_tuple(RelationGetDescr(rel), values, nulls);
	ItemPointerData otid = ws->seek.lockslot->tts_tid;
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	TM_Result	result;

	/* as an UPDATE: refused where a publication needs a replica identity */
	CheckCmdReplicaIdentity(rel, CMD_UPDATE);
	/* a command id of our own, as rowseek.c writes under */
	CommandCounterIncrement();
	result = IdemHeapUpdate(rel, &otid, newtup, GetCurrentCommandId(true), InvalidSnapshot,
							true, &tmfd, &lockmode);
	if (result != TM_Ok)
	{
		heap_freetuple(newtup);
		if (result == TM_Updated || result == TM_Deleted)
			return result;		/* changed since the probe: seek again */
		elog(ERROR, "unexpected heap_update result %d on a watermark", (int) result);
	}
	if (!HeapTupleIsHeapOnly(newtup))
	{
		Datum		ivalues[2];
		bool		inulls[2] = {false, false};

		ws->root = newtup->t_self;	/* a new chain, with its own index entry */

		ivalues[0] = values[IDEM_WM_STREAM - 1];
		ivalues[1] = values[IDEM_WM_PARTITION - 1];
		(void) IdemIndexInsert(ws->index, ivalues, inulls, &newtup->t_self, rel,
							   UNIQUE_CHECK_YES, true, BuildIndexInfo(ws->index));
	}
	heap_freetuple(newtup);
	return TM_Ok;
}

/*
 * Write the new mark and epoch into the row in the seek's slot: locked, or
 * (direct) the version decided on.  TM_Updated or TM_Deleted: a direct
 * update found the row changed since; seek again.
 */
static TM_Result
IdemWmUpdate(IdemWmSeek *ws)
{
	TupleTableSlot *oldslot = ws->seek.lockslot;
	Relation	rel = ws->seek.heap;
	int			natts = RelationGetDescr(rel)->natts;
	Datum		values[IDEM_WM_MAX_ATTS];
	bool		nulls[IDEM_WM_MAX_ATTS];
	Bitmapset  *cols = NULL;

	slot_getallattrs(oldslot);
	memcpy(values, oldslot->tts_values, sizeof(Datum) * natts);
	memcpy(nulls, oldslot->tts_isnull, sizeof(bool) * natts);
	if (ws->advances)
		values[IDEM_WM_SEQ - 1] = Int64GetDatum(ws->seq);
	if (ws->new_epoch)
	{
		values[IDEM_WM_EPOCH - 1] = Int64GetDatum(ws->epoch);
		nulls[IDEM_WM_EPOCH - 1] = false;
	}
	values[IDEM_WM_UPDATED_AT - 1] =
		TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());

	if (ws->plain)
		return IdemWmUpdatePlain(ws, values, nulls);

	/* the columns the UPDATE names, for per-column triggers and index hints */
	if (ws->advances)
		cols = bms_add_member(cols, IDEM_WM_SEQ - FirstLowInvalidHeapAttributeNumber);
	if (ws->new_epoch)
		cols = bms_add_member(cols, IDEM_WM_EPOCH - FirstLowInvalidHeapAttributeNumber);
	cols = bms_add_member(cols, IDEM_WM_UPDATED_AT - FirstLowInvalidHeapAttributeNumber);
	/* a BEFORE trigger that returned NULL skipped it: nothing moved */
	if (!IdemRowWriteUpdate(rel, cols, oldslot, values, nulls, NULL))
		ws->advances = false;
	ItemPointerSetInvalid(&ws->root); /* HOT or not, the executor does not say */
	return TM_Ok;
}

/* The serialization failure of an advance under a transaction snapshot */
pg_noreturn static void
IdemWmSerializationFailure(IdemRowSeek *seek pg_attribute_unused())
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access due to concurrent advance")));
}

/*
 * The table must still be the install script's: a heap whose first five
 * columns are ours, of their types, and whose others (up to
 * IDEM_WM_MAX_ATTS) were dropped.  Anything else (an added column, a
 * changed type, another access method) is refused, since an advance writes
 * whole rows of that shape.
 */
static void
IdemWmCheckLayout(Relation rel)
{
	static const Oid types[IDEM_WM_NATTS] = {TEXTOID, INT4OID, INT8OID, INT8OID, TIMESTAMPTZOID};
	TupleDesc	desc = RelationGetDescr(rel);
	bool		ok = desc->natts >= IDEM_WM_NATTS && desc->natts <= IDEM_WM_MAX_ATTS &&
		rel->rd_tableam == GetHeapamTableAmRoutine();
	int			i;

	for (i = 0; ok && i < desc->natts; i++)
		ok = i < IDEM_WM_NATTS ?
			!TupleDescAttr(desc, i)->attisdropped && TupleDescAttr(desc, i)->atttypid == types[i] :
			TupleDescAttr(desc, i)->attisdropped;
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idempotency.watermarks is not as the extension made it"),
				 errdetail("idem_advance() writes rows of (stream text, partition integer, seq bigint, epoch bigint, updated_at timestamptz) into a heap table."),
				 errhint("Undo the change, or re-create the extension.")));
}

/*
 * Open idempotency.watermarks for an advance: it must exist (extension
 * version 1.1), the caller must hold SELECT, INSERT and UPDATE on it (as
 * INSERT ... ON CONFLICT DO UPDATE ... WHERE would need), and its primary
 * key must be usable.  Row-level security is refused, not bypassed.
 */
static Relation
IdemWmOpen(Relation *index)
{
	Oid			relid = IdemWatermarksRelation();
	Relation	rel;
	Oid			pk;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idem_advance() needs version 1.1 of the idempotency extension"),
				 errhint("Run ALTER EXTENSION idempotency UPDATE.")));
	rel = table_open(relid, RowExclusiveLock);
	/* after the lock, whose invalidations carry any REVOKE committed since */
	IdemCheckWatermarksPrivilege(relid);
	IdemWmCheckLayout(rel);
	if (rel->rd_rel->relrowsecurity)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("idem_advance() does not support row-level security on idempotency.watermarks"),
				 errhint("Run ALTER TABLE idempotency.watermarks DISABLE ROW LEVEL SECURITY.")));
	pk = IdemRelationGetPrimaryKeyIndex(rel);
	*index = OidIsValid(pk) ? index_open(pk, RowExclusiveLock) : NULL;
	if (*index == NULL || !(*index)->rd_index->indisvalid ||
		!(*index)->rd_index->indisready || (*index)->rd_index->indnatts != 2 ||
		(*index)->rd_index->indkey.values[0] != IDEM_WM_STREAM ||
		(*index)->rd_index->indkey.values[1] != IDEM_WM_PARTITION ||
		(*index)->rd_rel->relam != BTREE_AM_OID)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the primary key of idempotency.watermarks is missing or not usable"),
				 errhint("Re-create it: ALTER TABLE idempotency.watermarks ADD PRIMARY KEY (stream, partition).")));
	return rel;
}

/*
 * idem_advance(stream text, partition int, seq bigint, epoch bigint)
 * returns boolean
 *
 * True if seq is above the mark of (stream, partition), or the pair has no
 * mark yet: the mark moves to seq with the caller's transaction.  False for
 * a redelivery (seq at or below the mark).  With epoch, fenced (ID005)
 * below the pair's highest epoch; a higher one is recorded.
 */
Datum
idem_advance(PG_FUNCTION_ARGS)
{
	IdemWmSeek	ws;
	Relation	rel;
	bool		result = false;

	memset(&ws, 0, sizeof(ws));
	ws.stream = IdemWmArgs(fcinfo, &ws);
	IdemCheckWritable("idem_advance()");
	rel = IdemWmOpen(&ws.index);

	ws.seek.heap = rel;
	ws.seek.oper = XLTW_Update;
	ws.seek.probe = IdemWmProbe;
	ws.seek.decide = IdemWmDecide;
	ws.seek.absent = IdemWmAbsent;
	ws.seek.vanished = IdemWmVanished;
	ws.seek.conflict = IdemWmSerializationFailure;
	ws.seek.lockslot = table_slot_create(rel, NULL);
	InitDirtySnapshot(ws.dirty);

	ws.plain = IdemWmPlain(rel);

	for (;;)
	{
		IdemRowResult r;

		ws.direct = false;
		r = IdemRowSeekRun(&ws.seek);
		if (r == IDEM_ROW_ABSENT)
			result = ws.inserted;
		else if (r == IDEM_ROW_LOCKED || (r == IDEM_ROW_KEPT && ws.direct))
		{
			if (IdemWmUpdate(&ws) != TM_Ok)
			{
				/* updated or dropped since the probe, as UPDATE would see */
				if (IsolationUsesXactSnapshot())
					IdemWmSerializationFailure(&ws.seek);
				continue;
			}
			result = ws.advances;
		}
		break;					/* else kept: a redelivery */
	}
	/* where the pair's chain starts, for the next advance of this backend */
	IdemWmCacheSet(&ws, &ws.root);

	/*
	 * The pair's tag only orders first advances between their probe and
	 * their insertion: once our row is in, a concurrent first advance finds
	 * it and waits for our transaction.  So it is released now, not held
	 * to the end of the transaction (a batch may create many pairs).
	 */
	if (ws.key_locked)
		LockRelease(&ws.key_tag, ExclusiveLock, false);

	ExecDropSingleTupleTableSlot(ws.seek.lockslot);
	index_close(ws.index, NoLock);
	table_close(rel, NoLock);
	PG_RETURN_BOOL(result);
}
