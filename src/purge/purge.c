/*
 * purge.c
 *	  Deleting expired claims and expired rows of registered user tables.
 *
 * A purge works through a target (idempotency.claims, requests, tokens, or
 * a user table registered with idem_purge_policy_add) in batches.  A batch
 * is one statement: pick up to batch expired rows after a TID cursor,
 * locking them FOR UPDATE SKIP LOCKED, and delete them.  On PostgreSQL 14
 * and later a batch of claims does the same in C instead (claimstore.c): a
 * TID range scan and heap_delete without waiting, which skips any row a
 * transaction in flight has locked or changed, with no row lock of its own.
 * So a batch
 *
 *	 - never waits on a row: rows being claimed, taken over or released by a
 *	   transaction in flight are skipped and left to the next round, and
 *	   claims whose inserting transaction is in flight are invisible to it;
 *	 - never deletes an unexpired row: the expiry is tested against the row
 *	   version it locks or deletes;
 *	 - moves forward through the heap by TID (a TID range scan), so a round
 *	   reads the table once however many batches it takes.
 *
 * The background worker (worker.c) runs each batch in its own short
 * transaction with a short lock_timeout, halving the batch after a timeout
 * and growing it back after successes, and bounds a round by
 * idempotency.purge_max_runtime.  idem_purge() runs the same batches in the
 * caller's transaction.  After a worker round that deleted claims, the
 * claims table is vacuumed, so that the space is reused and the store
 * stays the size of its live rows.
 *
 * Claims use the same expiry rule as the claim functions: claimed_at plus
 * the namespace's TTL, computed in UTC, before now().  Requests follow the
 * same rule from completed_at (created_at while unfinished), but a live
 * lease is never purged; tokens go at their expiry.  User tables use
 * "time column < now() - ttl".  Deletes on a user table run as its owner,
 * never as a superuser acting for others.
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension_d.h"
#include "catalog/pg_type_d.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "commands/vacuum.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_node.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/bufmgr.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "nodes/parsenodes.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"
#include "utils/portal.h"

#include "base/base.h"
#include "store/store.h"
#include "catalog/idem_catalog.h"
#include "purge.h"
#include "requests/requests.h"


/* Pause between the passes of a generations-only round that left steps */
#define IDEM_PURGE_RETRY_MS		200

/*
 * What the purge deletes: one of the extension's tables (claims, requests,
 * tokens), or a registered user table
 */
typedef struct IdemPurgeTarget
{
	bool		is_claims;		/* count deletions per namespace */
	bool		is_internal;	/* one of ours: pin search_path */
	Oid			relid;
	Oid			owner;			/* deletes run as this role */
	char	   *label;			/* table name, for runs and logs */
	ItemPointerData resume;		/* where a worker round starts: where the
								 * last one stopped short, else (0,0) */
	int64		last_run;		/* run_id of its last recorded worker run, or 0 */
	int			order;			/* its place in IdemPurgeTargets' list */
	const char *sql;			/* the batch statement */
	Interval	ttl;			/* user tables: $3 of the statement */
} IdemPurgeTarget;

/* The outcome of purging one target */
typedef struct IdemPurgeResult
{
	TimestampTz started_at;
	int64		rows;
	int			batches;
	int			timeouts;
	bool		complete;		/* read to the end of the table */
	bool		resumable;		/* stopped by the deadline or a pause */
	ItemPointerData resume;		/* then: where the next worker round goes on */
	char	   *error;			/* the error that stopped it, or NULL */
} IdemPurgeResult;

PG_FUNCTION_INFO_V1(idem_purge);
PG_FUNCTION_INFO_V1(idem_purge_run);

/* GUCs of a purge round */
bool		idem_purge_enabled = true;
int			idem_purge_max_runtime = 30000;
int			idem_purge_batch_size = 10000;
int			idem_purge_history = 1000;
bool		idem_log_purge = false;

/*
 * The one purge batch statement, for every target.  Its arguments: 1 the
 * table, 2 a join the expiry needs (or nothing), 3 the expiry predicate on
 * alias t, 4 the namespace of a deleted row (or NULL); its parameters: $1
 * the TID cursor, $2 the batch size, $3 a user table's TTL, $4 the last TID
 * of the batch's window (see IDEM_PURGE_WINDOW_BLOCKS).  It returns
 * the new cursor, the rows seen, the rows deleted and the namespaces of
 * deleted rows.  Every operator and function is named with its schema, as
 * a user table's batch runs with its owner's search_path.  ONLY: TIDs are
 * per table, and inheritance children have their own.  The cursor is the
 * largest TID picked, so the scan must return rows in TID order: a TID
 * range scan does, and a sequential scan does without synchronized scans
 * (which IdemPurgeBatch turns off); FOR UPDATE rules out a parallel plan.
 */
static const char *const idem_purge_batch_sql =
"WITH victims AS MATERIALIZED ("
"  SELECT t.ctid AS tid FROM ONLY %1$s t%2$s"
"   WHERE t.ctid OPERATOR(pg_catalog.>) $1 AND t.ctid OPERATOR(pg_catalog.<=) $4 AND %3$s"
"   LIMIT $2 FOR UPDATE OF t SKIP LOCKED),"
" gone AS ("
"  DELETE FROM ONLY %1$s WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT tid FROM victims))"
"  RETURNING %4$s AS ns)"
"SELECT (SELECT pg_catalog.max(tid) FROM victims), (SELECT pg_catalog.count(*) FROM victims),"
"       (SELECT pg_catalog.count(*) FROM gone),"
"       (SELECT pg_catalog.array_agg(ns) FROM gone WHERE ns IS NOT NULL)";

/* The join that gives an internal table's rows their namespace's TTL */
#define IDEM_PURGE_NS_JOIN \
	" JOIN idempotency.namespaces n ON n.id OPERATOR(pg_catalog.=) t.ns"

/* One of the extension's own tables as a purge target */
static IdemPurgeTarget *
IdemPurgeInternal(Oid relid, const char *label, const char *join,
				  const char *expired, const char *ns)
{
	IdemPurgeTarget *t = palloc0(sizeof(IdemPurgeTarget));

	t->is_internal = true;
	t->relid = relid;
	t->owner = IdemRelationOwner(relid);
	t->label = pstrdup(label);
	t->sql = psprintf(idem_purge_batch_sql, label, join, expired, ns);
	return t;
}

/* Append the target of a purge policy row to the List * arg */
static void
IdemPurgePolicyTarget(HeapTuple tup, TupleDesc desc, void *arg)
{
	List	  **targets = arg;
	bool		isnull;
	Oid			relid = DatumGetObjectId(SPI_getbinval(tup, desc, 1, &isnull));
	char	   *column = SPI_getvalue(tup, desc, 2);
	Interval   *ttl = DatumGetIntervalP(SPI_getbinval(tup, desc, 3, &isnull));
	char	   *nspname = get_namespace_name(get_rel_namespace(relid));
	char	   *relname = get_rel_name(relid);
	IdemPurgeTarget *t;
	char	   *quoted;

	if (nspname == NULL || relname == NULL)
		return;					/* dropped meanwhile */
	quoted = quote_qualified_identifier(nspname, relname);
	t = palloc0(sizeof(IdemPurgeTarget));
	t->relid = relid;
	t->owner = IdemRelationOwner(relid);
	t->label = quoted;
	t->sql = psprintf(idem_purge_batch_sql, quoted, "",
					  psprintf("t.%s OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $3)",
							   quote_identifier(column)),
					  "NULL::pg_catalog.int4");
	t->ttl = *ttl;
	*targets = lappend(*targets, t);
}

/*
 * The targets of a purge: the claims, requests and tokens, then every
 * registered user table that still exists.  Allocated in the current
 * memory context; call within a transaction.
 */
static List *
IdemPurgeTargets(void)
{
	IdemCatalog cat = IdemGetCatalog();
	IdemPurgeTarget *t;
	List	   *targets = NIL;

	t = IdemPurgeInternal(cat.claims, "idempotency.claims", IDEM_PURGE_NS_JOIN,
						  "idempotency.idem_expires_at(t.claimed_at, n.ttl) OPERATOR(pg_catalog.<) pg_catalog.now()",
						  "ns");
	t->is_claims = true;
	targets = lappend(targets, t);
	targets = lappend(targets,
					  IdemPurgeInternal(cat.requests, "idempotency.requests", IDEM_PURGE_NS_JOIN,
										IDEM_REQUEST_EXPIRED_SQL("t.", "n.ttl"),
										"NULL::pg_catalog.int4"));
	targets = lappend(targets,
					  IdemPurgeInternal(cat.tokens, "idempotency.tokens", "",
										"t.expires_at OPERATOR(pg_catalog.<) pg_catalog.clock_timestamp()",
										"NULL::pg_catalog.int4"));

	(void) IdemOwnerRun(cat.claims, IDEM_RUN_READ_ONLY | IDEM_RUN_LATEST,
						"SELECT p.rel::oid, p.time_column, p.ttl FROM idempotency.purge_policies p"
						" JOIN pg_catalog.pg_class c ON c.oid = p.rel ORDER BY p.rel",
						0, NULL, NULL, NULL, IdemPurgePolicyTarget, &targets);
	return targets;
}

/* Count deleted claims per namespace into the shared statistics */
static void
IdemPurgeCountNamespaces(Datum nsarray)
{
	ArrayType  *arr = DatumGetArrayTypeP(nsarray);
	int			n = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
	int32	   *ns = palloc(sizeof(int32) * Max(n, 1));
	int			i;
	int			start = 0;

	memcpy(ns, ARR_DATA_PTR(arr), sizeof(int32) * n);	/* int4[] without nulls */
	qsort(ns, n, sizeof(int32), IdemInt32Compare);
	for (i = 1; i <= n; i++)
	{
		if (i < n && ns[i] == ns[start])
			continue;
		IdemStatsAdd(IdemStatsLookup(MyDatabaseId, IdemGetCatalog().namespaces, ns[start]), IDEM_STAT_PURGED, i - start);
		start = i;
	}
	pfree(ns);
}

#ifdef IDEM_HAVE_TID_RANGE_SCAN
/*
 * A batch of the claims table, natively (claimstore.c): one WAL record per
 * row, where the equivalent statement locks each row before deleting it
 * (two), and a fraction of its CPU.  Counts the deleted claims per
 * namespace.
 */
static int64
IdemPurgeClaimsBatch(int batch, ItemPointer cursor, bool *more)
{
	IdemStore	store;
	IdemNamespace *nss;
	int64	   *counts;
	int			nns;
	int64		deleted;

	nss = IdemNamespaceLoadAll(&nns);
	counts = palloc0(sizeof(int64) * Max(nns, 1));
	IdemStoreOpen(&store, IDEM_OP_PURGE, false);
	deleted = IdemStorePurgeBatch(&store, nss, nns, counts, batch, cursor, more);
	IdemStoreClose(&store);
	for (int i = 0; i < nns; i++)
		if (counts[i] > 0)
			IdemStatsAdd(IdemStatsLookup(MyDatabaseId, IdemGetCatalog().namespaces, nss[i].id), IDEM_STAT_PURGED,
						 counts[i]);
	pfree(counts);
	pfree(nss);
	return deleted;
}
#endif

/*
 * Delete up to batch expired rows of target after *cursor, within one
 * window of pages, as the target's owner (the native claims batch needs no
 * role: it checks no privilege).  Call within a transaction with an active
 * snapshot.  Advances *cursor; *more is false when the table has been read
 * to its end.  Returns the number of rows deleted.
 */
static int64
IdemPurgeBatch(IdemPurgeTarget *target, int batch, ItemPointer cursor, bool *more)
{
	IdemOwnerScope scope;
	Oid			argtypes[4] = {TIDOID, INT4OID, INTERVALOID, TIDOID};
	Datum		args[4];
	ItemPointerData window_end;
	BlockNumber nblocks;
	int64		deleted = 0;
	int64		seen = 0;

#ifdef IDEM_HAVE_TID_RANGE_SCAN
	if (target->is_claims)
		return IdemPurgeClaimsBatch(batch, cursor, more);
#endif

	args[0] = PointerGetDatum(cursor);	/* tid is passed by reference */
	args[1] = Int32GetDatum(batch);
	args[2] = IntervalPGetDatum(&target->ttl);
#ifdef IDEM_HAVE_TID_RANGE_SCAN
	IdemPurgeWindowEnd(cursor, &window_end);
#else
	/* no TID range scan: a window would not bound the scan, only repeat it */
	ItemPointerSet(&window_end, MaxBlockNumber, PG_UINT16_MAX);
#endif
	args[3] = PointerGetDatum(&window_end);
	{
		Relation	rel = try_table_open(target->relid, AccessShareLock);

		if (rel == NULL)
		{
			*more = false;		/* dropped since the targets were listed */
			return 0;
		}
		nblocks = RelationGetNumberOfBlocks(rel);
		table_close(rel, NoLock);
	}

	IdemSpiScopeBegin(&scope, target->owner, target->is_internal);
	(void) set_config_option("synchronize_seqscans", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	if (SPI_execute_with_args(target->sql, 4, argtypes, args,
							  NULL, false, 0) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "purge of %s failed", target->label);
	else
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		d;

		d = SPI_getbinval(tup, desc, 1, &isnull);
		if (!isnull)
			*cursor = *(ItemPointer) DatumGetPointer(d);
		seen = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
		deleted = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
		d = SPI_getbinval(tup, desc, 4, &isnull);
		if (!isnull)
			IdemPurgeCountNamespaces(d);
	}
	IdemOwnerScopeEnd(&scope);
	/* a full batch: the window may hold more */
	*more = seen >= batch || IdemPurgeWindowFinish(cursor, &window_end, nblocks);
	return deleted;
}

/* Add a purge run to idempotency.purge_runs, keeping its history bounded */
static void
IdemPurgeRecord(IdemPurgeTarget *target, IdemPurgeResult *result,
				const char *trigger)
{
	IdemCatalog cat = IdemGetCatalog();
	Oid			argtypes[9] = {TIMESTAMPTZOID, TEXTOID, TEXTOID, INT8OID,
	INT4OID, INT4OID, TEXTOID, TEXTOID, TIDOID};
	Datum		args[9];
	char		nulls[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	const char *appname = GetConfigOption("application_name", true, false);
	Oid			histtypes[1] = {INT4OID};
	Datum		hist[1];

	args[0] = TimestampTzGetDatum(result->started_at);
	args[1] = CStringGetTextDatum(target->label);
	args[2] = CStringGetTextDatum(trigger);
	args[3] = Int64GetDatum(result->rows);
	args[4] = Int32GetDatum(result->batches);
	args[5] = Int32GetDatum(result->timeouts);
	if (result->error != NULL)
		args[6] = CStringGetTextDatum(result->error);
	else
		nulls[6] = 'n';
	if (appname != NULL && appname[0] != '\0')
		args[7] = CStringGetTextDatum(appname);
	else
		nulls[7] = 'n';
	if (!result->complete && result->resumable && strcmp(trigger, "worker") == 0)
		args[8] = PointerGetDatum(&result->resume);
	else
		nulls[8] = 'n';
	hist[0] = Int32GetDatum(idem_purge_history);

	(void) IdemOwnerRun(cat.claims, 0,
						"INSERT INTO idempotency.purge_runs"
						" (started_at, finished_at, target, trigger, rows_deleted,"
						"  batches, timeouts, error, application_name, resume_after)"
						" VALUES ($1, clock_timestamp(), $2, $3, $4, $5, $6, $7, $8, $9)",
						9, argtypes, args, nulls, NULL, NULL);
	(void) IdemOwnerRun(cat.claims, 0,
						"DELETE FROM idempotency.purge_runs"
						" WHERE run_id <= (SELECT max(run_id) FROM idempotency.purge_runs) - $1"
						/* not the newest worker run of a target: its resume point */
						"   AND run_id NOT IN (SELECT DISTINCT ON (target) run_id"
						"                        FROM idempotency.purge_runs WHERE trigger = 'worker'"
						"                       ORDER BY target, run_id DESC)",
						1, histtypes, hist, NULL, NULL, NULL);
}

/* Is the extension there, and not being dropped?  Locks it for this xact */
static bool
IdemPurgeExtensionReady(void)
{
	Oid			extoid = get_extension_oid("idempotency", true);

	if (!OidIsValid(extoid))
		return false;
	if (!ConditionalLockDatabaseObject(ExtensionRelationId, extoid, 0, AccessShareLock))
		return false;
	/* the lock processed invalidations: is it still there? */
	return get_extension_oid("idempotency", true) == extoid;
}

/*
 * Throttle this worker's VACUUM as autovacuum throttles its own: its
 * cost-based delay and limit, where set, replace vacuum_cost_delay and
 * vacuum_cost_limit (which default to no delay for a manual VACUUM).  The
 * settings are made for the session, because VACUUM commits the transaction
 * it starts in, and the worker exits after its round.
 */
static void
IdemPurgeVacuumLikeAutovacuum(void)
{
	static const char *const pairs[][2] = {
		{"autovacuum_vacuum_cost_delay", "vacuum_cost_delay"},
		{"autovacuum_vacuum_cost_limit", "vacuum_cost_limit"},
	};

	for (size_t i = 0; i < lengthof(pairs); i++)
	{
		const char *value = GetConfigOption(pairs[i][0], false, false);

		/* -1 means "use the vacuum_ setting" */
		if (value != NULL && strcmp(value, "-1") != 0)
			(void) set_config_option(pairs[i][1], value, PGC_USERSET, PGC_S_SESSION,
									 GUC_ACTION_SET, true, 0, false);
	}
}

/*
 * Start a transaction of a worker round, with statement_timeout armed for
 * what is left of the round, or for floor_ms if that is longer (for the
 * bookkeeping that must be done even after a timeout).  The worker runs no
 * client protocol, which is where statement_timeout is normally armed, so
 * it is armed here; IdemPurgeXactTimeoutOff disarms it.
 */
static void
IdemPurgeXactStart(TimestampTz deadline, long floor_ms)
{
	long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	enable_timeout_after(STATEMENT_TIMEOUT, (int) Max(Max(left, floor_ms), 1));
}

/*
 * Disarm the statement timeout of IdemPurgeXactStart.  If it fired after
 * the statement's last interrupt check, the cancel it left pending is for
 * a statement that is over: drop it, rather than let it cancel whatever
 * comes next.
 */
static void
IdemPurgeXactTimeoutOff(void)
{
	disable_timeout(STATEMENT_TIMEOUT, true);
	if (get_timeout_indicator(STATEMENT_TIMEOUT, true))
		QueryCancelPending = false;
}

/* Commit a worker transaction: its snapshot popped, its timeout disarmed */
static void
IdemPurgeXactCommit(void)
{
	PopActiveSnapshot();
	IdemPurgeXactTimeoutOff();
	CommitTransactionCommand();
}

/*
 * In the PG_CATCH of a worker transaction: disarm its timeout, abort it,
 * and return the error, copied into cxt, which is current on return.
 */
static ErrorData *
IdemPurgeXactFailed(MemoryContext cxt)
{
	ErrorData  *edata;

	IdemPurgeXactTimeoutOff();
	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	AbortCurrentTransaction();
	MemoryContextSwitchTo(cxt);
	return edata;
}

/* No statement of a round waits more than 100 ms for a lock */
static void
IdemPurgeRoundLockTimeout(void)
{
	(void) set_config_option("lock_timeout", "100", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SET, true, 0, false);
}

/*
 * VACUUM the claims table, so that deleted rows' space is reused at once,
 * as a client's "VACUUM (SKIP_LOCKED) idempotency.claims" runs: parsed,
 * planned and run through a portal, so that ProcessUtility hooks see it.
 * SKIP_LOCKED: a session holding a conflicting lock on the claims makes the
 * round skip its VACUUM rather than wait.  Throttled like autovacuum, so
 * that its WAL and I/O do not burst into the claimers' commits, and
 * cancelled at the round's deadline.  Returns the error that stopped it, or
 * NULL; the plan lives in cxt, since VACUUM commits the transaction it
 * starts in.
 */
static char *
IdemPurgeVacuumClaims(TimestampTz deadline, MemoryContext cxt)
{
	static const char *const sql = "VACUUM (SKIP_LOCKED) " IDEM_SCHEMA_NAME ".claims";
	char	   *volatile error = NULL;

	/*
	 * No lock_timeout: SKIP_LOCKED covers the table's lock, and VACUUM's
	 * last steps wait briefly for database-wide locks every autovacuum
	 * takes; the statement timeout bounds it all.  Set for the session,
	 * since VACUUM runs transactions of its own.
	 */
	(void) set_config_option("lock_timeout", "0", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SET, true, 0, false);
	IdemPurgeXactStart(deadline, 0);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		RawStmt    *raw = linitial_node(RawStmt, pg_parse_query(sql));
		List	   *plans;
		Portal		portal;
		QueryCompletion qc;

		plans = pg_plan_queries(IdemAnalyzeAndRewrite(raw, sql),
								sql, CURSOR_OPT_PARALLEL_OK, NULL);
		IdemPurgeVacuumLikeAutovacuum();
		pgstat_report_activity(STATE_RUNNING, sql);
		portal = CreatePortal("", true, true);
		portal->visible = false;
		PortalDefineQuery(portal, NULL, sql, CMDTAG_VACUUM, plans, NULL);
		PortalStart(portal, NULL, 0, InvalidSnapshot);
		InitializeQueryCompletion(&qc);
		(void) IdemPortalRun(portal, FETCH_ALL, true, None_Receiver, None_Receiver, &qc);
		PortalDrop(portal, false);
		/* not back to oldcxt: VACUUM committed the transaction it was in */
		MemoryContextSwitchTo(cxt);
		IdemPurgeXactTimeoutOff();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		ErrorData  *edata = IdemPurgeXactFailed(cxt);

		error = psprintf("VACUUM: %s", edata->message);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	IdemPurgeRoundLockTimeout();
	pgstat_report_activity(STATE_IDLE, NULL);
	return error;
}

/*
 * Purge one target with a transaction per batch, as the background worker
 * does.  Stops early at deadline, on SIGTERM or when the purge is paused;
 * a batch still running at the deadline is cancelled.
 */
static void
IdemPurgeTargetInBatches(IdemPurgeTarget *target, TimestampTz deadline,
						 IdemPurgeResult *result, MemoryContext cxt)
{
	ItemPointerData cursor;
	volatile int batch = idem_purge_batch_size;

	cursor = target->resume;
	memset(result, 0, sizeof(*result));
	result->started_at = GetCurrentTimestamp();

	for (;;)
	{
		bool		more = false;
		volatile bool ready = false;

		/* stopping short of the end, the next round goes on from here */
		result->resume = cursor;

		CHECK_FOR_INTERRUPTS();
		IdemPurgeReloadConfig();
		if (!idem_purge_enabled || GetCurrentTimestamp() >= deadline)
		{
			result->resumable = true;
			return;
		}

		IdemPurgeXactStart(deadline, 0);	/* now() of this batch */
		PushActiveSnapshot(GetTransactionSnapshot());
		PG_TRY();
		{
			ready = IdemPurgeExtensionReady();
			if (ready)
			{
				/*
				 * A purge batch need not wait for its commit to reach disk: if
				 * a crash loses it, its rows are expired still and the next
				 * round deletes them again.  Not waiting keeps the worker
				 * from holding the WAL flush while claimers commit.
				 */
				(void) set_config_option("synchronous_commit", "off", PGC_USERSET,
										 PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
				pgstat_report_activity(STATE_RUNNING, target->label);
				result->rows += IdemPurgeBatch(target, batch, &cursor, &more);
				result->batches++;
			}
			IdemPurgeXactCommit();
		}
		PG_CATCH();
		{
			ErrorData  *edata = IdemPurgeXactFailed(cxt);

			cursor = result->resume;	/* the batch rolled back */
			if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
			{
				/* someone holds a lock we need: back off with smaller batches */
				result->timeouts++;
				batch = Max(batch / 2, IDEM_PURGE_MIN_BATCH);
				FreeErrorData(edata);
				pg_usleep(10000L);
				continue;
			}
			/*
			 * Cancelled at the deadline, the next round goes on from this
			 * batch; after any other error it starts afresh, so that a row
			 * that always fails cannot keep the rows before it unpurged.
			 */
			result->resumable = edata->sqlerrcode == ERRCODE_QUERY_CANCELED &&
				GetCurrentTimestamp() >= deadline;
			result->error = pstrdup(edata->message);
			FreeErrorData(edata);
			pgstat_report_activity(STATE_IDLE, NULL);
			return;
		}
		PG_END_TRY();
		pgstat_report_activity(STATE_IDLE, NULL);

		if (!ready || !more)
		{
			result->complete = ready;
			return;
		}
		if (batch < idem_purge_batch_size)
			batch = Min(batch * 2, idem_purge_batch_size);
	}
}

/* The last error recorded for the generations, if any: a char ** arg */
static void
IdemPurgeLastErrorRow(HeapTuple tup, TupleDesc desc, void *arg)
{
	char	  **last = arg;
	char	   *error = SPI_getvalue(tup, desc, 1);

	*last = error != NULL ? error : "";
}

/*
 * Record a generations pass in idempotency.purge_runs, as the target
 * "idempotency.generations", in the pass's transaction: when it dropped
 * claims, and when what held it back (done->why) differs from what the last
 * recorded pass said.  A new reason is logged once, not every round; the
 * caller of idem_purge() and idem_purge_run() gets it as a NOTICE each time.
 */
static void
IdemPurgeRecordGenerations(IdemGenMaintenance *done, TimestampTz started,
						   const char *trigger)
{
	IdemPurgeTarget target;
	IdemPurgeResult result;
	char	   *last = NULL;	/* "" for a run without an error */
	bool		changed;

	if (done->why != NULL && strcmp(trigger, "worker") != 0)
		ereport(NOTICE,
				(errmsg("claim generations left alone: %s", done->why)));
	(void) IdemOwnerRun(IdemGetCatalog().claims, IDEM_RUN_READ_ONLY,
						"SELECT error FROM idempotency.purge_runs"
						" WHERE target = 'idempotency.generations' ORDER BY run_id DESC LIMIT 1",
						0, NULL, NULL, NULL, IdemPurgeLastErrorRow, &last);
	changed = done->why != NULL ?
		(last == NULL || strcmp(last, done->why) != 0) :
		(last != NULL && last[0] != '\0');
	if (changed && done->why != NULL)
		ereport(LOG,
				(errmsg("idempotency left claim generations alone in database \"%s\": %s",
						get_database_name(MyDatabaseId), done->why),
				 errdetail(done->incomplete ?
						   "No generation is switched, sealed or dropped while the extension's objects are incomplete." :
						   "A generation is dropped only when its own recorded claims and its namespaces' TTLs prove every claim in it expired."),
				 errhint(done->incomplete ?
						 "During a restore this clears when the restore ends; otherwise repair the object named.  This is logged once; see idem_purge_runs." :
						 "The other generations are maintained as usual.  This is logged once; see idem_purge_runs.")));
	if (done->dropped == 0 && !changed)
		return;
	memset(&target, 0, sizeof(target));
	target.label = "idempotency.generations";
	memset(&result, 0, sizeof(result));
	result.started_at = started;
	result.rows = done->claims_dropped;
	result.batches = done->dropped;
	result.complete = true;
	result.error = done->why;
	IdemPurgeRecord(&target, &result, trigger);
}

/* Record a worker run in its own transaction, given a second past deadline */
static void
IdemPurgeRecordWorkerRun(IdemPurgeTarget *target, IdemPurgeResult *result,
						 TimestampTz deadline, MemoryContext cxt)
{
	IdemPurgeXactStart(deadline, 1000);
	PG_TRY();
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		if (IdemPurgeExtensionReady())
			IdemPurgeRecord(target, result, "worker");
		IdemPurgeXactCommit();
	}
	PG_CATCH();
	{
		ErrorData  *edata = IdemPurgeXactFailed(cxt);

		ereport(LOG,
				(errmsg("idempotency purge could not record its run of %s: %s",
						target->label, edata->message)));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
}

/*
 * Set the resume point and the last run of the target a purge_runs row
 * names (List * arg)
 */
static void
IdemPurgeResumeRow(HeapTuple tup, TupleDesc desc, void *arg)
{
	List	   *targets = arg;
	char	   *label = SPI_getvalue(tup, desc, 1);
	bool		resume_null;
	Datum		resume = SPI_getbinval(tup, desc, 2, &resume_null);
	bool		run_null;
	Datum		run = SPI_getbinval(tup, desc, 3, &run_null);
	ListCell   *lc;

	foreach(lc, targets)
	{
		IdemPurgeTarget *t = lfirst(lc);

		if (strcmp(t->label, label) != 0)
			continue;
		if (!resume_null)
			t->resume = *(ItemPointer) DatumGetPointer(resume);
		if (!run_null)
			t->last_run = DatumGetInt64(run);
	}
}

/* The target served least recently first; ties in IdemPurgeTargets' order */
static int
IdemPurgeTargetCmp(const ListCell *a, const ListCell *b)
{
	const IdemPurgeTarget *ta = lfirst(a);
	const IdemPurgeTarget *tb = lfirst(b);

	if (ta->last_run != tb->last_run)
		return ta->last_run < tb->last_run ? -1 : 1;
	return ta->order - tb->order;
}

/*
 * Where each target's worker round starts: where the last worker run of it
 * stopped short of the table's end, so that a table too big for one round
 * is read through over several; else at the start.  And the order of the
 * round: the target whose last recorded run is the oldest goes first, so
 * that a table too big for one round (a large idempotency.claims, say)
 * cannot take every round's time from the tables after it.  A target read
 * through with nothing to delete is not recorded, and so goes first: it
 * takes little time.
 */
static List *
IdemPurgeResumePoints(List *targets)
{
	ListCell   *lc;
	int			order = 0;

	foreach(lc, targets)
		((IdemPurgeTarget *) lfirst(lc))->order = order++;
	(void) IdemOwnerRun(IdemGetCatalog().claims, IDEM_RUN_READ_ONLY,
						"SELECT DISTINCT ON (target) target, resume_after, run_id"
						"  FROM idempotency.purge_runs WHERE trigger = 'worker'"
						" ORDER BY target, run_id DESC",
						0, NULL, NULL, NULL, IdemPurgeResumeRow, targets);
	list_sort(targets, IdemPurgeTargetCmp);
	return targets;
}

static void IdemPurgeRefine(TimestampTz deadline, MemoryContext cxt, int *errors);

/*
 * The generations' step of a worker round, in a transaction of its own:
 * open, switch, seal and drop generations (generation.c).  Adds the claims
 * of dropped generations to *total; a failure is logged and counted.
 * Returns the seals left for a later pass (their claimers still insert).
 */
static int
IdemPurgeGenerations(TimestampTz deadline, MemoryContext cxt, int64 *total,
					 int *errors)
{
	IdemGenMaintenance done;

	memset(&done, 0, sizeof(done));
	IdemPurgeXactStart(deadline, 0);
	PG_TRY();
	{
		TimestampTz started = GetCurrentTimestamp();

		PushActiveSnapshot(GetTransactionSnapshot());
		IdemGenMaintain(-1, false, &done);
		IdemPurgeRecordGenerations(&done, started, "worker");
		done.why = NULL;		/* in the transaction's memory */
		IdemPurgeXactCommit();
	}
	PG_CATCH();
	{
		ErrorData  *edata = IdemPurgeXactFailed(cxt);
		const char *step = IdemGenMaintainStep();

		/*
		 * Harmless, and the line says so: the pass rolled back whole (the
		 * generation id a switch drew from the sequence is spent, ids need
		 * not be dense), and the next round tries again.  A lock timeout
		 * says which wait: a REINDEX CONCURRENTLY or an ALTER TABLE of
		 * idempotency.claims holds off the switch's new table, say.
		 */
		if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
			ereport(LOG,
					(errmsg("idempotency could not maintain the claim generations: %s", edata->message),
					 errdetail("The pass waited longer than lock_timeout (%s) for a lock another session holds, while %s. It was rolled back; the next round tries again.",
							   GetConfigOptionByName("lock_timeout", NULL, false),
							   step ? step : "maintaining the generations"),
					 edata->context ? errcontext("%s", edata->context) : 0));
		else
			ereport(LOG,
					(errmsg("idempotency could not maintain the claim generations: %s", edata->message),
					 errdetail("The pass was rolled back; the next round tries again."),
					 edata->context ? errcontext("%s", edata->context) : 0));
		FreeErrorData(edata);
		(*errors)++;
		memset(&done, 0, sizeof(done));
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	*total += done.claims_dropped;
	if (idem_log_purge && (done.opened || done.sealed || done.dropped || done.skipped))
		ereport(LOG,
				(errmsg("idempotency generations: %d opened, %d sealed, %d dropped with %lld claims, %d steps left for later",
						done.opened, done.sealed, done.dropped,
						(long long) done.claims_dropped, done.skipped)));
	return done.seal_skipped;
}

/*
 * The finer filters of sealed generations back after a restart: up to
 * IDEM_GEN_REFINE_PER_ROUND at the end of a round, each in a transaction
 * of its own (its memory freed at its commit), while the round has time
 * left; a failure is logged and counted, and ends the refinement
 */
static void
IdemPurgeRefine(TimestampTz deadline, MemoryContext cxt, int *errors)
{
	volatile int refined = 0;

	while (refined < IDEM_GEN_REFINE_PER_ROUND && idem_purge_enabled &&
		   IdemGenRefineWanted() && GetCurrentTimestamp() < deadline)
	{
		volatile bool more = false;

		IdemPurgeXactStart(deadline, 0);
		PG_TRY();
		{
			PushActiveSnapshot(GetTransactionSnapshot());
			more = IdemGenRefineFilter();
			IdemPurgeXactCommit();
		}
		PG_CATCH();
		{
			ErrorData  *edata = IdemPurgeXactFailed(cxt);

			ereport(LOG,
					(errmsg("idempotency could not refine the generations' filters: %s", edata->message)));
			(*errors)++;
			more = false;
		}
		PG_END_TRY();
		MemoryContextSwitchTo(cxt);
		if (!more)
			break;
		refined++;
	}
	if (idem_log_purge && refined > 0)
		ereport(LOG,
				(errmsg("idempotency generations: %d filters refined", refined)));
}

/*
 * One purge round in the current database, run by the per-database
 * background worker: every target in batches, the claims followed by their
 * VACUUM if any were deleted, all within idempotency.purge_max_runtime:
 * every statement is cancelled when the time is up, and a lock held by
 * another session makes a batch time out after lock_timeout (and retry
 * smaller) or the VACUUM skip the table.  So the round ends on time, and
 * the launcher moves on to the next database.  Logs at most one line,
 * unless idempotency.log_purge asks for one per target.  With
 * generations_only, the round a claimer asked for when an open generation
 * reached its size bound: the generations' step alone.
 */
void
IdemPurgeDatabaseRound(bool generations_only)
{
	MemoryContext cxt = AllocSetContextCreate(TopMemoryContext, "idempotency purge",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext oldcxt = MemoryContextSwitchTo(cxt);
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz deadline = TimestampTzPlusMilliseconds(start, idem_purge_max_runtime);
	List	   *volatile targets = NIL;
	ListCell   *lc;
	int64		total = 0;
	int			timeouts = 0;
	int			errors = 0;
	volatile bool ready = false;
	char	   *volatile dbname = NULL;

	IdemPurgeRoundLockTimeout();

	/* paused here, by ALTER DATABASE ... SET idempotency.purge_enabled = off */
	if (!idem_purge_enabled)
	{
		MemoryContextSwitchTo(oldcxt);
		MemoryContextDelete(cxt);
		return;
	}

	IdemPurgeXactStart(deadline, 0);
	PG_TRY();
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		MemoryContextSwitchTo(cxt);
		dbname = get_database_name(MyDatabaseId);	/* needs a transaction */
		ready = IdemPurgeExtensionReady();
		if (ready && !generations_only)
		{
			targets = IdemPurgeResumePoints(IdemPurgeTargets());
			(void) IdemNamespaceCompact();	/* rows left by concurrent first uses */
		}
		IdemPurgeXactCommit();
	}
	PG_CATCH();
	{
		ErrorData  *edata = IdemPurgeXactFailed(cxt);

		ereport(LOG,
				(errmsg("idempotency purge could not start its round: %s", edata->message)));
		ready = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	if (!ready)
	{
		/* no extension here, or it is being dropped: quietly nothing */
		MemoryContextSwitchTo(oldcxt);
		MemoryContextDelete(cxt);
		return;
	}

	/*
	 * A round asked for by a claimer follows its switch through: the seal
	 * of the generation it closed waits for the claimers still inserting
	 * into it, so the pass is tried again a little later, within the round.
	 */
	while (IdemPurgeGenerations(deadline, cxt, &total, &errors) > 0 && generations_only)
	{
		if (GetCurrentTimestamp() >= deadline)
			break;
		IdemPurgeWait(IDEM_PURGE_RETRY_MS);
		if (!idem_purge_enabled)
			break;
	}

	foreach(lc, targets)
	{
		IdemPurgeTarget *target = lfirst(lc);
		IdemPurgeResult result;

		IdemPurgeTargetInBatches(target, deadline, &result, cxt);
		MemoryContextSwitchTo(cxt);

		/* the claims' VACUUM is part of their run, and of its duration */
		if (target->is_claims && result.rows > 0 &&
			GetCurrentTimestamp() < deadline)
		{
			char	   *error = IdemPurgeVacuumClaims(deadline, cxt);

			MemoryContextSwitchTo(cxt);
			if (error != NULL && result.error == NULL)
				result.error = error;
		}

		total += result.rows;
		timeouts += result.timeouts;
		if (result.error != NULL)
			errors++;
		/* a run that stopped short, or that ends one that did, is recorded */
		if (result.rows > 0 || result.error != NULL || result.timeouts > 0 ||
			!result.complete || ItemPointerGetBlockNumberNoCheck(&target->resume) > 0 ||
			ItemPointerGetOffsetNumberNoCheck(&target->resume) > 0)
			IdemPurgeRecordWorkerRun(target, &result, deadline, cxt);
		if (idem_log_purge)
			ereport(LOG,
					(errmsg("idempotency purge of %s in database \"%s\": %lld rows in %d batches, %d lock timeouts%s%s",
							target->label, dbname,
							(long long) result.rows, result.batches, result.timeouts,
							result.error ? ", error: " : "",
							result.error ? result.error : "")));
		if (!idem_purge_enabled || GetCurrentTimestamp() >= deadline)
			break;
	}

	/* last, with what is left of the round's time */
	IdemPurgeRefine(deadline, cxt, &errors);

	if (!idem_log_purge && (total > 0 || errors > 0))
		ereport(LOG,
				(errmsg("idempotency purged %lld expired rows in database \"%s\" in %ld ms (%d lock timeouts, %d errors)",
						(long long) total, dbname,
						(long) (TimestampDifferenceMilliseconds(start, GetCurrentTimestamp())),
						timeouts, errors)));
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(cxt);
}

/*
 * In the PG_CATCH of a purge step in a subtransaction (what it could not
 * do: "purge <table>", ...): roll the subtransaction back, restore cxt and
 * owner, and warn; returns the error message, allocated in cxt.  A cancel,
 * a statement timeout or a termination is meant for the whole statement,
 * not for one step: it is thrown again.  what must not live in
 * ErrorContext (current in a PG_CATCH): FlushErrorState frees it before
 * the warning prints it.
 */
static char *
IdemPurgeSubxactFailed(const char *what, MemoryContext cxt, ResourceOwner owner)
{
	ErrorData  *edata = IdemSubxactCaught(cxt, owner);

	if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_OPERATOR_INTERVENTION)
		ReThrowError(edata);
	ereport(WARNING,
			(errcode(edata->sqlerrcode),
			 errmsg("could not %s: %s", what, edata->message)));
	return edata->message;
}

/*
 * IdemPurgeSubxactFailed for one table's purge.  The message is built in
 * cxt: in the PG_CATCH, CurrentMemoryContext is ErrorContext, which
 * FlushErrorState resets before the warning is printed.
 */
static char *
IdemPurgeTableFailed(IdemPurgeTarget *target, MemoryContext cxt, ResourceOwner owner)
{
	MemoryContextSwitchTo(cxt);
	return IdemPurgeSubxactFailed(psprintf("purge %s", target->label), cxt, owner);
}

/*
 * The generations' step of idem_purge() and idem_purge_run(), in the
 * caller's transaction, in a subtransaction so that a failure is a WARNING
 * and the purge of the tables goes on.  Returns the claims of the
 * generations dropped.
 */
static int64
IdemPurgeGenerationsHere(const char *trigger)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	IdemGenMaintenance done;

	memset(&done, 0, sizeof(done));
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		TimestampTz started = GetCurrentTimestamp();

		IdemGenMaintain(-1, true, &done);
		IdemPurgeRecordGenerations(&done, started, trigger);
		IdemSubxactEnd(true, oldcxt, oldowner);
	}
	PG_CATCH();
	{
		(void) IdemPurgeSubxactFailed("maintain the claim generations", oldcxt, oldowner);
		memset(&done, 0, sizeof(done));
	}
	PG_END_TRY();
	return done.claims_dropped;
}

/*
 * idem_purge(max_rows bigint) returns bigint
 *
 * Purges now, in the caller's transaction, across the claims and the
 * registered tables; returns the number of rows deleted.  At most max_rows
 * if given.  Rows locked by transactions in flight are skipped.
 */
Datum
idem_purge(PG_FUNCTION_ARGS)
{
	/* volatile: read after the longjmp of a failing table (-Wclobbered) */
	volatile int64 max_rows = PG_ARGISNULL(0) ? PG_INT64_MAX : PG_GETARG_INT64(0);
	List	   *targets;
	ListCell   *lc;
	volatile int64 total = 0;

	if (max_rows < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_rows must not be negative")));
	PreventCommandIfReadOnly("idem_purge()");

	/* generations first: dropping one reclaims its claims without a scan */
	total += IdemPurgeGenerationsHere("manual");

	targets = IdemPurgeTargets();
	foreach(lc, targets)
	{
		IdemPurgeTarget *target = lfirst(lc);
		IdemPurgeResult result;
		MemoryContext oldcxt = CurrentMemoryContext;
		ResourceOwner oldowner = CurrentResourceOwner;

		memset(&result, 0, sizeof(result));
		result.started_at = GetCurrentTimestamp();

		/* one failing table must not stop the others: a subtransaction each */
		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(oldcxt);
		PG_TRY();
		{
			ItemPointerData cursor;
			bool		more = true;

			ItemPointerSet(&cursor, 0, 0);
			while (more && total + result.rows < max_rows)
			{
				int			batch = (int) Min((int64) idem_purge_batch_size,
											  max_rows - total - result.rows);

				CHECK_FOR_INTERRUPTS();
				result.rows += IdemPurgeBatch(target, batch, &cursor, &more);
				result.batches++;
				/* let the next batch see this one's work */
				CommandCounterIncrement();
			}
			IdemSubxactEnd(true, oldcxt, oldowner);
			total += result.rows;
		}
		PG_CATCH();
		{
			result.rows = 0;
			result.error = IdemPurgeTableFailed(target, oldcxt, oldowner);
		}
		PG_END_TRY();
		if (result.rows > 0 || result.error != NULL)
			IdemPurgeRecord(target, &result, "manual");
	}
	PG_RETURN_INT64(total);
}

/*
 * idem_purge_run(max_rows bigint) procedure
 *
 * Purges as the worker does, for pg_cron and operators: every target in
 * batches, each batch committed on its own, so that a claimer taking over
 * an expired id the purge passed waits for one batch at most, not for the
 * whole call as with idem_purge().  Must be CALLed outside a transaction
 * block.  A failing table gets a WARNING and a recorded error while the
 * others go on; cancels and timeouts stop it.  Runs are recorded with
 * trigger 'procedure'.
 */
Datum
idem_purge_run(PG_FUNCTION_ARGS)
{
	/* volatile: read after the longjmp of a failing table (-Wclobbered) */
	volatile int64 max_rows = PG_ARGISNULL(0) ? PG_INT64_MAX : PG_GETARG_INT64(0);
	bool		nonatomic = fcinfo->context != NULL &&
		IsA(fcinfo->context, CallContext) &&
		!castNode(CallContext, fcinfo->context)->atomic;
	MemoryContext cxt;
	List	   *targets;
	ListCell   *lc;
	volatile int64 total = 0;

	if (!nonatomic)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
				 errmsg("idem_purge_run() cannot run inside a transaction block"),
				 errhint("CALL it on its own, as pg_cron runs a job; inside a transaction, use SELECT idem_purge().")));
	if (max_rows < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_rows must not be negative")));
	PreventCommandIfReadOnly("idem_purge_run()");

	/* what must survive the commits lives in a context of our own */
	cxt = AllocSetContextCreate(TopMemoryContext, "idem_purge_run",
								ALLOCSET_DEFAULT_SIZES);
	if (SPI_connect_ext(SPI_OPT_NONATOMIC) != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect_ext failed");
	PG_TRY();
	{
		MemoryContext oldcxt;

		IdemEnsurePortalSnapshot();
		total += IdemPurgeGenerationsHere("procedure");
		SPI_commit();
		oldcxt = MemoryContextSwitchTo(cxt);
		targets = IdemPurgeTargets();
		MemoryContextSwitchTo(oldcxt);
		foreach(lc, targets)
		{
			IdemPurgeTarget *target = lfirst(lc);
			IdemPurgeResult result;
			ItemPointerData cursor;
			bool		more = true;

			memset(&result, 0, sizeof(result));
			result.started_at = GetCurrentTimestamp();
			ItemPointerSet(&cursor, 0, 0);
			while (more && total + result.rows < max_rows && result.error == NULL)
			{
				volatile int batch = (int) Min((int64) idem_purge_batch_size,
											  max_rows - total - result.rows);
				ResourceOwner oldowner = CurrentResourceOwner;

				CHECK_FOR_INTERRUPTS();
				IdemEnsurePortalSnapshot();
				BeginInternalSubTransaction(NULL);
				MemoryContextSwitchTo(cxt);
				PG_TRY();
				{
					result.rows += IdemPurgeBatch(target, batch, &cursor, &more);
					result.batches++;
					ReleaseCurrentSubTransaction();
					CurrentResourceOwner = oldowner;
				}
				PG_CATCH();
				{
					result.error = IdemPurgeTableFailed(target, cxt, oldowner);
				}
				PG_END_TRY();
				MemoryContextSwitchTo(oldcxt);
				SPI_commit();	/* one batch, one transaction */
			}
			total += result.rows;
			if (result.rows > 0 || result.error != NULL)
			{
				IdemEnsurePortalSnapshot();
				IdemPurgeRecord(target, &result, "procedure");
				SPI_commit();
			}
		}
	}
	PG_FINALLY();
	{
		MemoryContextDelete(cxt);
	}
	PG_END_TRY();
	SPI_finish();
	PG_RETURN_VOID();
}
