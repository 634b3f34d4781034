/*
 * compat.h
 *	  Shims over the differences between the PostgreSQL majors the
 *	  extension builds for.  CI builds it with -Werror and runs its suites
 *	  on 15, 17, 18 and 19 (test/run --pg N); 16 is not tested (no Debian
 *	  archive at hand carries it), though every shim below that changed in
 *	  16 takes it into account; the branches for 13 and 14 are kept but no
 *	  longer built by CI.
 */
#ifndef IDEM_COMPAT_H
#define IDEM_COMPAT_H

#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "access/tupdesc.h"
#include "catalog/pg_extension.h"
#include "executor/executor.h"
#include "parser/parse_relation.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"
#if PG_VERSION_NUM >= 160000
#include "varatt.h"				/* no longer included by postgres.h */
#endif
#if PG_VERSION_NUM < 150000
#include "postmaster/autovacuum.h"
#include "replication/walsender.h"
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
 * result relation as an argument, 16 added onlySummarizing.
 */
#if PG_VERSION_NUM >= 160000
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

/* Does role own the relation relid? */
#if PG_VERSION_NUM >= 160000
#define IdemClassOwnercheck(relid, role) \
	object_ownercheck(RelationRelationId, (relid), (role))
#else
#define IdemClassOwnercheck(relid, role)	pg_class_ownercheck((relid), (role))
#endif

/* This backend's local transaction id, and its PGPROC's number (17) */
#if PG_VERSION_NUM >= 170000
#define IdemMyLxid()			(MyProc->vxid.lxid)
#define IdemMyProcNumber()		((int) GetNumberFromPGProc(MyProc))
#else
#define IdemMyLxid()			(MyProc->lxid)
#define IdemMyProcNumber()		((int) MyProc->pgprocno)
#endif

/* index_beginscan without instrumentation (18 added it) */
#if PG_VERSION_NUM >= 180000
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
 * Set up estate's range table of the one relation rte, whose updated
 * columns are updated_cols: 16 moved the permissions into their own list,
 * 18 wants the range-table indexes left after pruning (here, 1).
 */
static inline void
IdemExecInitRangeTable1(EState *estate, RangeTblEntry *rte, Bitmapset *updated_cols)
{
#if PG_VERSION_NUM >= 160000
	List	   *perminfos = NIL;
	RTEPermissionInfo *perminfo = addRTEPermissionInfo(&perminfos, rte);

	perminfo->updatedCols = updated_cols;
#if PG_VERSION_NUM >= 180000
	ExecInitRangeTable(estate, list_make1(rte), perminfos, bms_make_singleton(1));
#else
	ExecInitRangeTable(estate, list_make1(rte), perminfos);
#endif
#else
	rte->updatedCols = updated_cols;
	ExecInitRangeTable(estate, list_make1(rte));
#endif
}

#endif							/* IDEM_COMPAT_H */
