/*
 * worker.c
 *	  The purge launcher and its short-lived per-database workers.
 *
 * With shared_preload_libraries = 'idempotency' the postmaster starts one
 * launcher.  Every idempotency.purge_interval it lists the databases that
 * accept connections and, one at a time, starts a dynamic background
 * worker connected to each; that worker runs one purge round (purge.c) and
 * exits.  So no worker slot is held for an idle database, no database needs
 * configuring, and a database without the extension costs a connection
 * that finds nothing and leaves quietly.
 *
 * Lifecycle:
 *	 - SIGHUP reloads the configuration; a new interval applies at once.
 *	 - SIGTERM stops the launcher, as in autoprewarm: its handler sets
 *	   ShutdownRequestPending and the latch, and the main loop ends.  The
 *	   current worker is terminated with it (a worker handles SIGTERM with
 *	   die(), as worker_spi's do, inside a batch too; a batch is one
 *	   transaction, so it rolls back whole).  The launcher exits with code
 *	   1, so the postmaster restarts it after bgw_restart_time, as it does
 *	   after a crash; at shutdown the postmaster restarts nothing.
 *	 - A round is bounded by idempotency.purge_max_runtime (purge.c cancels
 *	   each of its statements at the deadline); a worker still running
 *	   IDEM_WORKER_GRACE_MS later is terminated, so one database cannot
 *	   hold up the others' rounds.
 *	 - All waits are on the latch with WL_EXIT_ON_PM_DEATH, so the purge
 *	   never delays a shutdown.
 *	 - Nothing is done while the server is in recovery (a standby), nor in
 *	   binary upgrade mode; idempotency.purge_enabled = off pauses it.
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "store/store.h"
#include "base/base.h"
#include "purge.h"

PGDLLEXPORT void IdemLauncherMain(Datum arg);
PGDLLEXPORT void IdemPurgeWorkerMain(Datum arg);

/* GUC (defined in init/guc.c): time between rounds; the round's own are purge.c's */
int			idem_purge_interval = 60;

/*
 * How long past idempotency.purge_max_runtime the launcher lets a worker
 * run before terminating it: every statement of a round is cancelled at
 * the deadline, so this only catches a worker stuck where no cancel
 * reaches.
 */
#define IDEM_WORKER_GRACE_MS	10000L

/* Register the launcher when preloaded */
void
IdemWorkerInit(void)
{
	BackgroundWorker worker;


	if (!process_shared_preload_libraries_in_progress || IsBinaryUpgrade)
		return;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 5;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "idempotency");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "IdemLauncherMain");
	snprintf(worker.bgw_name, BGW_MAXLEN, "idempotency purge launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "idempotency purge launcher");
	RegisterBackgroundWorker(&worker);
}

/* The databases a round visits: those accepting connections */
static List *
IdemLauncherDatabases(MemoryContext cxt)
{
	List	   *dbs = NIL;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);
		MemoryContext oldcxt;

		if (!db->datallowconn || db->datistemplate)
			continue;
		oldcxt = MemoryContextSwitchTo(cxt);
		dbs = lappend_oid(dbs, db->oid);
		MemoryContextSwitchTo(oldcxt);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	PopActiveSnapshot();
	CommitTransactionCommand();
	return dbs;
}

/* Take in the configuration file again if SIGHUP asked; launcher and rounds */
void
IdemPurgeReloadConfig(void)
{
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
}

/* Wait on the latch up to ms, then take in interrupts and SIGHUP */
void
IdemPurgeWait(long ms)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 ms, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	IdemPurgeReloadConfig();
}

/* The launcher's sleep of up to ms; false on SIGTERM */
static bool
IdemLauncherSleep(long ms)
{
	if (ShutdownRequestPending)
		return false;
	IdemPurgeWait(ms);
	return !ShutdownRequestPending;
}

/*
 * Run one per-database worker to completion; false on SIGTERM.  A worker
 * still running well past its round's time is terminated, so that one
 * database cannot hold up the rounds of the others.
 */
static bool
IdemLauncherRunWorker(Oid dbid, bool generations_only)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	pid_t		pid;
	TimestampTz limit;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "idempotency");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "IdemPurgeWorkerMain");
	snprintf(worker.bgw_name, BGW_MAXLEN, "idempotency purge worker");
	snprintf(worker.bgw_type, BGW_MAXLEN, "idempotency purge worker");
	worker.bgw_main_arg = ObjectIdGetDatum(dbid);
	worker.bgw_extra[0] = generations_only ? 'g' : 'r';
	worker.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		ereport(LOG,
				(errmsg("idempotency purge launcher could not start a worker"),
				 errhint("Raise max_worker_processes.")));
		return IdemLauncherSleep(1000L);
	}
	limit = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										(int64) idem_purge_max_runtime + IDEM_WORKER_GRACE_MS);
	for (;;)
	{
		if (GetBackgroundWorkerPid(handle, &pid) == BGWH_STOPPED)
			return true;
		if (GetCurrentTimestamp() >= limit)
		{
			ereport(LOG,
					(errmsg("idempotency purge worker for database %u overran its round; terminating it", dbid)));
			TerminateBackgroundWorker(handle);
			(void) WaitForBackgroundWorkerShutdown(handle);
			return !ShutdownRequestPending;
		}
		if (!IdemLauncherSleep(1000L))
		{
			TerminateBackgroundWorker(handle);
			return false;
		}
	}
}

/*
 * Run a generations-only worker in each database whose claimers asked for
 * a switch; false on SIGTERM.  Not while the purge is paused.
 */
static bool
IdemLauncherSwitches(void)
{
	bool		found = true;

	/*
	 * Again until a scan finds none: a flag set while a worker ran had its
	 * wake-up consumed by the wait for that worker.  A request met while the
	 * purge is paused, on a standby or without a free worker slot is
	 * dropped; the next regular round switches what is over its bound.
	 */
	while (found && !ShutdownRequestPending)
	{
		int			cursor = 0;
		Oid			dbid;

		found = false;
		while ((dbid = IdemGenNextSwitchWanted(&cursor)) != InvalidOid)
		{
			found = true;
			if (!idem_purge_enabled || RecoveryInProgress())
				continue;
			if (!IdemLauncherRunWorker(dbid, true))
				return false;
		}
	}
	return !ShutdownRequestPending;
}

/* Wake the launcher, if there is one (after a claimer asked for a switch) */
void
IdemLauncherWake(void)
{
	Latch	   *latch;

	if (idem_shared == NULL)
		return;
	latch = idem_shared->launcher_latch;
	if (latch != NULL)
		SetLatch(latch);
}

/* At the launcher's exit: no latch to wake any more */
static void
IdemLauncherForgetLatch(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	if (idem_shared != NULL)
		idem_shared->launcher_latch = NULL;
}

/*
 * The launcher's main loop: a round over all databases every
 * idempotency.purge_interval.
 */
void
IdemLauncherMain(Datum arg pg_attribute_unused())
{
	MemoryContext cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();
	/* no database: pg_database is a shared catalog */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("idempotency purge launcher");
	cxt = AllocSetContextCreate(TopMemoryContext, "idempotency launcher",
								ALLOCSET_DEFAULT_SIZES);
	if (idem_shared != NULL)
	{
		idem_shared->launcher_latch = MyLatch;
		before_shmem_exit(IdemLauncherForgetLatch, 0);
	}

	while (!ShutdownRequestPending)
	{
		TimestampTz start = GetCurrentTimestamp();
		long		elapsed;

		if (idem_purge_enabled && !RecoveryInProgress())
		{
			List	   *dbs;
			ListCell   *lc;

			MemoryContextReset(cxt);
			dbs = IdemLauncherDatabases(cxt);
			foreach(lc, dbs)
			{
				if (!idem_purge_enabled || !IdemLauncherRunWorker(lfirst_oid(lc), false))
					break;
			}
		}

		/*
		 * Sleep out the interval, waking on SIGHUP to apply a new one, and
		 * when a claimer asks for a generation switch (IdemGenWantSwitch);
		 * requests made during the round are served first
		 */
		if (!IdemLauncherSwitches())
			break;
		elapsed = TimestampDifferenceMilliseconds(start, GetCurrentTimestamp());
		while (!ShutdownRequestPending &&
			   elapsed < (long) idem_purge_interval * 1000L)
		{
			if (!IdemLauncherSleep((long) idem_purge_interval * 1000L - elapsed) ||
				!IdemLauncherSwitches())
				break;
			elapsed = TimestampDifferenceMilliseconds(start, GetCurrentTimestamp());
		}
	}
	/* exit code 1: the postmaster restarts us, unless it is shutting down */
	proc_exit(1);
}

/*
 * A per-database worker: one purge round, then exit.
 */
void
IdemPurgeWorkerMain(Datum arg)
{
	Oid			dbid = DatumGetObjectId(arg);

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dbid, InvalidOid, 0);
	pgstat_report_appname("idempotency purge worker");

	if (!RecoveryInProgress())
		IdemPurgeDatabaseRound(MyBgworkerEntry->bgw_extra[0] == 'g');
	proc_exit(0);
}
