/*
 * cas.c
 *	  idem_cas_row(rel, key, target, expected_version): a compare-and-set
 *	  of a bound status column, checked against its state machine.
 *
 * The row is found through the table's single-column primary key and
 * updated natively, with no SQL text: a dirty-snapshot probe of the key
 * (waiting for any transaction modifying the row, as UPDATE does), a
 * decision against the machine, and only if the move is legal a row lock
 * and an update through ExecSimpleRelationUpdate, the executor entry point
 * logical replication uses.  So row triggers fire, constraints are checked
 * and indexes maintained as for UPDATE; statement triggers do not fire.
 *
 * Outcomes: 'applied' (moved, version + 1), 'already' (at target: nothing
 * written), 'rejected' (no edge: nothing written), 'stale' (the version
 * differs from expected_version), 'missing' (no row).
 *
 * Concurrent CASes serialize on the row lock: the second waits for the
 * first, then decides against the row it left.  In READ COMMITTED the
 * decision is made on the latest committed version, like UPDATE after
 * EvalPlanQual; in REPEATABLE READ a version committed after the snapshot
 * gives a serialization failure.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "executor/executor.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_coerce.h"
#include "parser/parse_relation.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include "binding.h"
#include "catalog.h"
#include "idempotency.h"
#include "machine.h"

PG_FUNCTION_INFO_V1(idem_cas_row);

/* Check that the caller may read the key and status and update the status */
static void
IdemCasCheckPrivileges(Relation rel, IdemBinding *b)
{
	Oid			relid = RelationGetRelid(rel);
	Oid			userid = GetUserId();
	AttrNumber	cols[3];
	int			ncols = 0;
	int			i;
	bool		ok = true;

	if (b->acl_user == userid && b->acl_ok)
		return;
	cols[ncols++] = b->status_attno;
	cols[ncols++] = b->pk_attno;
	if (b->version_attno != InvalidAttrNumber)
		cols[ncols++] = b->version_attno;

	if (pg_class_aclcheck(relid, userid, ACL_SELECT) != ACLCHECK_OK)
		for (i = 0; i < ncols && ok; i++)
			ok = pg_attribute_aclcheck(relid, cols[i], userid, ACL_SELECT) == ACLCHECK_OK;
	if (ok && pg_class_aclcheck(relid, userid, ACL_UPDATE) != ACLCHECK_OK)
	{
		ok = pg_attribute_aclcheck(relid, b->status_attno, userid, ACL_UPDATE) == ACLCHECK_OK;
		if (ok && b->version_attno != InvalidAttrNumber)
			ok = pg_attribute_aclcheck(relid, b->version_attno, userid, ACL_UPDATE) == ACLCHECK_OK;
	}
	if (!ok)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, RelationGetRelationName(rel));
	if (check_enable_rls(relid, InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("idem_cas_row() does not support tables with row-level security"),
				 errdetail("Table \"%s\" has row-level security enabled for this user.",
						   RelationGetRelationName(rel))));
	b->acl_user = userid;
	b->acl_ok = true;
}

/* The key argument converted to the primary key column's type */
static Datum
IdemCasKey(FunctionCallInfo fcinfo, Relation rel, IdemBinding *b)
{
	Oid			argtype = get_fn_expr_argtype(fcinfo->flinfo, 1);
	Datum		key = PG_GETARG_DATUM(1);
	CoercionPathType path;
	Oid			funcid;

	if (argtype == b->pk_type)
		return key;
	if (argtype == UNKNOWNOID)
		argtype = TEXTOID;
	path = find_coercion_pathway(b->pk_type, argtype, COERCION_ASSIGNMENT, &funcid);
	switch (path)
	{
		case COERCION_PATH_RELABELTYPE:
			return key;
		case COERCION_PATH_FUNC:
			return OidFunctionCall1(funcid, key);
		default:
			if (argtype == TEXTOID || argtype == VARCHAROID)
			{
				Oid			typinput;
				Oid			typioparam;

				getTypeInputInfo(b->pk_type, &typinput, &typioparam);
				return OidInputFunctionCall(typinput, TextDatumGetCString(key),
											typioparam, -1);
			}
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("key of type %s does not match the primary key of \"%s\"",
							format_type_be(argtype), RelationGetRelationName(rel)),
					 errdetail("Column \"%s\" is of type %s.",
							   get_attname(RelationGetRelid(rel), b->pk_attno, false),
							   format_type_be(b->pk_type)),
					 errhint("Cast the key to %s.", format_type_be(b->pk_type))));
	}
	return (Datum) 0;			/* not reached */
}

/* The integer value of the version column in slot; NULL counts as 0 */
static int64
IdemCasVersion(IdemBinding *b, TupleTableSlot *slot)
{
	bool		isnull;
	Datum		d = slot_getattr(slot, b->version_attno, &isnull);

	if (isnull)
		return 0;
	switch (b->version_type)
	{
		case INT2OID:
			return DatumGetInt16(d);
		case INT4OID:
			return DatumGetInt32(d);
		default:
			return DatumGetInt64(d);
	}
}

/* A version value of the column's type */
static Datum
IdemCasVersionDatum(IdemBinding *b, int64 v)
{
	switch (b->version_type)
	{
		case INT2OID:
			if (v > PG_INT16_MAX)
				ereport(ERROR,
						(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
						 errmsg("smallint out of range")));
			return Int16GetDatum((int16) v);
		case INT4OID:
			if (v > PG_INT32_MAX)
				ereport(ERROR,
						(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
						 errmsg("integer out of range")));
			return Int32GetDatum((int32) v);
		default:
			return Int64GetDatum(v);
	}
}

/*
 * Probe the primary key for key under a dirty snapshot; stores the first
 * visible row version in slot.  Returns false if there is none.
 */
static bool
IdemCasProbe(Relation rel, Relation index, IdemBinding *b, Datum key,
			 Snapshot dirty, TupleTableSlot *slot)
{
	ScanKeyData skey;
	IndexScanDesc scan;
	bool		found;

	ScanKeyEntryInitialize(&skey, 0, 1, BTEqualStrategyNumber, InvalidOid,
						   b->pk_collation, b->pk_eqproc, key);
	scan = index_beginscan(rel, index, dirty, 1, 0);
	index_rescan(scan, &skey, 1, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	index_endscan(scan);
	return found;
}

/*
 * Write the new status (and version) into the locked row in oldslot,
 * through the executor's simple update path.  Returns false if a BEFORE
 * trigger cancelled the update.
 */
static bool
IdemCasUpdate(Relation rel, IdemBinding *b, TupleTableSlot *oldslot,
			  Datum status, bool bump, int64 version)
{
	EState	   *estate = CreateExecutorState();
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	ResultRelInfo *rri = makeNode(ResultRelInfo);
	EPQState	epqstate;
	TupleTableSlot *newslot;
	int			natts = RelationGetDescr(rel)->natts;
	bool		updated;

	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = RELKIND_RELATION;
	rte->rellockmode = RowExclusiveLock;
#if PG_VERSION_NUM >= 160000
	{
		List	   *perminfos = NIL;

		addRTEPermissionInfo(&perminfos, rte);
		ExecInitRangeTable(estate, list_make1(rte), perminfos);
	}
#else
	ExecInitRangeTable(estate, list_make1(rte));
#endif
	InitResultRelInfo(rri, rel, 1, NULL, 0);
#if PG_VERSION_NUM >= 140000
	estate->es_opened_result_relations = lappend(estate->es_opened_result_relations, rri);
#else
	estate->es_result_relations = rri;
	estate->es_num_result_relations = 1;
	estate->es_result_relation_info = rri;
#endif
	estate->es_output_cid = GetCurrentCommandId(true);
	estate->es_snapshot = GetActiveSnapshot();
	AfterTriggerBeginQuery();
#if PG_VERSION_NUM >= 160000
	EvalPlanQualInit(&epqstate, estate, NULL, NIL, -1, NIL);
#else
	EvalPlanQualInit(&epqstate, estate, NULL, NIL, -1);
#endif
	ExecOpenIndices(rri, false);

	newslot = table_slot_create(rel, &estate->es_tupleTable);
	slot_getallattrs(oldslot);
	ExecClearTuple(newslot);
	memcpy(newslot->tts_values, oldslot->tts_values, natts * sizeof(Datum));
	memcpy(newslot->tts_isnull, oldslot->tts_isnull, natts * sizeof(bool));
	newslot->tts_values[b->status_attno - 1] = status;
	newslot->tts_isnull[b->status_attno - 1] = false;
	if (bump)
	{
		newslot->tts_values[b->version_attno - 1] = IdemCasVersionDatum(b, version + 1);
		newslot->tts_isnull[b->version_attno - 1] = false;
	}
	ExecStoreVirtualTuple(newslot);
	ItemPointerSetInvalid(&newslot->tts_tid);
	EvalPlanQualSetSlot(&epqstate, newslot);

#if PG_VERSION_NUM >= 140000
	ExecSimpleRelationUpdate(rri, estate, &epqstate, oldslot, newslot);
#else
	ExecSimpleRelationUpdate(estate, &epqstate, oldslot, newslot);
#endif
	/* the update sets the slot's TID; a BEFORE trigger may have skipped it */
	updated = ItemPointerIsValid(&newslot->tts_tid);

	ExecCloseIndices(rri);
	EvalPlanQualEnd(&epqstate);
	AfterTriggerEndQuery(estate);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
	return updated;
}

/* The serialization failure of a REPEATABLE READ CAS */
static void
IdemCasSerializationFailure(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access due to concurrent update")));
}

/*
 * idem_cas_row(rel regclass, key anyelement, target text,
 *				expected_version bigint) returns text
 *
 * The row compare-and-set; the pure checker is idem_cas_status, in
 * machine.c.
 */
Datum
idem_cas_row(PG_FUNCTION_ARGS)
{
	Oid			relid = DatumGetObjectId(IdemArgNotNull(fcinfo, 0, "table"));
	text	   *target;
	bool		have_expected = PG_NARGS() > 3 && !PG_ARGISNULL(3);
	int64		expected = have_expected ? PG_GETARG_INT64(3) : 0;
	Relation	rel;
	Relation	index;
	IdemBinding *b;
	IdemMachine *m;
	Datum		key;
	Datum		target_datum;
	int			to;
	SnapshotData dirty;
	TupleTableSlot *slot;
	IdemCasOutcome outcome;

	(void) IdemArgNotNull(fcinfo, 1, "key");
	target = DatumGetTextPP(IdemArgNotNull(fcinfo, 2, "target state"));
	IdemCheckWritable("idem_cas_row()");

	rel = IdemOpenRelationArg(relid, RowExclusiveLock);
	b = IdemBindingGet(relid, false);
	if (!OidIsValid(b->pk_index))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" has no single-column primary key",
						RelationGetRelationName(rel)),
				 errdetail("idem_cas_row() finds rows through a primary key on one column.")));
	if (have_expected && b->version_attno == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("table \"%s\" has no version column bound",
						RelationGetRelationName(rel)),
				 errhint("Bind a version column with idem_machine_bind(), or pass no expected version.")));
	IdemCasCheckPrivileges(rel, b);

	m = IdemMachineGet(b->machine, strlen(b->machine));
	to = IdemMachineRequireState(m, VARDATA_ANY(target), VARSIZE_ANY_EXHDR(target));
	target_datum = IdemBindingStatusDatum(b, text_to_cstring(target));
	key = IdemCasKey(fcinfo, rel, b);

	index = index_open(b->pk_index, RowExclusiveLock);
	slot = table_slot_create(rel, NULL);
	InitDirtySnapshot(dirty);

	for (;;)
	{
		TransactionId xwait;
		bool		isnull;
		Datum		status;
		int			from;
		int64		version = 0;
		TM_FailureData tmfd;
		TM_Result	result;

		CHECK_FOR_INTERRUPTS();

		if (!IdemCasProbe(rel, index, b, key, &dirty, slot))
		{
			outcome = IDEM_CAS_MISSING;
			break;
		}

		/* someone is inserting, updating or deleting the row: wait */
		xwait = TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;
		if (TransactionIdIsValid(xwait))
		{
			XactLockTableWait(xwait, rel, &slot->tts_tid, XLTW_Update);
			continue;
		}
		if (IsolationUsesXactSnapshot())
		{
			HeapTuple	tuple = ExecFetchSlotHeapTuple(slot, false, NULL);
			BufferHeapTupleTableSlot *bslot = (BufferHeapTupleTableSlot *) slot;
			bool		visible;

			LockBuffer(bslot->buffer, BUFFER_LOCK_SHARE);
			visible = HeapTupleSatisfiesVisibility(tuple, GetTransactionSnapshot(),
												   bslot->buffer);
			LockBuffer(bslot->buffer, BUFFER_LOCK_UNLOCK);
			if (!visible)
				IdemCasSerializationFailure();
		}

		status = slot_getattr(slot, b->status_attno, &isnull);
		if (isnull)
			from = -1;
		else
		{
			char	   *name = IdemBindingStatusText(b, status);

			from = IdemMachineRequireState(m, name, strlen(name));
		}
		if (b->version_attno != InvalidAttrNumber)
			version = IdemCasVersion(b, slot);

		if (have_expected && version != expected)
		{
			outcome = IDEM_CAS_STALE;
			break;
		}
		if (from < 0)
			outcome = m->initial[to] ? IDEM_CAS_APPLIED : IDEM_CAS_REJECTED;
		else
			outcome = IdemMachineStep(m, from, to);
		if (outcome != IDEM_CAS_APPLIED)
			break;

		/* A legal move: lock this row version, then update it */
		if (TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(ExecFetchSlotHeapTuple(slot, false, NULL)->t_data)))
			CommandCounterIncrement();	/* our own row from this command */
		result = table_tuple_lock(rel, &slot->tts_tid, GetActiveSnapshot(), slot,
								  GetCurrentCommandId(false), LockTupleNoKeyExclusive,
								  LockWaitBlock, 0, &tmfd);
		if (result == TM_Updated || result == TM_Deleted)
		{
			if (IsolationUsesXactSnapshot())
				IdemCasSerializationFailure();
			continue;			/* changed meanwhile: decide again */
		}
		if (result != TM_Ok)
			elog(ERROR, "unexpected table_tuple_lock result %d", (int) result);

		if (!IdemCasUpdate(rel, b, slot, target_datum,
						   b->version_attno != InvalidAttrNumber, version))
			outcome = IDEM_CAS_REJECTED;	/* a BEFORE trigger skipped it */
		break;
	}

	ExecDropSingleTupleTableSlot(slot);
	index_close(index, NoLock);
	table_close(rel, NoLock);
	PG_RETURN_TEXT_P(cstring_to_text(IdemCasOutcomeName(outcome)));
}
