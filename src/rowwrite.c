/*
 * rowwrite.c
 *	  The executor state for a native row write: an INSERT or an UPDATE of
 *	  one row through the executor's simple paths (ExecSimpleRelationInsert,
 *	  ExecSimpleRelationUpdate), the entry points logical replication uses,
 *	  so that indexes, constraints and row triggers see an ordinary INSERT
 *	  or UPDATE.  Used by the row CAS (cas.c) and the watermarks
 *	  (watermark.c).
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_class.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "parser/parse_relation.h"
#include "utils/datum.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "rowwrite.h"

/*
 * Set up an executor state for writing rows of rel, as a statement that
 * names updated_cols (NULL for an INSERT): the columns an UPDATE would
 * name, for per-column triggers and the index AMs' indexUnchanged hints.
 * Returns the state; *rri_out is the result relation, its indexes open.
 */
static EState *
IdemRowWriteBegin(Relation rel, Bitmapset *updated_cols, ResultRelInfo **rri_out)
{
	EState	   *estate = CreateExecutorState();
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	ResultRelInfo *rri = makeNode(ResultRelInfo);

	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = RELKIND_RELATION;
	rte->rellockmode = RowExclusiveLock;
	IdemExecInitRangeTable1(estate, rte, updated_cols);
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
	ExecOpenIndices(rri, false);
	*rri_out = rri;
	return estate;
}

/* Fire the queued AFTER triggers and free what IdemRowWriteBegin made */
static void
IdemRowWriteEnd(EState *estate, ResultRelInfo *rri)
{
	ExecCloseIndices(rri);
	AfterTriggerEndQuery(estate);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
}

/* A slot of rel holding values and nulls (natts of them), for a write */
static TupleTableSlot *
IdemRowWriteSlot(Relation rel, EState *estate, const Datum *values, const bool *nulls)
{
	TupleTableSlot *slot = table_slot_create(rel, &estate->es_tupleTable);
	int			natts = RelationGetDescr(rel)->natts;

	ExecClearTuple(slot);
	memcpy(slot->tts_values, values, natts * sizeof(Datum));
	memcpy(slot->tts_isnull, nulls, natts * sizeof(bool));
	ExecStoreVirtualTuple(slot);
	return slot;
}

/* INSERT the row values/nulls into rel; *tid gets where it went */
void
IdemRowWriteInsert(Relation rel, const Datum *values, const bool *nulls, ItemPointer tid)
{
	ResultRelInfo *rri;
	EState	   *estate = IdemRowWriteBegin(rel, NULL, &rri);
	TupleTableSlot *slot = IdemRowWriteSlot(rel, estate, values, nulls);

	ExecSimpleRelationInsert(rri, estate, slot);
	*tid = slot->tts_tid;
	IdemRowWriteEnd(estate, rri);
}

/*
 * UPDATE the row locked in oldslot to values/nulls, as a statement naming
 * updated_cols.  Returns false if a BEFORE trigger skipped the update.  If
 * written is given, it gets column written->attno as the update wrote it,
 * after every BEFORE trigger (which may have changed it), copied into the
 * caller's memory; untouched if the update was skipped.
 */
bool
IdemRowWriteUpdate(Relation rel, Bitmapset *updated_cols, TupleTableSlot *oldslot,
				   const Datum *values, const bool *nulls, IdemRowWritten *written)
{
	ResultRelInfo *rri;
	EState	   *estate = IdemRowWriteBegin(rel, updated_cols, &rri);
	EPQState	epqstate;
	TupleTableSlot *newslot;
	bool		updated;

#if PG_VERSION_NUM >= 160000
	EvalPlanQualInit(&epqstate, estate, NULL, NIL, -1, NIL);
#else
	EvalPlanQualInit(&epqstate, estate, NULL, NIL, -1);
#endif
	newslot = IdemRowWriteSlot(rel, estate, values, nulls);
	ItemPointerSetInvalid(&newslot->tts_tid);
	EvalPlanQualSetSlot(&epqstate, newslot);
#if PG_VERSION_NUM >= 140000
	ExecSimpleRelationUpdate(rri, estate, &epqstate, oldslot, newslot);
#else
	ExecSimpleRelationUpdate(estate, &epqstate, oldslot, newslot);
#endif
	/* the update sets the slot's TID; a BEFORE trigger may have skipped it */
	updated = ItemPointerIsValid(&newslot->tts_tid);
	if (updated && written != NULL)
	{
		/* BEFORE triggers' changes are in newslot, which goes with estate */
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), written->attno - 1);

		written->value = slot_getattr(newslot, written->attno, &written->isnull);
		if (!written->isnull)
			written->value = datumCopy(written->value, att->attbyval, att->attlen);
	}
	EvalPlanQualEnd(&epqstate);
	IdemRowWriteEnd(estate, rri);
	return updated;
}
