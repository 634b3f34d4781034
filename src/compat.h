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
#include "utils/rel.h"
#include "utils/tuplestore.h"

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

#endif							/* IDEM_COMPAT_H */
