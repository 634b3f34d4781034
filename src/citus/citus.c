/*
 * citus.c
 *	  A guard rail beside Citus: on a coordinator, a claim and a write to a
 *	  distributed table never commit in one transaction.
 *
 * Citus commits a write that touches one worker on that worker before the
 * coordinator writes its own commit record (one-phase commit).  A claim in
 * the coordinator's idempotency.claims is therefore not atomic with such a
 * write: a coordinator crash between the two keeps the write and loses the
 * claim, and the redelivered event is applied again.  The exactly-once
 * recipe is the delegated handler (docs/citus.md, "Running on Citus"), which
 * claims on the worker that holds the row, in the write's own local
 * transaction.  So, on a coordinator that has workers:
 *
 *	 - the first claim of a transaction checks the table locks the
 *	   transaction holds, and refuses if it has written a distributed (or
 *	   reference) table already;
 *	 - once a transaction has claimed, an ExecutorStart hook refuses any
 *	   statement that would write one, and a ProcessUtility hook any COPY
 *	   into one (IdemCitusExecutorStart, IdemCitusProcessUtility, which
 *	   init.c's hooks call).
 *
 * "Distributed" here means a table with a shard placed on another node:
 * distributed and reference tables.  A Citus local table lives on the
 * coordinator alone, so a claim beside its writes commits with them.
 *
 * Elsewhere (no Citus, a worker, a single-node Citus whose shards are all
 * local) nothing changes, and the only cost is one flag test per claim
 * after the first of a transaction.  Whether this node is a coordinator
 * with workers is cached per backend and forgotten when Citus invalidates
 * pg_dist_node's relcache entry, which it does on every change of its node
 * metadata.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace_d.h"
#include "catalog/pg_type_d.h"
#include "commands/extension.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/lockdefs.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

#include "base/base.h"
#include "citus.h"
#include "citusshard.h"

/* What this node is to Citus */
typedef enum IdemCitusRole
{
	IDEM_CITUS_UNKNOWN,			/* not looked at since the last change */
	IDEM_CITUS_NONE,			/* no Citus, a worker, or no workers */
	IDEM_CITUS_COORDINATOR		/* a coordinator with workers */
} IdemCitusRole;

static IdemCitusRole idem_citus_role = IDEM_CITUS_UNKNOWN;
static Oid	idem_dist_node_relid = InvalidOid;

/* this transaction has claimed on a coordinator with workers, first at
 * this subtransaction nesting level */
static bool idem_xact_coordinator_claim = false;
static int	idem_claim_nest_level = 0;
/* this transaction's first claim has been checked */
static bool idem_xact_checked = false;


/* an internal table of ours was invalidated: Citus may have distributed it */
static bool idem_xact_dist_check = false;

/* Citus is in shared_preload_libraries, so it can run here */
static bool idem_citus_preloaded = false;

/* Raise the refusal */
pg_noreturn static void
IdemCitusRefuse(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("a claim on a Citus coordinator cannot commit with writes to distributed tables"),
			 errdetail("Citus commits a worker's writes before the coordinator's own commit, so the claim and the write would not be atomic."),
			 errhint("Claim on the worker, in the write's own transaction: a handler function distributed with create_distributed_function(..., force_delegation := true), as docs/citus.md shows.")));
}

/* Store the boolean a one-column row holds in the bool arg */
static void
IdemCitusBoolRow(HeapTuple tuple, TupleDesc desc, void *arg)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, 1, &isnull);

	*(bool *) arg = !isnull && DatumGetBool(d);
}

/* The boolean a read of Citus's catalogs answers, run as the claims' owner */
bool
IdemCitusAsk(const char *sql, int nargs, Oid *argtypes, Datum *args)
{
	bool		answer = false;

	(void) IdemOwnerRun(IdemGetCatalog().claims, IDEM_RUN_READ_ONLY, sql,
						nargs, argtypes, args, NULL, IdemCitusBoolRow, &answer);
	return answer;
}

/* Is this node a Citus coordinator with workers?  Cached per backend */
static IdemCitusRole
IdemCitusRoleGet(void)
{
	uint64		start;
	IdemCitusRole role;

	if (idem_citus_role != IDEM_CITUS_UNKNOWN)
		return idem_citus_role;
	if (shared_preload_libraries_string == NULL ||
		strstr(shared_preload_libraries_string, "citus") == NULL)
		return idem_citus_role = IDEM_CITUS_NONE;	/* Citus cannot run here */
	if (!OidIsValid(get_extension_oid("citus", true)))
		return IDEM_CITUS_NONE; /* not cached: CREATE EXTENSION citus may come */
	idem_dist_node_relid = get_relname_relid("pg_dist_node", PG_CATALOG_NAMESPACE);
	start = IdemInvalCounter();
	/* the coordinator is group 0 in every Citus release */
	role = IdemCitusAsk("SELECT (SELECT groupid FROM pg_catalog.pg_dist_local_group) = 0"
						"   AND EXISTS (SELECT 1 FROM pg_catalog.pg_dist_node"
						"                WHERE groupid <> 0 AND isactive)",
						0, NULL, NULL) ?
		IDEM_CITUS_COORDINATOR : IDEM_CITUS_NONE;
	/* cached only if no invalidation arrived meanwhile */
	if (start == IdemInvalCounter())
		idem_citus_role = role;
	return role;
}

/*
 * Called by every claim: on a coordinator with workers, refuse the first
 * claim of a transaction that has written a distributed table, and mark
 * the transaction so that the ExecutorStart hook refuses later writes.
 */
void
IdemCitusCheckClaim(void)
{
	if (idem_xact_checked)
		return;
	if (IdemCitusRoleGet() == IDEM_CITUS_COORDINATOR)
	{
		if (IdemCitusAsk("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_locks l"
						 "  JOIN pg_catalog.pg_dist_shard s ON s.logicalrelid = l.relation"
						 "  JOIN pg_catalog.pg_dist_placement p ON p.shardid = s.shardid"
						 " WHERE l.pid = pg_catalog.pg_backend_pid() AND l.locktype = 'relation'"
						 "   AND p.groupid <> 0"
						 "   AND l.database = (SELECT oid FROM pg_catalog.pg_database"
						 "                      WHERE datname = pg_catalog.current_database())"
						 "   AND l.mode IN ('RowExclusiveLock', 'ShareRowExclusiveLock',"
						 "                  'ExclusiveLock', 'AccessExclusiveLock'))",
						 0, NULL, NULL))
			IdemCitusRefuse();
		idem_xact_coordinator_claim = true;
		idem_claim_nest_level = GetCurrentTransactionNestLevel();
	}
	idem_xact_checked = true;
}

/* What Citus names the connections between its nodes (Citus 11 and later) */
#define IDEM_CITUS_INTERNAL_APPNAME "citus_internal gpid="

/*
 * Called by every claim in a namespace of its own (idem_claim, its try and
 * batch forms, the trigger; not idem_citus_claim): refuse it in a session
 * Citus opened from another node, which is how a delegated function call
 * (or a write the coordinator routed, firing a trigger) runs on a worker.
 * Such a claim would stay on this node when Citus moves the shard of the
 * rows it guards, and every event it guards would be applied again after
 * the move; idem_citus_claim keeps the claim with the shard instead.
 */
void
IdemCitusCheckPlainClaim(const text *nsname)
{
	if (!idem_citus_preloaded || application_name == NULL ||
		strncmp(application_name, IDEM_CITUS_INTERNAL_APPNAME,
				strlen(IDEM_CITUS_INTERNAL_APPNAME)) != 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("a claim in a call Citus routed to this node must be kept with a shard"),
			 errdetail("A claim in namespace \"%s\" would stay on this node when Citus moves the shard of the rows it guards, and its events would be applied again after the move.",
					   text_to_cstring(nsname)),
			 errhint("Claim with idem_citus_claim(event_id, namespace, get_shard_id_for_distribution_column(table, key)), as the recipe of docs/citus.md does.")));
}

/*
 * Has any of these n tables a shard placed on another node?  Distributed
 * and reference tables have; a Citus local table, whose only shard is here
 * on the coordinator (group 0), is written in this node's own transaction.
 */
static bool
IdemCitusAnyRemote(Datum *relids, int n)
{
	Oid			argtypes[1] = {OIDARRAYOID};
	Datum		args[1];

	args[0] = PointerGetDatum(construct_array(relids, n, OIDOID,
											  sizeof(Oid), true, TYPALIGN_INT));
	return IdemCitusAsk("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_shard s"
						"  JOIN pg_catalog.pg_dist_placement p ON p.shardid = s.shardid"
						" WHERE s.logicalrelid OPERATOR(pg_catalog.=) ANY ($1)"
						"   AND p.groupid <> 0)",
						1, argtypes, args);
}

/*
 * ExecutorStart: after a coordinator claim, no write to a distributed
 * table; and shard moves, for citusshard.c
 */
void
IdemCitusExecutorStart(QueryDesc *queryDesc, int eflags)
{
	/* a shard move's placement change: its claims move too */
	if (idem_citus_preloaded && (eflags & EXEC_FLAG_EXPLAIN_ONLY) == 0)
		IdemCitusShardSeeStatement(queryDesc);
	if (idem_xact_coordinator_claim &&
		(eflags & EXEC_FLAG_EXPLAIN_ONLY) == 0)
	{
		List	   *rtable = queryDesc->plannedstmt->rtable;
		Datum	   *written = palloc(sizeof(Datum) * Max(list_length(rtable), 1));
		int			n = 0;
		ListCell   *lc;

		/* one look at pg_dist_partition for every table the statement writes */
		foreach(lc, rtable)
		{
			RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

			if (rte->rtekind == RTE_RELATION && rte->rellockmode >= RowExclusiveLock)
				written[n++] = ObjectIdGetDatum(rte->relid);
		}
		if (n > 0 && IdemCitusAnyRemote(written, n))
			IdemCitusRefuse();
		pfree(written);
	}
}

/* ProcessUtility: after a coordinator claim, no COPY into a distributed table */
void
IdemCitusProcessUtility(PlannedStmt *pstmt)
{
	Node	   *parsetree = pstmt->utilityStmt;

	if (idem_xact_coordinator_claim && IsA(parsetree, CopyStmt) &&
		((CopyStmt *) parsetree)->is_from && ((CopyStmt *) parsetree)->relation != NULL)
	{
		Oid			relid = RangeVarGetRelid(((CopyStmt *) parsetree)->relation,
											 NoLock, true);
		Datum		rel = ObjectIdGetDatum(relid);

		if (OidIsValid(relid) && IdemCitusAnyRemote(&rel, 1))
			IdemCitusRefuse();
	}
}

/*
 * Before commit: refuse a transaction that made one of the extension's
 * internal tables a Citus table (create_distributed_table, a reference
 * table, ...).  Claims write the local heap directly, so a distributed
 * idempotency.claims would silently stop being read, and Citus cannot undo
 * the distribution of an extension's table; refusing at commit catches it
 * however it was called.
 */
static void
IdemCitusCheckDistribution(void)
{
	Oid			schema;
	bool		distributed;

	idem_xact_dist_check = false;
	if (!IsTransactionState() ||
		!OidIsValid(get_extension_oid("citus", true)) ||
		!OidIsValid(get_extension_oid("idempotency", true)) ||
		!OidIsValid(schema = get_namespace_oid(IDEM_SCHEMA_NAME, true)))
		return;
	/* at commit the statement's snapshot is gone: read with a fresh one */
	PushActiveSnapshot(GetTransactionSnapshot());
	distributed = IdemCitusAsk("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p"
							   "  JOIN pg_catalog.pg_class c ON c.oid = p.logicalrelid"
							   " WHERE c.relnamespace = $1)",
							   1, (Oid[]) {OIDOID}, (Datum[]) {ObjectIdGetDatum(schema)});
	PopActiveSnapshot();
	if (distributed)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the idempotency extension's tables cannot be Citus tables"),
				 errdetail("Claims are written to each node's local idempotency.claims; a distributed or reference copy would not be read, and Citus cannot undo it for an extension's table."),
				 errhint("Keep the claims local to each node and claim in a delegated handler, as docs/citus.md shows.")));
}

/* Transaction end: forget the transaction's claims */
static void
IdemCitusXactCallback(XactEvent event, void *arg pg_attribute_unused())
{
	if ((event == XACT_EVENT_PRE_COMMIT || event == XACT_EVENT_PRE_PREPARE) &&
		idem_xact_dist_check)
		IdemCitusCheckDistribution();
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PARALLEL_ABORT)
		idem_xact_coordinator_claim = idem_xact_checked = idem_xact_dist_check = false;
}

/* A subtransaction that made the first claim rolled back: it is undone */
static void
IdemCitusSubXactCallback(SubXactEvent event,
						 SubTransactionId mySubid pg_attribute_unused(),
						 SubTransactionId parentSubid pg_attribute_unused(),
						 void *arg pg_attribute_unused())
{
	if (event == SUBXACT_EVENT_ABORT_SUB && idem_xact_checked &&
		GetCurrentTransactionNestLevel() <= idem_claim_nest_level)
		idem_xact_coordinator_claim = idem_xact_checked = false;
}

/*
 * Relcache invalidation: Citus's node metadata may have changed; or one of
 * our tables changed, which Citus does when it distributes one
 */
static void
IdemCitusRelcache(Oid relid)
{
	if (!OidIsValid(relid) || relid == idem_dist_node_relid)
		idem_citus_role = IDEM_CITUS_UNKNOWN;
	if (idem_citus_preloaded && OidIsValid(relid) && IdemCatalogHolds(relid))
		idem_xact_dist_check = true;
}

/* Register the callbacks; the hooks are init.c's (IdemCitusExecutorStart, IdemCitusProcessUtility) */
void
IdemCitusInit(void)
{
	idem_citus_preloaded = shared_preload_libraries_string != NULL &&
		strstr(shared_preload_libraries_string, "citus") != NULL;
	RegisterXactCallback(IdemCitusXactCallback, NULL);
	RegisterSubXactCallback(IdemCitusSubXactCallback, NULL);
	IdemInvalOnRelcache(IdemCitusRelcache);
}
