/*
 * cas.c
 *	  idem_cas_row(rel, key, target, expected_version): a compare-and-set
 *	  of a bound status column, checked against its state machine.
 *
 * The row is found through the table's single-column primary key and
 * updated natively, with no SQL text, through rowseek.c's loop: a
 * dirty-snapshot probe of the key (waiting for any transaction modifying
 * the row, as UPDATE does), a decision against the machine, and only if the
 * move is legal a row lock and an update through ExecSimpleRelationUpdate,
 * the executor entry point logical replication uses.  To every trigger,
 * constraint and index it is an UPDATE of the status (and version)
 * columns: the columns are marked updated, so per-column triggers fire and
 * the index AMs get the right indexUnchanged hints; statement triggers do
 * not fire.
 *
 * Outcomes: 'applied' (moved, version + 1), 'already' (at target: nothing
 * written), 'rejected' (no edge: nothing written), 'stale' (the version
 * differs from expected_version), 'missing' (no row).  A BEFORE trigger
 * that skips the update makes it 'rejected' too, nothing written; one that
 * writes a status other than the target also gives 'rejected', since the
 * row is not at the target, but its update is written (the version bumped,
 * AFTER triggers fired), so a retry with the old expected_version gets
 * 'stale'.
 *
 * Concurrent CASes serialize on the row lock: the second waits for the
 * first, then decides against the row it left.  In READ COMMITTED the
 * decision is made on the latest committed version, like UPDATE after
 * EvalPlanQual; in REPEATABLE READ a version committed after the snapshot
 * gives a serialization failure.  In SERIALIZABLE the key is also read
 * through the transaction snapshot first, taking the predicate locks that
 * the scan of "UPDATE ... WHERE key = $1 AND status = ..." takes, so an
 * outcome that writes nothing still counts as a read in SSI's conflict
 * tracking.
 *
 * The key is compared with the primary key as the parser would compare it
 * in "WHERE key = $1": through a cross-type operator of the index's
 * operator family, else after an implicit cast, or input conversion from
 * a text argument.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
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
#include "base/base.h"
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

/* How one call site compares its key argument, kept in fn_extra */
typedef struct IdemCasKeyCast
{
	Oid			argtype;
	Oid			pk_index;
	RegProcedure eqproc;		/* equality of the index column and the key */
	Oid			subtype;		/* the key's type in the scan, or InvalidOid */
	ExprState  *expr;			/* a conversion of the key, or NULL */
	ExprContext *econtext;
} IdemCasKeyCast;

/*
 * The key argument, ready to compare with the primary key, as "WHERE key =
 * $1" would compare it: through a cross-type equality operator of the key
 * index's operator family if there is one (an int8 key on an int4 column),
 * else converted by the parser's coercion machinery: an implicit cast, or
 * for a text argument the input function of the column's (base) type.  The
 * typmod is left out, so a key too long for the column is simply missing,
 * as in a WHERE clause.  Sets *eqproc and *subtype for the scan key.
 */
static Datum
IdemCasKey(FunctionCallInfo fcinfo, Relation rel, IdemBinding *b,
		   RegProcedure *eqproc, Oid *subtype)
{
	Oid			argtype = get_fn_expr_argtype(fcinfo->flinfo, 1);
	IdemCasKeyCast *cast = (IdemCasKeyCast *) fcinfo->flinfo->fn_extra;
	bool		isnull;
	Datum		key;

	*eqproc = b->pk_eqproc;
	*subtype = InvalidOid;
	if (argtype == b->pk_type || argtype == b->pk_opcintype)
		return PG_GETARG_DATUM(1);

	if (cast == NULL || cast->argtype != argtype || cast->pk_index != b->pk_index)
	{
		MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
		Oid			crossop = get_opfamily_member(b->pk_opfamily, b->pk_opcintype,
												  argtype, BTEqualStrategyNumber);

		if (cast == NULL)
		{
			cast = palloc0(sizeof(IdemCasKeyCast));
			cast->econtext = CreateStandaloneExprContext();
			fcinfo->flinfo->fn_extra = cast;
		}
		cast->argtype = InvalidOid; /* until complete */
		cast->expr = NULL;
		cast->eqproc = b->pk_eqproc;
		cast->subtype = InvalidOid;
		if (OidIsValid(crossop))
		{
			cast->eqproc = get_opcode(crossop);
			cast->subtype = argtype;
		}
		else
		{
			CaseTestExpr *arg = makeNode(CaseTestExpr);
			Oid			target = getBaseType(b->pk_type);
			bool		from_text = (argtype == UNKNOWNOID ||
									 TypeCategory(argtype) == TYPCATEGORY_STRING);
			Node	   *expr;

			arg->typeId = argtype == UNKNOWNOID ? TEXTOID : argtype;
			arg->typeMod = -1;
			arg->collation = get_typcollation(arg->typeId);
			expr = coerce_to_target_type(NULL, (Node *) arg, arg->typeId,
										 target, -1,
										 from_text ? COERCION_EXPLICIT : COERCION_IMPLICIT,
										 COERCE_IMPLICIT_CAST, -1);
			if (expr == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("key of type %s does not match the primary key of \"%s\"",
								format_type_be(argtype), RelationGetRelationName(rel)),
						 errdetail("Column \"%s\" is of type %s.",
								   get_attname(RelationGetRelid(rel), b->pk_attno, false),
								   format_type_be(b->pk_type)),
						 errhint("Cast the key to %s.", format_type_be(b->pk_type))));
			/* binary-coercible types need no conversion */
			while (IsA(expr, RelabelType))
				expr = (Node *) ((RelabelType *) expr)->arg;
			if (!IsA(expr, CaseTestExpr))
				cast->expr = ExecInitExpr((Expr *) expr, NULL);
		}
		cast->pk_index = b->pk_index;
		cast->argtype = argtype;
		MemoryContextSwitchTo(old);
	}
	*eqproc = cast->eqproc;
	*subtype = cast->subtype;
	if (cast->expr == NULL)
		return PG_GETARG_DATUM(1);

	ResetExprContext(cast->econtext);
	cast->econtext->caseValue_datum = PG_GETARG_DATUM(1);
	cast->econtext->caseValue_isNull = false;
	key = ExecEvalExprSwitchContext(cast->expr, cast->econtext, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("key must not be null")));
	return key;
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

/* One CAS: its seek loop, and what it decides against */
typedef struct IdemCasSeek
{
	IdemRowSeek seek;			/* first: the callbacks cast it back */
	Relation	index;			/* the primary key */
	IdemBinding *b;
	IdemMachine *m;
	Datum		key;
	RegProcedure eqproc;		/* how the index column compares with key */
	Oid			subtype;		/* key's type, if it differs from the column's */
	int			to;				/* the target state */
	bool		have_expected;
	int64		expected;
	SnapshotData dirty;
	bool		predicate_locked;	/* SERIALIZABLE: the snapshot read done */
	/* the decision on the row last found */
	IdemCasOutcome outcome;
	int64		version;
} IdemCasSeek;

/* Read the primary key for the key under snapshot into slot */
static bool
IdemCasIndexScan(IdemCasSeek *cs, Snapshot snapshot, TupleTableSlot *slot)
{
	ScanKeyData skey;
	IndexScanDesc scan;
	bool		found;

	ScanKeyEntryInitialize(&skey, 0, 1, BTEqualStrategyNumber, cs->subtype,
						   cs->b->pk_collation, cs->eqproc, cs->key);
	scan = IdemIndexBeginScan(cs->seek.heap, cs->index, snapshot, 1, 0);
	index_rescan(scan, &skey, 1, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	index_endscan(scan);
	return found;
}

/*
 * The seek's probe: the first row version for the key under a dirty
 * snapshot.  Under SERIALIZABLE the key is read once through the
 * transaction snapshot first, for its predicate locks: on the index page,
 * which covers a missing key, and on the version the snapshot sees.
 */
static bool
IdemCasProbe(IdemRowSeek *seek)
{
	IdemCasSeek *cs = (IdemCasSeek *) seek;
	TupleTableSlot *slot = seek->lockslot;

	if (IsolationIsSerializable() && !cs->predicate_locked)
	{
		(void) IdemCasIndexScan(cs, GetActiveSnapshot(), slot);
		cs->predicate_locked = true;
	}
	if (!IdemCasIndexScan(cs, &cs->dirty, slot))
		return false;
	IdemRowSeekNoteSlot(seek, &cs->dirty, slot);
	return true;
}

/* The seek's vanished test (rowseek.c): the row under snap */
static bool
IdemCasVanished(IdemRowSeek *seek, Snapshot snap)
{
	return IdemCasIndexScan((IdemCasSeek *) seek, snap, seek->lockslot);
}

/* The seek's decision: the machine's verdict on the row found */
static IdemRowAction
IdemCasDecide(IdemRowSeek *seek)
{
	IdemCasSeek *cs = (IdemCasSeek *) seek;
	IdemBinding *b = cs->b;
	bool		isnull;
	Datum		status = slot_getattr(seek->lockslot, b->status_attno, &isnull);
	int			from = -1;

	if (!isnull)
	{
		char	   *name = IdemBindingStatusText(b, status);

		from = IdemMachineRequireState(cs->m, name, strlen(name));
	}
	cs->version = b->version_attno != InvalidAttrNumber ?
		IdemCasVersion(b, seek->lockslot) : 0;

	if (cs->have_expected && cs->version != cs->expected)
		cs->outcome = IDEM_CAS_STALE;
	else if (from < 0)
		cs->outcome = cs->m->initial[cs->to] ? IDEM_CAS_APPLIED : IDEM_CAS_REJECTED;
	else
		cs->outcome = IdemMachineStep(cs->m, from, cs->to);
	return cs->outcome == IDEM_CAS_APPLIED ? IDEM_ROW_LOCK : IDEM_ROW_KEEP;
}

/* The serialization failure of a CAS under a transaction snapshot */
pg_noreturn static void
IdemCasSerializationFailure(IdemRowSeek *seek pg_attribute_unused())
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access due to concurrent update")));
}

/*
 * Write the new status (and version) into the locked row in oldslot,
 * through the executor's simple update path, as an UPDATE of exactly those
 * columns.  Returns false if the status the update wrote is not the target
 * (state to of machine m, status as a datum): a BEFORE trigger cancelled the
 * update, or set NEW.status to another state (the old one, say), so the
 * row did not move to the target, whatever else the trigger let through.
 */
static bool
IdemCasUpdate(Relation rel, IdemBinding *b, IdemMachine *m, TupleTableSlot *oldslot,
			  Datum status, int to, bool bump, int64 version)
{
	int			natts = RelationGetDescr(rel)->natts;
	Datum	   *values = palloc(natts * sizeof(Datum));
	bool	   *nulls = palloc(natts * sizeof(bool));
	Bitmapset  *updated_cols;
	IdemRowWritten written;

	/* the columns an UPDATE would name: per-column triggers, index hints */
	updated_cols = bms_make_singleton(b->status_attno - FirstLowInvalidHeapAttributeNumber);
	if (bump)
		updated_cols = bms_add_member(updated_cols,
									  b->version_attno - FirstLowInvalidHeapAttributeNumber);

	slot_getallattrs(oldslot);
	memcpy(values, oldslot->tts_values, natts * sizeof(Datum));
	memcpy(nulls, oldslot->tts_isnull, natts * sizeof(bool));
	values[b->status_attno - 1] = status;
	nulls[b->status_attno - 1] = false;
	if (bump)
	{
		values[b->version_attno - 1] = IdemCasVersionDatum(b, version + 1);
		nulls[b->version_attno - 1] = false;
	}
	written.attno = b->status_attno;
	if (!IdemRowWriteUpdate(rel, updated_cols, oldslot, values, nulls, &written))
		return false;
	if (written.isnull)
		return false;
	else
	{
		/* the state the row is in now, read as the decision reads it */
		char	   *name = IdemBindingStatusText(b, written.value);

		return IdemMachineState(m, name, strlen(name)) == to;
	}
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
	Relation	rel;
	IdemBinding *b;
	Datum		target_datum;
	IdemCasSeek cs;

	(void) IdemArgNotNull(fcinfo, 1, "key");
	target = DatumGetTextPP(IdemArgNotNull(fcinfo, 2, "target state"));
	IdemCheckWritable("idem_cas_row()");

	memset(&cs, 0, sizeof(cs));
	cs.have_expected = PG_NARGS() > 3 && !PG_ARGISNULL(3);
	cs.expected = cs.have_expected ? PG_GETARG_INT64(3) : 0;

	rel = IdemOpenRelationArg(relid, RowExclusiveLock);
	b = IdemBindingGet(relid, false);	/* bound tables are plain tables */
	if (rel->rd_tableam != GetHeapamTableAmRoutine())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("idem_cas_row() supports only heap tables"),
				 errdetail("Table \"%s\" uses access method \"%s\".",
						   RelationGetRelationName(rel),
						   get_am_name(rel->rd_rel->relam)),
				 errhint("Use UPDATE ... WHERE with idem_cas_status() as the check.")));
	if (!OidIsValid(b->pk_index))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" has no single-column primary key",
						RelationGetRelationName(rel)),
				 errdetail("idem_cas_row() finds rows through a primary key on one column.")));
	if (cs.have_expected && b->version_attno == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("table \"%s\" has no version column bound",
						RelationGetRelationName(rel)),
				 errhint("Bind a version column with idem_machine_bind(), or pass no expected version.")));
	IdemCasCheckPrivileges(rel, b);

	cs.b = b;
	cs.m = IdemMachineGet(b->machine, strlen(b->machine));
	cs.to = IdemMachineRequireState(cs.m, VARDATA_ANY(target), VARSIZE_ANY_EXHDR(target));
	target_datum = IdemBindingStatusDatum(b, text_to_cstring(target));
	cs.key = IdemCasKey(fcinfo, rel, b, &cs.eqproc, &cs.subtype);

	cs.index = index_open(b->pk_index, RowExclusiveLock);
	cs.seek.heap = rel;
	cs.seek.oper = XLTW_Update;
	cs.seek.probe = IdemCasProbe;
	cs.seek.decide = IdemCasDecide;
	cs.seek.vanished = IdemCasVanished;
	cs.seek.conflict = IdemCasSerializationFailure;
	cs.seek.lockslot = table_slot_create(rel, NULL);
	InitDirtySnapshot(cs.dirty);

	switch (IdemRowSeekRun(&cs.seek))
	{
		case IDEM_ROW_ABSENT:
			cs.outcome = IDEM_CAS_MISSING;
			break;
		case IDEM_ROW_LOCKED:
			/* a legal move, on the version locked: write it */
			if (!IdemCasUpdate(rel, b, cs.m, cs.seek.lockslot, target_datum, cs.to,
							   b->version_attno != InvalidAttrNumber, cs.version))
				cs.outcome = IDEM_CAS_REJECTED; /* a BEFORE trigger kept it off */
			break;
		default:
			break;				/* kept: the outcome decided */
	}

	ExecDropSingleTupleTableSlot(cs.seek.lockslot);
	index_close(cs.index, NoLock);
	table_close(rel, NoLock);
	PG_RETURN_TEXT_P(cstring_to_text(IdemCasOutcomeName(cs.outcome)));
}
