/*
 * rowwrite.h
 *	  The executor state for a native row write.
 */
#ifndef IDEM_ROWWRITE_H
#define IDEM_ROWWRITE_H

#include "postgres.h"

#include "nodes/bitmapset.h"
#include "executor/tuptable.h"
#include "nodes/execnodes.h"
#include "storage/itemptr.h"
#include "utils/relcache.h"

/* A column of the row an update wrote, as BEFORE triggers left it */
typedef struct IdemRowWritten
{
	AttrNumber	attno;			/* in: the column */
	Datum		value;			/* out */
	bool		isnull;			/* out */
} IdemRowWritten;

extern void IdemRowWriteInsert(Relation rel, const Datum *values, const bool *nulls,
							   ItemPointer tid);
extern bool IdemRowWriteUpdate(Relation rel, Bitmapset *updated_cols,
							   TupleTableSlot *oldslot, const Datum *values,
							   const bool *nulls, IdemRowWritten *written);

#endif							/* IDEM_ROWWRITE_H */
