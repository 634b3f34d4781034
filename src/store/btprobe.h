/*
 * btprobe.h
 *	  The first live entry of one (key, ns) in a claims btree, by a direct
 *	  descent, or straight to its leaf through the index's fences.
 */
#ifndef IDEM_BTPROBE_H
#define IDEM_BTPROBE_H

#include "postgres.h"

#include "storage/itemptr.h"
#include "utils/palloc.h"
#include "utils/relcache.h"

/* Where the leaves of an index start, as its level-1 pages said (btprobe.c) */
typedef struct IdemBtreeFences IdemBtreeFences;

extern int	IdemBtreeFirst(Relation index, IdemBtreeFences **fences,
						   MemoryContext cxt, AttrNumber keycol, int32 nsid,
						   const bytea *key, ItemPointer tid);

#endif							/* IDEM_BTPROBE_H */
