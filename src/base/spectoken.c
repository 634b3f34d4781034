/*
 * spectoken.c
 *	  Speculative insertion tokens that cost no lock-manager round trip.
 *
 * A speculative insertion (see claimstore.c) marks its heap tuple with a
 * token, so that a concurrent claimer who finds the tuple can wait for the
 * insertion to be confirmed or super-deleted, rather than for the whole
 * transaction.  PostgreSQL implements the token as a heavyweight lock
 * (SpeculativeInsertionLockAcquire), which costs two trips through the
 * shared lock table per claim, some 12% of a claim's CPU time.
 *
 * Here, with shared memory, each backend owns a slot holding the token of
 * its insertion in progress, and a condition variable.  Acquiring the token
 * is an atomic store; releasing it an atomic store and a broadcast; a waiter
 * sleeps on the slot's condition variable until the slot no longer holds the
 * token.  The token encodes the slot (the inserter's pgprocno), tagged with
 * the top bit.
 *
 * The deadlock detector does not see these waits.  This is safe because
 * the holder waits for no lock and no transaction while holding its token:
 * between heap_insert and confirming or super-deleting the tuple it
 * inserts index entries, unique ones with UNIQUE_CHECK_PARTIAL, which does
 * not wait, and, in a class with generations, probes the other relations
 * (claimstore.c, IdemCheckElsewhere), taking only locks that are free at
 * once: one that is not makes it withdraw its tuple, release the token, and
 * only then wait for the lock.  Its one wait is for the token of another
 * speculative insertion of the same key whose xid is younger than its own
 * (the older waits, the younger withdraws), and that holder keeps the same
 * rule.  So waits for tokens go from older to younger xids, never in a
 * cycle, and each ends once the youngest of the chain finishes inserting.
 * (Catalog reads are the exception: the relcache entry of a generation
 * opened for the first time, idempotency.generations read again after a
 * switch; they queue only behind DDL on those catalogs.)  A wait honours
 * lock_timeout, statement_timeout and cancels, as every wait should.  If
 * the holder errors out, the (sub)transaction abort callbacks clear the
 * slot.
 *
 * Without shared memory (no shared_preload_libraries), or before
 * PostgreSQL 15, where the number of backends is not known when shared
 * memory is sized, the core lock-based tokens are used.  A backend running
 * PostgreSQL's own code that meets one of our tokens (say, someone running
 * INSERT ... ON CONFLICT on idempotency.claims by hand) finds no lock to
 * wait on and simply retries until the insertion is done.
 */
#include "postgres.h"

#include "access/twophase.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/timeout.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "spectoken.h"

/* Our tokens have the top bit set; the slot number follows */
#define IDEM_TOKEN_FLAG		0x80000000U
#define IDEM_TOKEN_SEQ_BITS	12
#define IDEM_TOKEN_SEQ_MASK	((1U << IDEM_TOKEN_SEQ_BITS) - 1)
#define IDEM_TOKEN_MAX_SLOT	((IDEM_TOKEN_FLAG - 1) >> IDEM_TOKEN_SEQ_BITS)

/* One backend's insertion in progress */
typedef struct IdemSpecSlot
{
	pg_atomic_uint32 token;		/* token of the insertion, or 0 */
	ConditionVariable cv;		/* waiters sleep here */
} IdemSpecSlot;

static IdemSpecSlot *idem_spec_slots = NULL;
static int	idem_spec_nslots = 0;

/* This backend's slot while it holds a token, and its sequence */
static IdemSpecSlot *idem_spec_held = NULL;
static uint32 idem_spec_seq = 0;

/* Number of slots: one per PGPROC */
static int
IdemSpecTokenSlots(void)
{
	return IdemAllProcSlots();	/* 0 where MaxBackends is unknown then */
}

/* Shared memory for the slots */
Size
IdemSpecTokenShmemSize(void)
{
	return mul_size(IdemSpecTokenSlots(), sizeof(IdemSpecSlot));
}

/* Create or attach to the slots; caller holds AddinShmemInitLock */
void
IdemSpecTokenShmemInit(void)
{
	int			n = IdemSpecTokenSlots();
	bool		found;
	int			i;

	if (n == 0 || n > (int) IDEM_TOKEN_MAX_SLOT)
		return;
	idem_spec_slots = ShmemInitStruct("idempotency speculative tokens",
									  IdemSpecTokenShmemSize(), &found);
	if (!found)
	{
		for (i = 0; i < n; i++)
		{
			pg_atomic_init_u32(&idem_spec_slots[i].token, 0);
			ConditionVariableInit(&idem_spec_slots[i].cv);
		}
	}
	idem_spec_nslots = n;
}

/* Clear our slot and wake its waiters */
static void
IdemSpecTokenClear(void)
{
	IdemSpecSlot *slot = idem_spec_held;

	idem_spec_held = NULL;
	pg_memory_barrier();		/* the tuple's new state first */
	pg_atomic_write_u32(&slot->token, 0);
	pg_memory_barrier();
	ConditionVariableBroadcast(&slot->cv);
}

/* An error between acquire and release must not leave the token set */
static void
IdemSpecTokenXactCallback(XactEvent event, void *arg pg_attribute_unused())
{
	if (idem_spec_held != NULL &&
		(event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT))
		IdemSpecTokenClear();
}

static void
IdemSpecTokenSubXactCallback(SubXactEvent event,
							 SubTransactionId mySubid pg_attribute_unused(),
							 SubTransactionId parentSubid pg_attribute_unused(),
							 void *arg pg_attribute_unused())
{
	if (idem_spec_held != NULL && event == SUBXACT_EVENT_ABORT_SUB)
		IdemSpecTokenClear();
}

/* Register the abort callbacks; called from _PG_init */
void
IdemSpecTokenInit(void)
{
	RegisterXactCallback(IdemSpecTokenXactCallback, NULL);
	RegisterSubXactCallback(IdemSpecTokenSubXactCallback, NULL);
}

/* Take a token for an insertion by xid; never returns 0 */
uint32
IdemSpecTokenAcquire(TransactionId xid)
{
	int			procno;
	uint32		token;

	if (idem_spec_slots == NULL)
		return SpeculativeInsertionLockAcquire(xid);

	procno = IdemMyProcNumber();
	Assert(procno >= 0 && procno < idem_spec_nslots);
	Assert(idem_spec_held == NULL);
	idem_spec_seq = (idem_spec_seq % IDEM_TOKEN_SEQ_MASK) + 1;
	token = IDEM_TOKEN_FLAG | ((uint32) procno << IDEM_TOKEN_SEQ_BITS) | idem_spec_seq;
	idem_spec_held = &idem_spec_slots[procno];
	/* full barrier: the token is visible before the tuple carrying it */
	(void) pg_atomic_exchange_u32(&idem_spec_held->token, token);
	return token;
}

/* The insertion is confirmed or super-deleted: release the token */
void
IdemSpecTokenRelease(TransactionId xid, uint32 token pg_attribute_unused())
{
	if (idem_spec_slots == NULL)
		SpeculativeInsertionLockRelease(xid);
	else if (idem_spec_held != NULL)
		IdemSpecTokenClear();
}

/* Wait until the insertion by xid holding token is confirmed or undone */
void
IdemSpecTokenWait(TransactionId xid, uint32 token)
{
	IdemSpecSlot *slot;
	int			procno;

	if (idem_spec_slots == NULL || (token & IDEM_TOKEN_FLAG) == 0)
	{
		SpeculativeInsertionWait(xid, token);
		return;
	}
	procno = (token & ~IDEM_TOKEN_FLAG) >> IDEM_TOKEN_SEQ_BITS;
	if (procno >= idem_spec_nslots)
	{
		SpeculativeInsertionWait(xid, token);
		return;
	}

	slot = &idem_spec_slots[procno];
	if (pg_atomic_read_u32(&slot->token) != token)
		return;

	/*
	 * Honour lock_timeout as a lock wait would: its timeout interrupts the
	 * sleep and ProcessInterrupts reports it.  statement_timeout and
	 * cancels interrupt the sleep by themselves.
	 */
	if (LockTimeout > 0)
		enable_timeout_after(LOCK_TIMEOUT, LockTimeout);
	ConditionVariablePrepareToSleep(&slot->cv);
	while (pg_atomic_read_u32(&slot->token) == token)
		ConditionVariableSleep(&slot->cv, PG_WAIT_EXTENSION);
	ConditionVariableCancelSleep();
	if (LockTimeout > 0)
		disable_timeout(LOCK_TIMEOUT, false);
}
