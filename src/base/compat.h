/*
 * compat.h
 *	  Shims over the differences between PostgreSQL 13 to 17.
 */
#ifndef IDEM_COMPAT_H
#define IDEM_COMPAT_H

#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "access/tupdesc.h"
#include "executor/executor.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"
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

#endif							/* IDEM_COMPAT_H */
