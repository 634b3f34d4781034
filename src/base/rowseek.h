/*
 * rowseek.h
 *	  The one probe, wait and recheck loop: find the row for a key as a
 *	  unique check or an UPDATE would, wait out whoever is changing it,
 *	  decide, and delete or lock the version decided on.
 */
#ifndef IDEM_ROWSEEK_H
#define IDEM_ROWSEEK_H

#include "postgres.h"

#include "executor/tuptable.h"
#include "storage/itemptr.h"
#include "storage/lmgr.h"
#include "utils/relcache.h"
#include "compat.h"

/* What the caller wants done with the row a probe found */
typedef enum IdemRowAction
{
	IDEM_ROW_KEEP,				/* nothing: the decision needs no write */
	IDEM_ROW_DELETE,			/* delete it, then treat the key as absent */
	IDEM_ROW_LOCK				/* lock it for an update */
} IdemRowAction;

/* How IdemRowSeekRun ended */
typedef enum IdemRowResult
{
	IDEM_ROW_ABSENT,			/* no row; the absent callback, if any, acted */
	IDEM_ROW_BUSY,				/* nowait, and another transaction holds it */
	IDEM_ROW_KEPT,				/* found; decided on it without writing */
	IDEM_ROW_DELETED,			/* found and deleted (then absent acted) */
	IDEM_ROW_LOCKED				/* found and locked, in lockslot */
} IdemRowResult;

typedef struct IdemRowSeek IdemRowSeek;

/* One seek: the caller fills the first part, probe fills the second */
struct IdemRowSeek
{
	Relation	heap;
	bool		nowait;			/* report BUSY rather than wait */
	XLTW_Oper	oper;			/* what a wait is reported as */
	/* find the row for the key under a dirty snapshot; false if none */
	bool		(*probe) (IdemRowSeek *seek);
	/* decide on the stable row the probe found */
	IdemRowAction (*decide) (IdemRowSeek *seek);
	/* act on the key's absence; false if a race was lost (seek again) */
	bool		(*absent) (IdemRowSeek *seek);
	/*
	 * NULL, or: does snap, the transaction snapshot with all of our own
	 * changes (IdemRowSeekRun makes it), still see a row for the key?
	 */
	bool		(*vanished) (IdemRowSeek *seek, Snapshot snap);
	/* raise the serialization failure of an unseen or moved row */
	void		(*conflict) (IdemRowSeek *seek) IdemNoreturnPointer;
	TupleTableSlot *lockslot;	/* receives the locked row, for LOCK */
	void	   *arg;			/* the caller's state */

	/* what the last probe found */
	ItemPointerData tid;
	TransactionId xwait;		/* its in-flight inserter or deleter */
	uint32		spec_token;		/* xwait's speculative insertion token */
	bool		ours;			/* inserted by this transaction */
	bool		unseen;			/* committed, but invisible to the
								 * transaction snapshot (REPEATABLE READ) */
	int			waits;			/* waits so far */
};

extern IdemRowResult IdemRowSeekRun(IdemRowSeek *seek);
extern void IdemRowSeekNoteDirty(IdemRowSeek *seek, Snapshot dirty,
								 HeapTuple tuple, Buffer buffer);
extern void IdemRowSeekNoteSlot(IdemRowSeek *seek, Snapshot dirty, TupleTableSlot *slot);

#endif							/* IDEM_ROWSEEK_H */
