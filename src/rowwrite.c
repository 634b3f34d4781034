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
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "rowwrite.h"

/*
 * Set up an executor state for writing rows of rel, as a statement that
 * names updated_cols (NULL for an INSERT): the columns an UPDATE would
 * name, for per-column triggers and the index AMs' indexUnchanged hints.
 * Returns the state; *rri_out is the result relation, its indexes open.
 */
EState *
IdemRowWriteBegin(Relation rel, Bitmapset *updated_cols, ResultRelInfo **rri_out)
{
	EState	   *estate = CreateExecutorState();
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	ResultRelInfo *rri = makeNode(ResultRelInfo);

	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = RELKIND_RELATION;
	rte->rellockmode = RowExclusiveLock;
#if PG_VERSION_NUM >= 160000
	{
		List	   *perminfos = NIL;
		RTEPermissionInfo *perminfo = addRTEPermissionInfo(&perminfos, rte);

		perminfo->updatedCols = updated_cols;
		ExecInitRangeTable(estate, list_make1(rte), perminfos);
	}
#else
	rte->updatedCols = updated_cols;
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
	ExecOpenIndices(rri, false);
	*rri_out = rri;
	return estate;
}

/* Fire the queued AFTER triggers and free what IdemRowWriteBegin made */
void
IdemRowWriteEnd(EState *estate, ResultRelInfo *rri)
{
	ExecCloseIndices(rri);
	AfterTriggerEndQuery(estate);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
}
