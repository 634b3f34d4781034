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
#include "utils/timestamp.h"

#include "catalog.h"
#include "ownerspi.h"
#include "claimstore.h"
#include "idempotency.h"
#include "namespace.h"
#include "purge.h"
#include "request.h"
#include "stats.h"

PG_FUNCTION_INFO_V1(idem_purge);
PG_FUNCTION_INFO_V1(idem_purge_run);

/*
 * A batch of the claims table: returns the cursor, rows seen, ns of rows
 * deleted.  PostgreSQL 14 and later purge claims natively instead (see
 * IdemPurgeClaimsBatch), as 13 has no TID range scan.
 */
static const char *const idem_purge_claims_sql =
"WITH victims AS MATERIALIZED ("
"  SELECT c.ctid AS tid FROM idempotency.claims c"
"    JOIN idempotency.namespaces n ON n.id = c.ns"
"   WHERE c.ctid > $1"
"     AND ((c.claimed_at AT TIME ZONE 'UTC') + n.ttl) AT TIME ZONE 'UTC' < now()"
"   LIMIT $2 FOR UPDATE OF c SKIP LOCKED),"
" gone AS ("
"  DELETE FROM idempotency.claims"
"   WHERE ctid = ANY (ARRAY(SELECT tid FROM victims)) RETURNING ns)"
"SELECT (SELECT max(tid) FROM victims), (SELECT count(*) FROM victims),"
"       (SELECT array_agg(ns) FROM gone)";

/* A batch of requests: expired records, but never a live lease */
static const char *const idem_purge_requests_sql =
"WITH victims AS MATERIALIZED ("
"  SELECT r.ctid AS tid FROM idempotency.requests r"
"    JOIN idempotency.namespaces n ON n.id = r.ns"
"   WHERE r.ctid > $1"
"     AND " IDEM_REQUEST_EXPIRED_SQL("r.", "n.ttl")
"   LIMIT $2 FOR UPDATE OF r SKIP LOCKED),"
" gone AS ("
"  DELETE FROM idempotency.requests"
"   WHERE ctid = ANY (ARRAY(SELECT tid FROM victims)) RETURNING 1)"
"SELECT (SELECT max(tid) FROM victims), (SELECT count(*) FROM victims),"
"       (SELECT count(*) FROM gone)";

/* A batch of expired tokens */
static const char *const idem_purge_tokens_sql =
"WITH victims AS MATERIALIZED ("
"  SELECT ctid AS tid FROM idempotency.tokens"
"   WHERE ctid > $1 AND expires_at < clock_timestamp()"
"   LIMIT $2 FOR UPDATE SKIP LOCKED),"
" gone AS ("
"  DELETE FROM idempotency.tokens"
"   WHERE ctid = ANY (ARRAY(SELECT tid FROM victims)) RETURNING 1)"
"SELECT (SELECT max(tid) FROM victims), (SELECT count(*) FROM victims),"
"       (SELECT count(*) FROM gone)";

/*
 * A batch of a user table; %s are its quoted name and time column.  It runs
 * with the owner's search_path, so every operator and function is named
 * with its schema.
 */
static const char *const idem_purge_table_sql =
"WITH victims AS MATERIALIZED ("
"  SELECT ctid AS tid FROM %s"
"   WHERE ctid OPERATOR(pg_catalog.>) $1"
"     AND %s OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $3)"
"   LIMIT $2 FOR UPDATE SKIP LOCKED),"
" gone AS ("
"  DELETE FROM %s WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT tid FROM victims)) RETURNING 1)"
"SELECT (SELECT pg_catalog.max(tid) FROM victims), (SELECT pg_catalog.count(*) FROM victims),"
"       (SELECT pg_catalog.count(*) FROM gone)";

/* One of the extension's own tables as a purge target */
static IdemPurgeTarget *
IdemPurgeInternal(Oid relid, const char *label, const char *sql)
{
	IdemPurgeTarget *t = palloc0(sizeof(IdemPurgeTarget));

	t->is_internal = true;
	t->relid = relid;
	t->owner = IdemRelationOwner(relid);
	t->label = pstrdup(label);
	t->sql = sql;
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
	t->sql = psprintf(idem_purge_table_sql, quoted, quote_identifier(column), quoted);
	t->ttl = *ttl;
	*targets = lappend(*targets, t);
}

/*
 * The targets of a purge: the claims, requests and tokens, then every
 * registered user table that still exists.  Allocated in the current
 * memory context; call within a transaction.
 */
List *
IdemPurgeTargets(void)
{
	IdemCatalog cat = IdemGetCatalog();
	IdemPurgeTarget *t;
	List	   *targets = NIL;

	t = IdemPurgeInternal(cat.claims, "idempotency.claims", idem_purge_claims_sql);
	t->is_claims = true;
	targets = lappend(targets, t);
	targets = lappend(targets, IdemPurgeInternal(cat.requests, "idempotency.requests",
												 idem_purge_requests_sql));
	targets = lappend(targets, IdemPurgeInternal(cat.tokens, "idempotency.tokens",
												 idem_purge_tokens_sql));

	(void) IdemOwnerRun(cat.claims, IDEM_RUN_READ_ONLY | IDEM_RUN_LATEST,
						"SELECT p.rel::oid, p.time_column, p.ttl FROM idempotency.purge_policies p"
						" JOIN pg_catalog.pg_class c ON c.oid = p.rel ORDER BY p.rel",
						0, NULL, NULL, NULL, IdemPurgePolicyTarget, &targets);
	return targets;
}

/* qsort comparator for namespace ids */
static int
IdemInt32Compare(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return (x > y) - (x < y);
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

#if PG_VERSION_NUM >= 140000
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
 * Delete up to batch expired rows of target after *cursor, as the target's
 * owner (the native claims batch needs no role: it checks no privilege).
 * Call within a transaction with an active snapshot.  Advances *cursor;
 * *more is false when no expired row is left after it.  Returns the number
 * of rows deleted.
 */
int64
IdemPurgeBatch(IdemPurgeTarget *target, int batch, ItemPointer cursor, bool *more)
{
	IdemOwnerScope scope;
	Oid			argtypes[3] = {TIDOID, INT4OID, INTERVALOID};
	Datum		args[3];
	int64		deleted = 0;
	int64		seen = 0;

#if PG_VERSION_NUM >= 140000
	if (target->is_claims)
		return IdemPurgeClaimsBatch(batch, cursor, more);
#endif

	args[0] = PointerGetDatum(cursor);	/* tid is passed by reference */
	args[1] = Int32GetDatum(batch);
	args[2] = IntervalPGetDatum(&target->ttl);

	IdemSpiScopeBegin(&scope, target->owner, target->is_internal);
	if (SPI_execute_with_args(target->sql, target->is_internal ? 2 : 3, argtypes, args,
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
		d = SPI_getbinval(tup, desc, 3, &isnull);
		if (target->is_claims)
		{
			if (!isnull)
			{
				deleted = ArrayGetNItems(ARR_NDIM(DatumGetArrayTypeP(d)),
										 ARR_DIMS(DatumGetArrayTypeP(d)));
				IdemPurgeCountNamespaces(d);
			}
		}
		else
			deleted = isnull ? 0 : DatumGetInt64(d);
	}
	IdemOwnerScopeEnd(&scope);
	*more = (seen >= batch);
	return deleted;
}

/* Add a purge run to idempotency.purge_runs, keeping its history bounded */
void
IdemPurgeRecord(IdemPurgeTarget *target, IdemPurgeResult *result,
				const char *trigger)
{
	IdemCatalog cat = IdemGetCatalog();
	Oid			argtypes[8] = {TIMESTAMPTZOID, TEXTOID, TEXTOID, INT8OID,
	INT4OID, INT4OID, TEXTOID, TEXTOID};
	Datum		args[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
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
	hist[0] = Int32GetDatum(idem_purge_history);

	(void) IdemOwnerRun(cat.claims, 0,
						"INSERT INTO idempotency.purge_runs"
						" (started_at, finished_at, target, trigger, rows_deleted,"
						"  batches, timeouts, error, application_name)"
						" VALUES ($1, clock_timestamp(), $2, $3, $4, $5, $6, $7, $8)",
						8, argtypes, args, nulls, NULL, NULL);
	(void) IdemOwnerRun(cat.claims, 0,
						"DELETE FROM idempotency.purge_runs"
						" WHERE run_id <= (SELECT max(run_id) FROM idempotency.purge_runs) - $1",
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
 * VACUUM the claims table, so that deleted rows' space is reused at once;
 * throttled like autovacuum, so that its WAL and I/O do not burst into the
 * claimers' commits.
 */
static void
IdemPurgeVacuumClaims(void)
{
	VacuumStmt *stmt = makeNode(VacuumStmt);
	ParseState *pstate = make_parsestate(NULL);
	MemoryContext portal = AllocSetContextCreate(TopMemoryContext,
												 "idempotency vacuum",
												 ALLOCSET_DEFAULT_SIZES);

	/* vacuum() allocates in PortalContext, which a worker has not got */
	PortalContext = portal;
	stmt->options = NIL;
	stmt->rels = list_make1(makeVacuumRelation(makeRangeVar(IDEM_SCHEMA_NAME, "claims", -1),
											   InvalidOid, NIL));
	stmt->is_vacuumcmd = true;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	IdemPurgeVacuumLikeAutovacuum();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "VACUUM idempotency.claims");
	ExecVacuum(pstate, stmt, true);		/* commits and starts transactions */
	if (ActiveSnapshotSet())
		PopActiveSnapshot();
	CommitTransactionCommand();
	PortalContext = NULL;
	MemoryContextDelete(portal);
}

/*
 * Purge one target with a transaction per batch, as the background worker
 * does.  Stops early at deadline, on SIGTERM or when the purge is paused.
 */
static void
IdemPurgeTargetInBatches(IdemPurgeTarget *target, TimestampTz deadline,
						 IdemPurgeResult *result, MemoryContext cxt)
{
	ItemPointerData cursor;
	volatile int batch = idem_purge_batch_size;

	ItemPointerSet(&cursor, 0, 0);
	memset(result, 0, sizeof(*result));
	result->started_at = GetCurrentTimestamp();

	for (;;)
	{
		bool		more = false;
		volatile bool ready = false;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (!idem_purge_enabled || GetCurrentTimestamp() >= deadline)
			return;

		SetCurrentStatementStartTimestamp();	/* now() of this batch */
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		PG_TRY();
		{
			ready = IdemPurgeExtensionReady();
			if (ready)
			{
				char		timeout[32];

				snprintf(timeout, sizeof(timeout), "%d", 100);
				(void) set_config_option("lock_timeout", timeout, PGC_USERSET,
										 PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);

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
			PopActiveSnapshot();
			CommitTransactionCommand();
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			MemoryContextSwitchTo(cxt);
			edata = CopyErrorData();
			FlushErrorState();
			AbortCurrentTransaction();
			if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
			{
				/* someone holds a lock we need: back off with smaller batches */
				result->timeouts++;
				batch = Max(batch / 2, IDEM_PURGE_MIN_BATCH);
				FreeErrorData(edata);
				pg_usleep(10000L);
				continue;
			}
			result->error = pstrdup(edata->message);
			FreeErrorData(edata);
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

/*
 * One purge round in the current database, run by the per-database
 * background worker: every target in batches, then a VACUUM of the claims
 * if any were deleted.  Logs at most one line, unless idempotency.log_purge
 * asks for one per target.
 */
void
IdemPurgeDatabaseRound(void)
{
	MemoryContext cxt = AllocSetContextCreate(TopMemoryContext, "idempotency purge",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext oldcxt = MemoryContextSwitchTo(cxt);
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz deadline = TimestampTzPlusMilliseconds(start, idem_purge_max_runtime);
	List	   *targets = NIL;
	ListCell   *lc;
	int64		total = 0;
	int64		claims = 0;
	int			timeouts = 0;
	int			errors = 0;
	bool		ready;
	char	   *dbname;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	MemoryContextSwitchTo(cxt);
	dbname = get_database_name(MyDatabaseId);	/* needs a transaction */
	ready = IdemPurgeExtensionReady();
	if (ready)
	{
		targets = IdemPurgeTargets();
		(void) IdemNamespaceCompact();	/* rows left by concurrent first uses */
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);
	if (!ready)
	{
		/* no extension here, or it is being dropped: quietly nothing */
		MemoryContextSwitchTo(oldcxt);
		MemoryContextDelete(cxt);
		return;
	}

	foreach(lc, targets)
	{
		IdemPurgeTarget *target = lfirst(lc);
		IdemPurgeResult result;

		IdemPurgeTargetInBatches(target, deadline, &result, cxt);
		MemoryContextSwitchTo(cxt);
		total += result.rows;
		if (target->is_claims)
			claims = result.rows;
		timeouts += result.timeouts;
		if (result.error != NULL)
			errors++;

		if (result.rows > 0 || result.error != NULL || result.timeouts > 0)
		{
			SetCurrentStatementStartTimestamp();
			StartTransactionCommand();
			PushActiveSnapshot(GetTransactionSnapshot());
			if (IdemPurgeExtensionReady())
				IdemPurgeRecord(target, &result, "worker");
			PopActiveSnapshot();
			CommitTransactionCommand();
			MemoryContextSwitchTo(cxt);
		}
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

	if (claims > 0)
		IdemPurgeVacuumClaims();

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
 * In the PG_CATCH of a table's purge in a subtransaction: roll the
 * subtransaction back, restore cxt and owner, and warn; returns the error
 * message, allocated in cxt.  A cancel, a statement timeout or a
 * termination is meant for the whole statement, not for one table: it is
 * thrown again.
 */
static char *
IdemPurgeTableFailed(IdemPurgeTarget *target, MemoryContext cxt, ResourceOwner owner)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_OPERATOR_INTERVENTION)
		ReThrowError(edata);
	ereport(WARNING,
			(errcode(edata->sqlerrcode),
			 errmsg("could not purge %s: %s", target->label, edata->message)));
	return edata->message;
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
	int64		max_rows = PG_ARGISNULL(0) ? PG_INT64_MAX : PG_GETARG_INT64(0);
	List	   *targets;
	ListCell   *lc;
	volatile int64 total = 0;

	if (max_rows < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_rows must not be negative")));
	PreventCommandIfReadOnly("idem_purge()");

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
			ReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(oldcxt);
			CurrentResourceOwner = oldowner;
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
	int64		max_rows = PG_ARGISNULL(0) ? PG_INT64_MAX : PG_GETARG_INT64(0);
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
		MemoryContext oldcxt = MemoryContextSwitchTo(cxt);

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
#if PG_VERSION_NUM >= 140000
				EnsurePortalSnapshotExists();
#endif
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
#if PG_VERSION_NUM >= 140000
				EnsurePortalSnapshotExists();
#endif
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
