/*
 * compat.h
 *	  Shims over the differences between the PostgreSQL majors the
 *	  extension builds for.  CI builds it with -Werror and runs its suites
 *	  on 15, 17, 18 and 19 (release candidate 1; test/run --pg N); 16 is
 *	  not tested (no Debian archive at hand carries it), though every shim
 *	  below that changed in 16 takes it into account; the branches for 13
 *	  and 14 are kept but no longer built by CI.
 *
 * The one file of src/ that tests PG_VERSION_NUM (scripts/check-layout.py
 * checks it): code elsewhere calls the shims below, or tests one of the
 * IDEM_HAVE_ macros, which name the feature rather than the version.
 */
#ifndef IDEM_COMPAT_H
#define IDEM_COMPAT_H

#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "access/genam.h"
#include "access/heapam.h"
#include "access/nbtree.h"
#include "access/tupdesc.h"
#include "catalog/pg_extension.h"
#include "executor/executor.h"
#include "parser/parse_relation.h"
#include "storage/bufmgr.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"
#if PG_VERSION_NUM >= 160000
#include "varatt.h"				/* no longer included by postgres.h */
#endif
#if PG_VERSION_NUM >= 150000
#include "access/twophase.h"
#include "storage/proc.h"
#else
#include "postmaster/autovacuum.h"
#include "replication/walsender.h"
#endif
#if PG_VERSION_NUM >= 140000
#include "utils/portal.h"
#endif

/*
 * shmem_request_hook is PostgreSQL 15's; before, shared memory is requested
 * in _PG_init itself
 */
#if PG_VERSION_NUM >= 150000
#define IDEM_HAVE_SHMEM_REQUEST_HOOK 1
#endif

/* MarkGUCPrefixReserved is PostgreSQL 15's name of EmitWarningsOnPlaceholders */
#if PG_VERSION_NUM < 150000
#define MarkGUCPrefixReserved(className) EmitWarningsOnPlaceholders(className)
#endif

/*
 * The backends that may attach to shared memory, while shared memory is
 * sized: MaxBackends is set before shmem_request_hook from PostgreSQL 15
 * on; before, it is set after _PG_init, so it is summed from its GUCs.
 */
#if PG_VERSION_NUM >= 150000
#define IdemMaxBackends() (MaxBackends)
#else
#define IdemMaxBackends() \
	(MaxConnections + autovacuum_max_workers + 1 + max_worker_processes + max_wal_senders)
#endif

/*
 * Set up a materialized set-returning call whose tuple descriptor comes
 * from the function's declared result type, composite or scalar.
 * (InitMaterializedSRF of PostgreSQL 15 handles composite types only.)
 */
static inline void
IdemInitMaterializedSRF(FunctionCallInfo fcinfo)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext oldcxt;
	TupleDesc	tupdesc;
	Oid			rettype;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));

	oldcxt = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	if (get_call_result_type(fcinfo, &rettype, &tupdesc) == TYPEFUNC_COMPOSITE)
		tupdesc = CreateTupleDescCopy(tupdesc);
	else
	{
		tupdesc = CreateTemplateTupleDesc(1);
		TupleDescInitEntry(tupdesc, (AttrNumber) 1, "result", rettype, -1, 0);
	}
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = tuplestore_begin_heap(true, false, work_mem);
	rsinfo->setDesc = tupdesc;
	MemoryContextSwitchTo(oldcxt);
}

/* The physical identity of a relation: RelFileNode became RelFileLocator */
#if PG_VERSION_NUM >= 160000
typedef RelFileLocator IdemRelFile;
#define IdemRelFileOf(rel)			((rel)->rd_locator)
#define IdemRelFileNumber(rel)		((rel)->rd_locator.relNumber)
#else
typedef RelFileNode IdemRelFile;
#define IdemRelFileOf(rel)			((rel)->rd_node)
#define IdemRelFileNumber(rel)		((rel)->rd_node.relNode)
#endif

/*
 * ExecInsertIndexTuples for a speculative insertion into resultRelInfo
 * (noDupErr, every unique index an arbiter).  PostgreSQL 14 took the
 * result relation as an argument, 16 added onlySummarizing; 19 folded
 * update, noDupErr and onlySummarizing into flags (EIIT_*) and moved slot
 * after them.
 */
#if PG_VERSION_NUM >= 190000
#define IdemExecInsertIndexTuples(rri, slot, estate, conflict) \
	ExecInsertIndexTuples((rri), (estate), EIIT_NO_DUPE_ERROR, (slot), NIL, (conflict))
#elif PG_VERSION_NUM >= 160000
#define IdemExecInsertIndexTuples(rri, slot, estate, conflict) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, true, (conflict), NIL, false)
#elif PG_VERSION_NUM >= 140000
#define IdemExecInsertIndexTuples(rri, slot, estate, conflict) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, true, (conflict), NIL)
#else
#define IdemExecInsertIndexTuples(rri, slot, estate, conflict) \
	((estate)->es_result_relation_info = (rri), \
	 ExecInsertIndexTuples((slot), (estate), true, (conflict), NIL))
#endif

/*
 * The slots of every process that may hold a speculative token, while
 * shared memory is sized; 0 before PostgreSQL 15, where MaxBackends is
 * not known yet then
 */
#if PG_VERSION_NUM >= 150000
#define IdemAllProcSlots() (MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts)
#else
#define IdemAllProcSlots() (0)
#endif

/* The ownership check of a relation: object_ownercheck from 16 on */
#if PG_VERSION_NUM >= 160000
#define IdemClassOwnerCheck(relid, roleid) 	object_ownercheck(RelationRelationId, (relid), (roleid))
#else
#define IdemClassOwnerCheck(relid, roleid)	pg_class_ownercheck((relid), (roleid))
#endif

/*
 * The range table of an executor state for one relation rte, whose
 * updated columns are updated_cols: 16 moved them into RTEPermissionInfo
 */
static inline void
IdemExecInitRangeTable(EState *estate, RangeTblEntry *rte, Bitmapset *updated_cols)
{
#if PG_VERSION_NUM >= 160000
	List	   *perminfos = NIL;
	RTEPermissionInfo *perminfo = addRTEPermissionInfo(&perminfos, rte);

	perminfo->updatedCols = updated_cols;
#if PG_VERSION_NUM >= 180000
	/* 18 wants the range-table indexes left after pruning: here, 1 */
	ExecInitRangeTable(estate, list_make1(rte), perminfos, bms_make_singleton(1));
#else
	ExecInitRangeTable(estate, list_make1(rte), perminfos);
#endif
#else
	rte->updatedCols = updated_cols;
	ExecInitRangeTable(estate, list_make1(rte));
#endif
}

/* Make rri the executor state's one result relation, opened */
static inline void
IdemExecSetResultRelation(EState *estate, ResultRelInfo *rri)
{
#if PG_VERSION_NUM >= 140000
	estate->es_opened_result_relations = lappend(estate->es_opened_result_relations, rri);
#else
	estate->es_result_relations = rri;
	estate->es_num_result_relations = 1;
	estate->es_result_relation_info = rri;
#endif
}

/* EvalPlanQualInit for a simple update: 16 added the result relations */
#if PG_VERSION_NUM >= 160000
#define IdemEvalPlanQualInit(epq, estate) 	EvalPlanQualInit((epq), (estate), NULL, NIL, -1, NIL)
#else
#define IdemEvalPlanQualInit(epq, estate) 	EvalPlanQualInit((epq), (estate), NULL, NIL, -1)
#endif

/* ExecSimpleRelationUpdate: 14 took the result relation as an argument */
#if PG_VERSION_NUM >= 140000
#define IdemExecSimpleRelationUpdate(rri, estate, epq, oldslot, newslot) 	ExecSimpleRelationUpdate((rri), (estate), (epq), (oldslot), (newslot))
#else
#define IdemExecSimpleRelationUpdate(rri, estate, epq, oldslot, newslot) 	ExecSimpleRelationUpdate((estate), (epq), (oldslot), (newslot))
#endif

/* index_insert: 14 added indexUnchanged, a hint ignored before */
#if PG_VERSION_NUM >= 140000
#define IdemIndexInsert(index, values, isnull, tid, heap, check, unchanged, info) 	index_insert((index), (values), (isnull), (tid), (heap), (check), (unchanged), (info))
#else
#define IdemIndexInsert(index, values, isnull, tid, heap, check, unchanged, info) 	index_insert((index), (values), (isnull), (tid), (heap), (check), (info))
#endif

/*
 * heap_update: 16 reports which indexes the update must touch; unused here.
 * 19 added options (TABLE_UPDATE_NO_LOGICAL, for table rewrites only): none.
 */
static inline TM_Result
IdemHeapUpdate(Relation rel, ItemPointer otid, HeapTuple newtup, CommandId cid,
			   Snapshot crosscheck, bool wait, TM_FailureData *tmfd,
			   LockTupleMode *lockmode)
{
#if PG_VERSION_NUM >= 190000
	TU_UpdateIndexes update_indexes;

	return heap_update(rel, otid, newtup, cid, 0, crosscheck, wait, tmfd, lockmode,
					   &update_indexes);
#elif PG_VERSION_NUM >= 160000
	TU_UpdateIndexes update_indexes;

	return heap_update(rel, otid, newtup, cid, crosscheck, wait, tmfd, lockmode,
					   &update_indexes);
#else
	return heap_update(rel, otid, newtup, cid, crosscheck, wait, tmfd, lockmode);
#endif
}

/*
 * heap_delete of a row that is not moving to another partition: 19 turned
 * changingPart into options (TABLE_DELETE_CHANGING_PARTITION, and
 * TABLE_DELETE_NO_LOGICAL for table rewrites), placed after cid
 */
#if PG_VERSION_NUM >= 190000
#define IdemHeapDelete(rel, tid, cid, crosscheck, wait, tmfd) \
	heap_delete((rel), (tid), (cid), 0, (crosscheck), (wait), (tmfd))
#else
#define IdemHeapDelete(rel, tid, cid, crosscheck, wait, tmfd) \
	heap_delete((rel), (tid), (cid), (crosscheck), (wait), (tmfd), false)
#endif

/*
 * Opportunistic pruning of a heap page the caller is about to update, as
 * an index fetch does.  19 lets the pruning set the page all-visible in
 * the visibility map when the query only reads the relation
 * (rel_read_only), pinning the map's page in *vmbuffer, which the caller
 * releases: here the relation is written, so false, and the pin is
 * dropped at once.
 */
static inline void
IdemHeapPagePruneOpt(Relation rel, Buffer buffer)
{
#if PG_VERSION_NUM >= 190000
	Buffer		vmbuffer = InvalidBuffer;

	heap_page_prune_opt(rel, buffer, &vmbuffer, false);
	if (BufferIsValid(vmbuffer))
		ReleaseBuffer(vmbuffer);
#else
	heap_page_prune_opt(rel, buffer);
#endif
}

/*
 * The descent of btprobe.c to the leaf page that may hold skey, read-locked
 * in *buf (InvalidBuffer if the index has no root), without the stack of
 * parents: _bt_search took a snapshot (for old_snapshot_threshold) until
 * 16, then the heap; 19 builds the stack only if asked (returnstack) and
 * no longer exports _bt_freestack.  _bt_get_endpoint took a snapshot until
 * 17; BTPageGetOpaque is 15's.
 */
static inline void
IdemBtDescend(Relation index, BTScanInsert skey, Buffer *buf)
{
#if PG_VERSION_NUM >= 190000
	(void) _bt_search(index, NULL, skey, buf, BT_READ, false);
#elif PG_VERSION_NUM >= 160000
	_bt_freestack(_bt_search(index, NULL, skey, buf, BT_READ));
#else
	_bt_freestack(_bt_search(index, skey, buf, BT_READ, NULL));
#endif
}
#if PG_VERSION_NUM >= 170000
#define IdemBtEndpoint(index, level)	_bt_get_endpoint((index), (level), false)
#else
#define IdemBtEndpoint(index, level)	_bt_get_endpoint((index), (level), false, NULL)
#endif
/* a page's level: a union member until 14 */
#if PG_VERSION_NUM >= 140000
#define IdemBtLevel(opaque)		((opaque)->btpo_level)
#else
#define IdemBtLevel(opaque)		((opaque)->btpo.level)
#endif
#if PG_VERSION_NUM < 150000
#define BTPageGetOpaque(page) ((BTPageOpaque) PageGetSpecialPointer(page))
#endif

/*
 * A TID range scan (PostgreSQL 14): the native purge of the claims table
 * and the purge's windows need one
 */
#if PG_VERSION_NUM >= 140000
#define IDEM_HAVE_TID_RANGE_SCAN 1
#endif

/* The parse analysis of a query without parameters: renamed in 15 */
#if PG_VERSION_NUM >= 150000
#define IdemAnalyzeAndRewrite(raw, sql) 	pg_analyze_and_rewrite_fixedparams((raw), (sql), NULL, 0, NULL)
#else
#define IdemAnalyzeAndRewrite(raw, sql) 	pg_analyze_and_rewrite((raw), (sql), NULL, 0, NULL)
#endif

/* A procedure's snapshot after a commit: EnsurePortalSnapshotExists is 14's */
#if PG_VERSION_NUM >= 140000
#define IdemEnsurePortalSnapshot()	EnsurePortalSnapshotExists()
#else
#define IdemEnsurePortalSnapshot()	((void) 0)
#endif

/*
 * A function that does not return: PostgreSQL 18 replaced the
 * pg_attribute_noreturn() suffix by the pg_noreturn specifier (C11's
 * _Noreturn), written first in the declaration.  _Noreturn cannot qualify
 * a function pointer, so IdemNoreturnPointer says it of one before 18
 * only (clang would refuse a _Noreturn function for an attributed pointer).
 */
#if PG_VERSION_NUM >= 180000
#define IdemNoreturnPointer
#else
#define pg_noreturn pg_attribute_noreturn()
#define IdemNoreturnPointer pg_attribute_noreturn()
#endif

/* Is a lock of exactly this mode held?  (17 added "or stronger") */
#if PG_VERSION_NUM >= 170000
#define IdemLockHeldByMe(tag, mode)	LockHeldByMe((tag), (mode), false)
#else
#define IdemLockHeldByMe(tag, mode)	LockHeldByMe((tag), (mode))
#endif

/* Does role own the extension extoid?  (16 made the checks generic) */
#if PG_VERSION_NUM >= 160000
#define IdemExtensionOwnercheck(extoid, role) \
	object_ownercheck(ExtensionRelationId, (extoid), (role))
#else
#define IdemExtensionOwnercheck(extoid, role) \
	pg_extension_ownercheck((extoid), (role))
#endif

/* This backend's local transaction id, and its PGPROC's number (17) */
#if PG_VERSION_NUM >= 170000
#define IdemMyLxid()			(MyProc->vxid.lxid)
#define IdemMyProcNumber()		((int) GetNumberFromPGProc(MyProc))
#else
#define IdemMyLxid()			(MyProc->lxid)
#define IdemMyProcNumber()		((int) MyProc->pgprocno)
#endif

/*
 * index_beginscan without instrumentation (18 added it), and with no scan
 * flags (19 added them: SO_HINT_REL_READ_ONLY would let the heap fetches
 * set pages all-visible; every caller here may write the relation, or
 * scans with SnapshotAny, so none is passed, as before 19)
 */
#if PG_VERSION_NUM >= 190000
#define IdemIndexBeginScan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), (norderbys), SO_NONE)
#elif PG_VERSION_NUM >= 180000
#define IdemIndexBeginScan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), (norderbys))
#else
#define IdemIndexBeginScan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), (norderbys))
#endif

/*
 * The primary key's index, InvalidOid if none or if it is deferrable (18
 * records a deferrable one too, behind deferrable_ok; before, only an
 * immediate one).
 */
#if PG_VERSION_NUM >= 180000
#define IdemRelationGetPrimaryKeyIndex(rel)	RelationGetPrimaryKeyIndex((rel), false)
#else
#define IdemRelationGetPrimaryKeyIndex(rel)	RelationGetPrimaryKeyIndex(rel)
#endif

/* PortalRun of a portal run once (18 dropped run_once) */
#if PG_VERSION_NUM >= 180000
#define IdemPortalRun(portal, count, toplevel, dest, altdest, qc) \
	PortalRun((portal), (count), (toplevel), (dest), (altdest), (qc))
#else
#define IdemPortalRun(portal, count, toplevel, dest, altdest, qc) \
	PortalRun((portal), (count), (toplevel), true, (dest), (altdest), (qc))
#endif

/*
 * A sequential scan and a TID range scan with no scan flags: 19 added them
 * (SO_HINT_REL_READ_ONLY among them), none passed, as before 19 (the TID
 * range scan is the purge's, which deletes what it reads)
 */
#if PG_VERSION_NUM >= 190000
#define IdemTableBeginScan(rel, snapshot, nkeys, key) \
	table_beginscan((rel), (snapshot), (nkeys), (key), SO_NONE)
#define IdemTableBeginScanTidRange(rel, snapshot, mintid, maxtid) \
	table_beginscan_tidrange((rel), (snapshot), (mintid), (maxtid), SO_NONE)
#else
#define IdemTableBeginScan(rel, snapshot, nkeys, key) \
	table_beginscan((rel), (snapshot), (nkeys), (key))
#define IdemTableBeginScanTidRange(rel, snapshot, mintid, maxtid) \
	table_beginscan_tidrange((rel), (snapshot), (mintid), (maxtid))
#endif

/*
 * A shared hash table of a fixed number of entries: 19's ShmemInitHash
 * takes one size (the table no longer grows past its initial size)
 */
#if PG_VERSION_NUM >= 190000
#define IdemShmemInitHash(name, nelems, info, flags) \
	ShmemInitHash((name), (nelems), (info), (flags))
#else
#define IdemShmemInitHash(name, nelems, info, flags) \
	ShmemInitHash((name), (nelems), (nelems), (info), (flags))
#endif

/*
 * Does a planned statement write any relation (INSERT, UPDATE, DELETE,
 * MERGE)?  19 replaced the list resultRelations by the set
 * resultRelationRelids, the same range-table indexes.
 */
#if PG_VERSION_NUM >= 190000
#define IdemPlannedStmtHasResultRelations(pstmt) \
	(!bms_is_empty((pstmt)->resultRelationRelids))
#else
#define IdemPlannedStmtHasResultRelations(pstmt) \
	((pstmt)->resultRelations != NIL)
#endif

#endif							/* IDEM_COMPAT_H */
