/*
 * gendb.c
 *	  Each database's entry in the generations' shared state (see
 *	  genfilter.c): the count of generations opened, which claimers read to
 *	  notice a switch their map missed, the switches in flight and wanted,
 *	  the claims this backend counted into its open generation, and
 *	  idempotency.claims's bitmap of announced namespaces.
 *
 * Entries are taken on demand, one per database a backend claims in; a
 * backend stays attached to its database's entry until it exits, and an
 * entry nobody is attached to may go to another database, its own getting
 * a fresh one when it comes back (IdemGenDbGet).  There are more entries
 * than backends, so any number of databases have one while they claim.
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"

#include "base/base.h"
#include "genfilter_int.h"

/* Wakes the launcher (purge/worker.c) for a wanted switch; set at init */
static void (*idem_gen_wake_launcher) (void) = NULL;

/* Register what wakes the launcher; called from _PG_init */
void
IdemGenSetLauncherWake(void (*wake) (void))
{
	idem_gen_wake_launcher = wake;
}

static IdemGenDb *idem_gen_mine = NULL; /* this database's, attached */
static IdemGenDb *idem_gen_switching_db = NULL;	/* counted as switching there */

/* Claims this backend inserted into one open generation, not yet counted */
#define IDEM_GEN_COUNT_BATCH	64
static int32 idem_count_gen = 0;
static int	idem_count_slot = -1;
static uint32 idem_count_pending = 0;
static uint64 idem_count_limit = 0;

/* The backend exits: it no longer holds what it read of its entry */
static void
IdemGenDbDetach(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	IdemGenDb  *db = idem_gen_mine;

	if (db == NULL)
		return;
	idem_gen_mine = NULL;
	pg_atomic_write_u64(&db->left_at,
						pg_atomic_fetch_add_u64(&idem_gen_shared->db_clock, 1) + 1);
	pg_write_barrier();
	(void) pg_atomic_fetch_sub_u32(&db->attached, 1);
}

/*
 * This database's shared state, got once per backend, which stays attached
 * to it until it exits (see IdemGenDb); NULL without shared memory or
 * outside a database.  A database without an entry takes a free one, or
 * else the one detached longest ago among those no backend is attached
 * to, no switch is in flight in, and preferably no switch is wanted in
 * (the launcher would not run the round asked for: the next purge round
 * switches instead).  Made with its root bitmap full and its count of
 * opens at 0: nobody attached has read the old one.  There are more
 * entries than backends (genfilter.c's IdemGenDbCount), so one can always be taken;
 * were none, the caller goes without, as without shared memory.
 */
static IdemGenDb *
IdemGenDbGet(void)
{
	static bool exit_hook = false;
	IdemGenDb  *found = NULL;
	IdemGenDb  *victim = NULL;
	int			victim_rank = 0;
	int			i;

	/* not again once exiting: IdemGenDbDetach may have run already */
	if (idem_gen_mine != NULL || idem_gen_shared == NULL || !OidIsValid(MyDatabaseId) ||
		proc_exit_inprogress)
		return idem_gen_mine;
	LWLockAcquire(idem_gen_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < idem_gen_shared->ndbs && found == NULL; i++)
	{
		IdemGenDb  *db = &idem_gen_shared->dbs[i];
		Oid			id = pg_atomic_read_u32(&db->dbid);
		int			rank;

		if (id == MyDatabaseId)
		{
			found = db;
			break;
		}
		/* 3: free; 2: idle; 1: idle but a switch wanted; 0: in use */
		if (id == InvalidOid)
			rank = 3;
		else if (pg_atomic_read_u32(&db->attached) != 0 ||
				 pg_atomic_read_u32(&db->switching) != 0)
			rank = 0;
		else
			rank = pg_atomic_read_u32(&db->switch_wanted) != 0 ? 1 : 2;
		if (rank > victim_rank ||
			(rank == victim_rank && rank > 0 && rank < 3 &&
			 pg_atomic_read_u64(&db->left_at) < pg_atomic_read_u64(&victim->left_at)))
		{
			victim = db;
			victim_rank = rank;
		}
	}
	if (found == NULL && victim != NULL)
	{
		int			w;

		if (victim_rank < 3)
			elog(DEBUG1, "database %u takes the shared generation state of database %u, idle",
				 MyDatabaseId, pg_atomic_read_u32(&victim->dbid));
		/* nobody is attached to it: only the launcher reads it, locked */
		pg_atomic_write_u32(&victim->dbid, InvalidOid);
		for (w = 0; w < IDEM_GEN_NS_WORDS; w++)
			pg_atomic_write_u64(&victim->rootbits[w], PG_UINT64_MAX);
		pg_atomic_write_u64(&victim->opens, 0);
		pg_atomic_write_u32(&victim->switching, 0);
		pg_atomic_write_u32(&victim->switch_wanted, 0);
		pg_atomic_write_u64(&victim->left_at, 0);
		pg_write_barrier();
		pg_atomic_write_u32(&victim->dbid, MyDatabaseId);
		found = victim;
	}
	if (found != NULL)
		(void) pg_atomic_fetch_add_u32(&found->attached, 1);
	LWLockRelease(idem_gen_shared->lock);
	if (found != NULL && !exit_hook)
	{
		/*
		 * on_shmem_exit, not before_shmem_exit: it runs after the abort of
		 * a transaction in flight (ShutdownPostgres), whose callbacks may
		 * still count claims here, and shared memory is still attached
		 */
		on_shmem_exit(IdemGenDbDetach, (Datum) 0);
		exit_hook = true;
	}
	return idem_gen_mine = found;
}

/*
 * How many generations this database has opened, or PG_UINT64_MAX if
 * unknown.  A switch counts before it commits; a claimer reads it before
 * reading its map and again after its insertion (a full barrier), and
 * reads the map again if it moved (claimstore.c).
 */
uint64
IdemGenOpensRead(void)
{
	IdemGenDb  *db = IdemGenDbGet();

	if (db == NULL)
		return PG_UINT64_MAX;
	pg_memory_barrier();
	return pg_atomic_read_u64(&db->opens);
}

/*
 * Count a generation about to be opened; before its transaction commits.
 * The transaction counts as switching (IdemGenSwitchInFlight) until it
 * ends, first, so that whoever reads the count of opens including this one
 * and then finds no switch in flight knows this one committed (or
 * aborted) before.
 */
void
IdemGenOpensBump(void)
{
	IdemGenDb  *db = IdemGenDbGet();

	if (db == NULL)
		return;
	if (idem_gen_switching_db == NULL)
	{
		(void) pg_atomic_fetch_add_u32(&db->switching, 1);
		idem_gen_switching_db = db;
	}
	(void) pg_atomic_fetch_add_u64(&db->opens, 1);
}

/*
 * Is a transaction that opened a generation in flight in this database?
 * Read after the count of opens: if not, every open counted there has
 * committed, and is seen by a snapshot taken next, or has aborted.
 */
bool
IdemGenSwitchInFlight(void)
{
	IdemGenDb  *db = IdemGenDbGet();

	if (db == NULL)
		return false;
	pg_memory_barrier();
	return pg_atomic_read_u32(&db->switching) > 0;
}

/*
 * The transaction ends (transaction callback): it no longer counts as
 * switching.  At commit this runs once the transaction is visible to new
 * snapshots.  A transaction that opened a generation cannot be prepared:
 * its generation would stay unseen while counted.
 */
void
IdemGenSwitchEnd(XactEvent event)
{
	if (idem_gen_switching_db == NULL)
		return;
	if (event == XACT_EVENT_PRE_PREPARE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that has opened a claim generation")));
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
	{
		(void) pg_atomic_fetch_sub_u32(&idem_gen_switching_db->switching, 1);
		idem_gen_switching_db = NULL;
	}
}

/*
 * The extension is being dropped in this database: forget its slots, and
 * fill its root bitmap, since a new extension starts its ids over
 */
void
IdemGenDbForget(void)
{
	IdemGenDb  *db = IdemGenDbGet();
	int			i;

	if (idem_gen_shared == NULL)
		return;
	LWLockAcquire(idem_gen_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < IDEM_GEN_SLOTS; i++)
	{
		uint64		k = pg_atomic_read_u64(&idem_gen_shared->slots[i].key);

		if (k != 0 && (Oid) (k >> 32) == MyDatabaseId)
			IdemGenSlotFreeAt(i);
	}
	LWLockRelease(idem_gen_shared->lock);
	if (db != NULL)
	{
		IdemGenRootAnnounceAll();
		(void) pg_atomic_fetch_add_u64(&db->opens, 1);
	}
}

/*
 * Add this backend's pending count to its generation's (before a
 * maintenance pass reads it, at transaction end, and every batch), and ask
 * for a switch if that made it reach the limit: only the backend whose
 * addition crosses it asks, once per generation.  Nothing is pending
 * without shared memory.
 */
void
IdemGenCountFlushPending(void)
{
	uint64		before;

	if (idem_count_pending == 0)
		return;
	if (IdemGenSlotIs(idem_count_slot, idem_count_gen))
	{
		before = pg_atomic_fetch_add_u64(&idem_gen_shared->slots[idem_count_slot].claims,
										 idem_count_pending);
		if (idem_count_limit > 0 && before < idem_count_limit &&
			before + idem_count_pending >= idem_count_limit)
			IdemGenWantSwitch();
	}
	idem_count_pending = 0;
}

/*
 * Count a claim this backend inserted into open generation gen_id, whose
 * class switches at limit claims (0: no bound).  Counted in batches, so a
 * generation may take a batch per backend more than its bound before the
 * switch is asked for, and then whatever arrives until the switch.
 */
void
IdemGenCountClaim(int slot, int32 gen_id, uint64 limit)
{
	if (idem_gen_shared == NULL || slot < 0)
		return;
	if (gen_id != idem_count_gen || slot != idem_count_slot)
	{
		IdemGenCountFlushPending();
		idem_count_gen = gen_id;
		idem_count_slot = slot;
	}
	idem_count_limit = limit;
	if (++idem_count_pending >= IDEM_GEN_COUNT_BATCH)
		IdemGenCountFlushPending();
}

/*
 * The claims counted in open generation gen_id since its slot was made:
 * since it was opened, or since the server started.  0 when unknown.
 */
uint64
IdemGenSlotClaims(int slot, int32 gen_id)
{
	uint64		n;

	if (idem_gen_shared == NULL || slot < 0)
		return 0;
	n = pg_atomic_read_u64(&idem_gen_shared->slots[slot].claims);
	pg_read_barrier();
	return IdemGenSlotIs(slot, gen_id) ? n : 0;
}

/*
 * An open generation of this database reached its size bound: flag the
 * database and wake the launcher, which runs a generations-only round here
 * without waiting for the next purge interval.
 */
void
IdemGenWantSwitch(void)
{
	IdemGenDb  *db = IdemGenDbGet();

	if (db == NULL)
		return;
	pg_atomic_write_u32(&db->switch_wanted, 1);
	pg_memory_barrier();
	if (idem_gen_wake_launcher)
		idem_gen_wake_launcher();
}

/*
 * For the launcher: a database that asked for a switch since the last
 * call, its flag cleared; InvalidOid when none.  *cursor starts at 0.
 */
Oid
IdemGenNextSwitchWanted(int *cursor)
{
	Oid			wanted = InvalidOid;

	if (idem_gen_shared == NULL)
		return InvalidOid;
	/* an entry is given to another database under the lock only */
	LWLockAcquire(idem_gen_shared->lock, LW_SHARED);
	for (; *cursor < idem_gen_shared->ndbs && wanted == InvalidOid; (*cursor)++)
	{
		IdemGenDb  *db = &idem_gen_shared->dbs[*cursor];
		Oid			dbid = pg_atomic_read_u32(&db->dbid);

		if (dbid != InvalidOid && pg_atomic_read_u32(&db->switch_wanted) != 0 &&
			pg_atomic_exchange_u32(&db->switch_wanted, 0) != 0)
			wanted = dbid;
	}
	LWLockRelease(idem_gen_shared->lock);
	return wanted;
}

/* Announce a claim of nsid about to be inserted into idempotency.claims */
void
IdemGenRootAnnounce(int32 nsid)
{
	IdemGenDb  *db = IdemGenDbGet();

	if (db != NULL)
		IdemBitmapAnnounce(db->rootbits, nsid);
}

/* Something writes idempotency.claims by hand: any namespace may follow */
void
IdemGenRootAnnounceAll(void)
{
	IdemGenDb  *db = IdemGenDbGet();
	int			w;

	if (db == NULL)
		return;
	for (w = 0; w < IDEM_GEN_NS_WORDS; w++)
		if (pg_atomic_read_u64(&db->rootbits[w]) != PG_UINT64_MAX)
			(void) pg_atomic_fetch_or_u64(&db->rootbits[w], PG_UINT64_MAX);
	pg_memory_barrier();
}

/* Might idempotency.claims hold claims of nsid?  true when unsure */
bool
IdemGenRootMayHold(int32 nsid)
{
	IdemGenDb  *db = IdemGenDbGet();

	return db == NULL || IdemBitmapHas(db->rootbits, nsid);
}

/*
 * idempotency.claims holds no entry and nobody can be writing it (the
 * caller holds a SHARE lock on it): forget every announcement
 */
void
IdemGenRootClear(void)
{
	IdemGenDb  *db = IdemGenDbGet();
	int			w;

	if (db == NULL)
		return;
	for (w = 0; w < IDEM_GEN_NS_WORDS; w++)
		pg_atomic_write_u64(&db->rootbits[w], 0);
	pg_memory_barrier();
}

