/*
 * rowseek.c
 *	  The one probe, wait and recheck loop, shared by claims, releases and
 *	  the row compare-and-set.
 *
 * Each of them finds the row for a key the way a unique check or an UPDATE
 * does (see execIndexing.c's check_exclusion_or_unique_constraint and
 * nodeModifyTable.c):
 *
 *	1. Probe for the key under a dirty snapshot, which sees in-flight rows.
 *	2. If a transaction is inserting, updating or deleting the row found,
 *	   wait for it (or only for its speculative insertion), then go to 1.
 *	3. In REPEATABLE READ or SERIALIZABLE, a row committed after our
 *	   snapshot is a serialization failure, as it is for UPDATE; so is a
 *	   key the snapshot still sees but a committed transaction removed
 *	   (the caller's vanished callback tells).
 *	4. Decide on the stable row.  If the decision needs a write, delete or
 *	   lock exactly that version; if it changed meanwhile, go to 1 (or, for
 *	   a lock under a transaction snapshot, fail as UPDATE would).
 *	5. If the key is absent (or its row was just deleted), let the caller
 *	   insert; if a concurrent inserter won the race, go to 1.
 *
 * Waits go through the lock manager or spectoken.c, so they honour
 * lock_timeout, statement_timeout, cancels and deadlock detection.  The
 * caller supplies the probe (claims read the claim cache and the claims
 * index; the CAS reads a user table's primary key), the decision and the
 * insertion; the loop owns waiting, rechecking and the write that makes the
 * decision stick.
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/snapmgr.h"

#include "rowseek.h"
#include "spectoken.h"

/*
 * Record in seek what a dirty snapshot says of the tuple it found: who to
 * wait for, whose it is, and whether our transaction snapshot may act on
 * it.  The caller holds a lock on buffer.
 */
void
IdemRowSeekNoteDirty(IdemRowSeek *seek, Snapshot dirty, HeapTuple tuple,
					 Buffer buffer)
{
	Assert(dirty->snapshot_type == SNAPSHOT_DIRTY);

	seek->tid = tuple->t_self;
	seek->xwait = TransactionIdIsValid(dirty->xmin) ? dirty->xmin : dirty->xmax;
	seek->spec_token = dirty->speculativeToken;
	seek->ours = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data));
	seek->unseen = IsolationUsesXactSnapshot() &&
		!seek->ours && !TransactionIdIsValid(seek->xwait) &&
		!HeapTupleSatisfiesVisibility(tuple, GetTransactionSnapshot(), buffer);
}

/*
 * IdemRowSeekNoteDirty for the version an index fetch under the dirty
 * snapshot left in a buffer heap slot
 */
void
IdemRowSeekNoteSlot(IdemRowSeek *seek, Snapshot dirty, TupleTableSlot *slot)
{
	BufferHeapTupleTableSlot *bslot = (BufferHeapTupleTableSlot *) slot;

	LockBuffer(bslot->buffer, BUFFER_LOCK_SHARE);
	IdemRowSeekNoteDirty(seek, dirty, ExecFetchSlotHeapTuple(slot, false, NULL), bslot->buffer);
	LockBuffer(bslot->buffer, BUFFER_LOCK_UNLOCK);
}

/* Wait for the transaction, or speculative insertion, the probe ran into */
static void
IdemRowSeekWait(IdemRowSeek *seek)
{
	seek->waits++;
	if (seek->spec_token != 0)
		IdemSpecTokenWait(seek->xwait, seek->spec_token);
	else
		XactLockTableWait(seek->xwait, seek->heap, &seek->tid, seek->oper);
}

/*
 * Run the loop described above until the caller's decision has been made
 * to stick; see IdemRowResult for how it ends.
 */
/*
 * Under a transaction snapshot: does the snapshot (with all of our own
 * changes) still see a row for the key that the dirty probe no longer
 * finds?  Then a transaction that committed after the snapshot removed
 * it, and an UPDATE or DELETE would fail to serialize.  The caller's
 * vanished callback probes again under that snapshot.
 */
static bool
IdemRowSeekVanished(IdemRowSeek *seek)
{
	SnapshotData snap = *GetTransactionSnapshot();

	snap.curcid = InvalidCommandId;
	return seek->vanished(seek, &snap);
}

IdemRowResult
IdemRowSeekRun(IdemRowSeek *seek)
{
	bool		deleted = false;

	seek->waits = 0;
	for (;;)
	{
		IdemRowAction action;
		TM_FailureData tmfd;
		TM_Result	result;

		CHECK_FOR_INTERRUPTS();

		if (!seek->probe(seek))
		{
			if (!deleted && seek->vanished != NULL &&
				IsolationUsesXactSnapshot() && IdemRowSeekVanished(seek))
				seek->conflict(seek);
			if (seek->absent == NULL || seek->absent(seek))
				return deleted ? IDEM_ROW_DELETED : IDEM_ROW_ABSENT;
			continue;			/* a concurrent inserter won: look again */
		}
		if (TransactionIdIsValid(seek->xwait))
		{
			if (seek->nowait)
				return IDEM_ROW_BUSY;
			IdemRowSeekWait(seek);
			continue;
		}
		if (seek->unseen)
			seek->conflict(seek);

		action = seek->decide(seek);
		if (action == IDEM_ROW_KEEP)
			return IDEM_ROW_KEPT;

		/*
		 * Write under a command id of our own, as SPI does for each
		 * statement: a row written earlier in this very command becomes
		 * visible to us, and a statement that goes on to write a row we
		 * wrote gets "tuple to be updated was already modified" rather than
		 * skipping it silently.
		 */
		CommandCounterIncrement();

		if (action == IDEM_ROW_DELETE)
		{
			CheckCmdReplicaIdentity(seek->heap, CMD_DELETE);
			result = IdemHeapDelete(seek->heap, &seek->tid,
									GetCurrentCommandId(true), InvalidSnapshot,
									!seek->nowait, &tmfd);
		}
		else
			result = table_tuple_lock(seek->heap, &seek->tid,
									  GetActiveSnapshot(), seek->lockslot,
									  GetCurrentCommandId(false),
									  LockTupleNoKeyExclusive,
									  seek->nowait ? LockWaitSkip : LockWaitBlock,
									  0, &tmfd);

		switch (result)
		{
			case TM_Ok:
				if (action == IDEM_ROW_LOCK)
					return IDEM_ROW_LOCKED;
				deleted = true;
				if (seek->absent == NULL || seek->absent(seek))
					return IDEM_ROW_DELETED;
				continue;		/* lost the insertion race: look again */
			case TM_BeingModified:
			case TM_WouldBlock:
				return IDEM_ROW_BUSY;	/* only without waiting */
			case TM_Updated:
			case TM_Deleted:
				if (action == IDEM_ROW_LOCK && IsolationUsesXactSnapshot())
					seek->conflict(seek);
				continue;		/* changed meanwhile: decide again */
			default:
				elog(ERROR, "unexpected tuple %s result %d",
					 action == IDEM_ROW_DELETE ? "delete" : "lock", (int) result);
		}
	}
}
