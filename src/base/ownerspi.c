/*
 * ownerspi.c
 *	  Running SQL on the extension's internal tables as their owner.
 *
 * The SQL functions check the caller's privileges first (table privileges
 * on the internal tables, or EXECUTE on admin functions), then do the work
 * as the owner of the internal table, with search_path pinned to
 * pg_catalog and in a security-restricted operation, so that nothing a
 * caller put on its search_path or in its session can take part.
 *
 * IdemOwnerRun is the one way to run a statement so: most callers run one
 * statement and read its rows through a callback.  The scope functions
 * below it remain for the few that keep prepared plans (requests) or run
 * several statements as another role (binding DDL as the caller, a user
 * table's purge as its owner).
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"

#include "catoids.h"
#include "ownerspi.h"

/*
 * Connect to SPI as roleid.  With pin_search_path, search_path is pinned to
 * pg_catalog, so that no user object can be picked up by our queries, which
 * name everything with its schema anyway; that is for work on our own
 * tables.  Work on a user's table as its owner leaves search_path alone,
 * since the owner's triggers may rely on it and the owner's rights are all
 * they can get.
 */
void
IdemSpiScopeBegin(IdemOwnerScope *scope, Oid roleid, bool pin_search_path)
{
	GetUserIdAndSecContext(&scope->save_userid, &scope->save_sec_context);
	SetUserIdAndSecContext(roleid, scope->save_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	scope->save_nestlevel = NewGUCNestLevel();
	if (pin_search_path)
		(void) set_config_option("search_path", "pg_catalog, pg_temp",
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
}

/*
 * SPI_execute_with_args, but against the latest committed state (plus this
 * transaction's own changes) rather than the transaction's snapshot.
 *
 * Namespaces, machines and bindings are configuration, read into
 * long-lived per-backend caches: like catalog entries, they must be read
 * as they are now, or a REPEATABLE READ transaction could load, and leave
 * in the cache, a definition replaced since its snapshot was taken.
 */
static int
IdemSpiExecute(const char *sql, int nargs, Oid *argtypes, Datum *values,
			   const char *nulls, bool read_only, long tcount)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, argtypes);
	Snapshot	snapshot;

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for \"%s\": %s", sql,
			 SPI_result_code_string(SPI_result));

	/*
	 * Parallel mode cannot take a new snapshot; there we read as the query
	 * does, and callers must not keep what they read past the transaction.
	 */
	if (IsInParallelMode())
		snapshot = ActiveSnapshotSet() ? GetActiveSnapshot() : GetTransactionSnapshot();
	else
		snapshot = GetLatestSnapshot();
	return SPI_execute_snapshot(plan, values, nulls, snapshot,
								InvalidSnapshot, read_only, true, tcount);
}

/* IdemSpiScopeBegin as the owner of the internal table relid */
void
IdemOwnerScopeBegin(IdemOwnerScope *scope, Oid relid)
{
	IdemSpiScopeBegin(scope, IdemRelationOwner(relid), true);
}

/* Undo IdemOwnerScopeBegin */
void
IdemOwnerScopeEnd(IdemOwnerScope *scope)
{
	SPI_finish();
	AtEOXact_GUC(true, scope->save_nestlevel);
	SetUserIdAndSecContext(scope->save_userid, scope->save_sec_context);
}

/*
 * Run sql (a statement on internal tables, every name schema-qualified)
 * as the owner of the internal table relid, with nargs arguments of types
 * argtypes and nulls as SPI takes them (NULL for none).  flags: IDEM_RUN_READ_ONLY for a read,
 * IDEM_RUN_LATEST to read the latest committed state (configuration that
 * backends cache, see IdemSpiExecute) instead of the statement's snapshot.
 * Calls each, if given, for every row returned, in the caller's memory
 * context.  Returns the number of rows processed.
 */
uint64
IdemOwnerRun(Oid relid, int flags, const char *sql, int nargs, Oid *argtypes,
			 Datum *values, const char *nulls, IdemRowCallback each, void *arg)
{
	return IdemRunAs(IdemRelationOwner(relid), flags, sql, nargs, argtypes,
					 values, nulls, each, arg);
}

/*
 * IdemOwnerRun as roleid: the caller, for statements whose privileges are
 * checked as for any statement of the caller's
 */
uint64
IdemRunAs(Oid roleid, int flags, const char *sql, int nargs, Oid *argtypes,
		  Datum *values, const char *nulls, IdemRowCallback each, void *arg)
{
	MemoryContext callercxt = CurrentMemoryContext;
	bool		read_only = (flags & IDEM_RUN_READ_ONLY) != 0;
	IdemOwnerScope scope;
	uint64		processed;
	int			rc;

	IdemSpiScopeBegin(&scope, roleid, true);
	if (flags & IDEM_RUN_LATEST)
		rc = IdemSpiExecute(sql, nargs, argtypes, values, nulls, read_only, 0);
	else
		rc = SPI_execute_with_args(sql, nargs, argtypes, values, nulls, read_only, 0);
	if (rc < 0)
		elog(ERROR, "could not run \"%s\": %s", sql, SPI_result_code_string(rc));
	processed = SPI_processed;
	if (each != NULL && SPI_tuptable != NULL)
	{
		MemoryContext spicxt = MemoryContextSwitchTo(callercxt);
		uint64		i;

		for (i = 0; i < processed; i++)
			each(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, arg);
		MemoryContextSwitchTo(spicxt);
	}
	IdemOwnerScopeEnd(&scope);
	return processed;
}
