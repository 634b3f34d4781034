/*
 * rowwrite.h
 *	  The executor state for a native row write.
 */
#ifndef IDEM_ROWWRITE_H
#define IDEM_ROWWRITE_H

#include "postgres.h"

#include "nodes/bitmapset.h"
#include "nodes/execnodes.h"
#include "utils/relcache.h"

extern EState *IdemRowWriteBegin(Relation rel, Bitmapset *updated_cols,
								 ResultRelInfo **rri_out);
extern void IdemRowWriteEnd(EState *estate, ResultRelInfo *rri);

#endif							/* IDEM_ROWWRITE_H */
