/*
 * citusshard.c
 *	  Claims kept with a Citus shard, and moved with it.
 *
 * On Citus a handler claims on the worker that holds the row it writes
 * (citus.c, docs/citus.md).  When Citus moves the row's shard
 * (citus_move_shard_placement, the rebalancer), redeliveries reach the new
 * node, so the claims must be there too.  idem_citus_claim(event_id,
 * namespace, shard) makes that possible:
 *
 *	 - It keeps the claim in a namespace of its own for the shard, named
 *	   namespace IDEM_SHARD_SEP shard id, with the TTL of namespace (which
 *	   idem_namespace_define passes on).  idem_claims shows it under
 *	   namespace.
 *	 - Before claiming it takes Citus's shard metadata lock in ShareLock, as
 *	   Citus's own writes to the shard do (tagged per shard index of the
 *	   co-location group for hash-distributed tables, as Citus tags it), and
 *	   checks that the shard is
 *	   placed on this node, reading the latest placement after the lock.  A
 *	   move takes that lock in ExclusiveLock on every node before it changes
 *	   the placement and holds it until it commits, so a move waits for the
 *	   claims of the shard in flight, and a claim that waited for a move
 *	   finds the shard gone and is refused with a serialization failure:
 *	   the caller retries, and the coordinator routes it to the new node.
 *
 * A move changes the placement on each worker with
 * citus_internal.update_placement_metadata(shard, source group, target
 * group), sent by the coordinator in the move's own distributed
 * transaction, which commits with two-phase commit.  The ExecutorStart
 * hook (citus.c) hands such calls to IdemCitusShardSeeStatement.  Before
 * that transaction prepares or commits on a node:
 *
 *	 - on the target, the shard's claims here (left from an earlier stay)
 *	   are deleted, and the source's are read over a libpq connection to
 *	   the source node and imported, keeping their claimed_at and
 *	   fingerprints.  The move holds the shard's lock everywhere, so the
 *	   source's claims of the shard are all committed or rolled back;
 *	 - on the source, the shard's claims are deleted.
 *
 * Both happen in the move's transaction, so they commit or abort with it.
 * The placement is read again first, with the transaction's own changes,
 * and only a placement row this transaction wrote counts, so a call that
 * failed or was rolled back with a subtransaction moves nothing.  The
 * target reads the source's namespaces of the moved shards (one
 * connection per source node) and claims only of those it finds.
 *
 * A split copies a shard's rows to new shards with worker_split_copy on
 * the node holding it; claims do not follow, so a split of a shard with
 * claims is refused there.
 *
 * The coordinator is not sent update_placement_metadata, so claims are
 * never kept there: idem_citus_claim refuses on the coordinator, and a move
 * of a shard with claims to the coordinator is refused.  A shard with
 * several placements (a reference table's, or replication factor above 1)
 * is refused too: its claims would be per placement.
 *
 * The connection to the source waits on the latch, so a cancel or a
 * statement_timeout stops it; it reads in single-row mode, so memory does
 * not grow with the shard's claims.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "libpq-fe.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/plannodes.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "base/base.h"
#include "citus.h"
#include "citusshard.h"
#include "claim/claim.h"
#include "catalog/idem_catalog.h"

/*
 * Citus's advisory lock classes of shard metadata (resource_lock.h): per
 * shard, or, for hash-distributed and single-shard tables, per shard index
 * of the co-location group
 */
#define IDEM_CITUS_SHARD_METADATA_CLASS		4
#define IDEM_CITUS_COLOCATED_METADATA_CLASS	8

/* Shards whose placement a backend remembers */
#define IDEM_SHARD_CACHE_SIZE	256

/* Where a shard is, as far as this node knows */
typedef enum IdemShardPlace
{
	IDEM_SHARD_UNKNOWN = -1,	/* no such shard */
	IDEM_SHARD_ELSEWHERE = 0,
	IDEM_SHARD_HERE = 1,
	IDEM_SHARD_REPLICATED = 2,	/* several placements */
	IDEM_SHARD_COORDINATOR = 3	/* this node is the coordinator */
} IdemShardPlace;

/* A shard's placement and the fields of its metadata lock's tag */
typedef struct IdemShardInfo
{
	int64		shard;
	IdemShardPlace place;
	uint32		field1;
	uint32		field2;
	uint16		field4;
} IdemShardInfo;

/* A placement change this transaction made: shard, from group, to group */
typedef struct IdemShardMove
{
	int64		shard;
	int32		source;
	int32		target;
} IdemShardMove;

static IdemShardInfo idem_shard_cache[IDEM_SHARD_CACHE_SIZE];
static int	idem_shard_cached = 0;
static uint64 idem_shard_cache_inval = 0;

/* this transaction's placement changes, in TopTransactionContext */
static List *idem_shard_moves = NIL;

static bool IdemShardHasLocal(int64 shard, bool claims);

/* Store the int4 a one-column row holds in the int32 arg */
static void
IdemShardIntRow(HeapTuple tuple, TupleDesc desc, void *arg)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, 1, &isnull);

	*(int32 *) arg = isnull ? IDEM_SHARD_UNKNOWN : DatumGetInt32(d);
}

/* Store a row of IdemShardRead's query in the IdemShardInfo arg */
static void
IdemShardInfoRow(HeapTuple tuple, TupleDesc desc, void *arg)
{
	IdemShardInfo *info = (IdemShardInfo *) arg;
	bool		isnull;

	info->place = (IdemShardPlace) DatumGetInt32(SPI_getbinval(tuple, desc, 1, &isnull));
	info->field1 = (uint32) DatumGetInt64(SPI_getbinval(tuple, desc, 2, &isnull));
	info->field2 = (uint32) DatumGetInt64(SPI_getbinval(tuple, desc, 3, &isnull));
	info->field4 = (uint16) DatumGetInt32(SPI_getbinval(tuple, desc, 4, &isnull));
}

/*
 * Where shard is placed, read from the latest committed placement, and how
 * Citus tags its metadata lock (SetLocktagForShardDistributionMetadata)
 */
static void
IdemShardRead(int64 shard, IdemShardInfo *info)
{
	memset(info, 0, sizeof(*info));
	info->shard = shard;
	info->place = IDEM_SHARD_UNKNOWN;
	(void) IdemOwnerRun(IdemGetCatalog().claims, IDEM_RUN_READ_ONLY | IDEM_RUN_LATEST,
						"SELECT CASE"
						"   WHEN NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_placement pl"
						"                     WHERE pl.shardid OPERATOR(pg_catalog.=) $1) THEN -1"
						"   WHEN (SELECT groupid FROM pg_catalog.pg_dist_local_group)"
						"        OPERATOR(pg_catalog.=) 0 THEN 3"
						"   WHEN (SELECT pg_catalog.count(*) FROM pg_catalog.pg_dist_placement pl"
						"          WHERE pl.shardid OPERATOR(pg_catalog.=) $1) OPERATOR(pg_catalog.>) 1 THEN 2"
						"   WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_dist_placement pl"
						"                 WHERE pl.shardid OPERATOR(pg_catalog.=) $1"
						"                   AND pl.groupid OPERATOR(pg_catalog.=)"
						"                       (SELECT groupid FROM pg_catalog.pg_dist_local_group)) THEN 1"
						"   ELSE 0 END,"
						/* the shard index: its rank by hash range (a single shard: 0) */
						" CASE WHEN NOT x.coloc THEN $1 OPERATOR(pg_catalog.>>) 32"
						"      WHEN x.hash THEN"
						"        (SELECT pg_catalog.count(*) FROM pg_catalog.pg_dist_shard o"
						"          WHERE o.logicalrelid OPERATOR(pg_catalog.=) x.logicalrelid"
						"            AND o.shardminvalue::pg_catalog.int4 OPERATOR(pg_catalog.<) x.minvalue::pg_catalog.int4)"
						"      ELSE 0 END,"
						" CASE WHEN x.coloc THEN x.colocationid::pg_catalog.int8"
						"      ELSE $1 OPERATOR(pg_catalog.&) 4294967295 END,"
						" CASE WHEN x.coloc THEN 8 ELSE 4 END"
						"  FROM (SELECT p.colocationid, s.logicalrelid, s.shardminvalue AS minvalue,"
						"               p.partmethod OPERATOR(pg_catalog.=) 'h' AS hash,"
						"               p.colocationid OPERATOR(pg_catalog.<>) 0"
						"               AND (p.partmethod OPERATOR(pg_catalog.=) 'h'"
						"                    OR (p.partmethod OPERATOR(pg_catalog.=) 'n'"
						"                        AND p.repmodel OPERATOR(pg_catalog.<>) 't')) AS coloc"
						"          FROM pg_catalog.pg_dist_shard s"
						"          JOIN pg_catalog.pg_dist_partition p"
						"            ON p.logicalrelid OPERATOR(pg_catalog.=) s.logicalrelid"
						"         WHERE s.shardid OPERATOR(pg_catalog.=) $1) x",
						1, (Oid[]) {INT8OID}, (Datum[]) {Int64GetDatum(shard)},
						NULL, IdemShardInfoRow, info);
}

/*
 * What IdemShardRead says of shard, remembered until the next
 * invalidation.  *inval gets the invalidation count the answer holds for.
 */
static void
IdemShardGet(int64 shard, IdemShardInfo *info, uint64 *inval)
{
	uint64		start;
	int			i;

	if (idem_shard_cache_inval != IdemInvalCounter())
	{
		idem_shard_cached = 0;
		idem_shard_cache_inval = IdemInvalCounter();
	}
	for (i = 0; i < idem_shard_cached; i++)
		if (idem_shard_cache[i].shard == shard)
		{
			*info = idem_shard_cache[i];
			*inval = idem_shard_cache_inval;
			return;
		}

	start = IdemInvalCounter();
	IdemShardRead(shard, info);
	*inval = start;
	/* remembered only if no invalidation arrived meanwhile */
	if (start == IdemInvalCounter() && info->place != IDEM_SHARD_UNKNOWN)
	{
		if (idem_shard_cached == IDEM_SHARD_CACHE_SIZE)
			idem_shard_cached = 0;
		idem_shard_cache[idem_shard_cached++] = *info;
	}
}

/* Is the citus extension installed here?  Remembered until an invalidation */
static bool
IdemCitusInstalled(void)
{
	static uint64 inval = 0;
	static bool known = false;
	static bool installed = false;

	if (!known || inval != IdemInvalCounter())
	{
		inval = IdemInvalCounter();
		installed = OidIsValid(get_extension_oid("citus", true));
		known = (inval == IdemInvalCounter());
	}
	return installed;
}

/*
 * Before a claim kept with shard: take the shard's metadata lock as Citus's
 * writes do, then refuse unless the shard is placed here
 */
void
IdemCitusShardEnter(int64 shard)
{
	IdemShardInfo info;
	uint64		inval;
	int			tries;

	if (shard <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("shard must be a Citus shard id"),
				 errhint("Pass get_shard_id_for_distribution_column(table, key) for the row the handler writes.")));
	if (!IdemCitusInstalled())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("claims kept with a Citus shard need the citus extension"),
				 errhint("Without Citus, use idem_claim() and idem_release().")));

	IdemShardGet(shard, &info, &inval);
	for (tries = 0;; tries++)
	{
		LOCKTAG		tag;
		IdemShardInfo again;

		if (info.place == IDEM_SHARD_UNKNOWN)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("shard " INT64_FORMAT " does not exist", shard)));
		SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, info.field1, info.field2, info.field4);
		(void) LockAcquire(&tag, ShareLock, false, false);
		/* a move that committed before we got the lock: see its placement */
		AcceptInvalidationMessages();
		if (IdemInvalCounter() == inval)
			break;				/* nothing changed since info was read */
		inval = IdemInvalCounter();
		IdemShardRead(shard, &again);
		if (again.field1 == info.field1 && again.field2 == info.field2 &&
			again.field4 == info.field4)
		{
			info = again;		/* the lock we hold is still the right one */
			break;
		}
		if (tries >= 3)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("the metadata of shard " INT64_FORMAT " keeps changing", shard),
					 errhint("Retry the call.")));
		info = again;			/* lock the new tag too, and look again */
	}

	if (info.place == IDEM_SHARD_COORDINATOR)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("claims kept with a Citus shard live on workers, not on the coordinator"),
				 errdetail("This call was not delegated to the worker that holds shard " INT64_FORMAT ".", shard),
				 errhint("Call the handler on its own, one call per statement, and distribute it with create_distributed_function(..., force_delegation := true), as docs/citus.md shows.")));
	if (info.place == IDEM_SHARD_REPLICATED)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("shard " INT64_FORMAT " has more than one placement", shard),
				 errdetail("A claim kept with it would be kept on one of them only."),
				 errhint("Keep claims with the shards of a distributed table with replication factor 1, not a reference table's.")));
	if (info.place == IDEM_SHARD_ELSEWHERE)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("shard " INT64_FORMAT " is not placed on this node", shard),
				 errdetail("Citus has moved it, or the call reached a node that does not hold it."),
				 errhint("Retry the call through the coordinator, which routes it to the shard's node.")));
}

/*
 * The namespace holding namespace parent's claims kept with shard, created
 * with parent's TTL on first use
 */
void
IdemCitusShardNamespace(const text *parent, int64 shard, IdemNamespace *out)
{
	int			len = VARSIZE_ANY_EXHDR(parent);
	char		name[IDEM_MAX_NAMESPACE_BYTES + 32];
	IdemNamespace p;
	Interval	ttl;
	int			n;

	IdemValidateNamespace(parent);
	n = snprintf(name, sizeof(name), "%.*s%c" INT64_FORMAT,
				 len, VARDATA_ANY(parent), IDEM_SHARD_SEP, shard);
	if (n > IDEM_MAX_NAMESPACE_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("namespace name is too long for idem_citus_claim()"),
				 errdetail("With the shard id the name takes %d bytes; the limit is %d bytes.",
						   n, IDEM_MAX_NAMESPACE_BYTES)));
	(void) IdemNamespaceGet(parent, true, &p);
	ttl = p.ttl;
	(void) IdemNamespaceGetWithTtl(cstring_to_text(name), true, &ttl, out);
	/* a TTL change of parent that met this namespace's creation: follow it */
	if (out->ttl.month != ttl.month || out->ttl.day != ttl.day || out->ttl.time != ttl.time)
	{
		IdemNamespaceDefineInternal(name, &ttl);
		(void) IdemNamespaceGetWithTtl(cstring_to_text(name), true, &ttl, out);
	}
}

/* The value of an integer constant, or false if expr is not one */
static bool
IdemShardConstArg(Node *expr, int64 *value)
{
	Const	   *c = (Const *) expr;

	if (!IsA(expr, Const) || c->constisnull)
		return false;
	if (c->consttype == INT8OID)
		*value = DatumGetInt64(c->constvalue);
	else if (c->consttype == INT4OID)
		*value = DatumGetInt32(c->constvalue);
	else
		return false;
	return true;
}

/*
 * ExecutorStart, on a node with Citus: remember a call of Citus's
 * update_placement_metadata(shard, source group, target group), and refuse
 * worker_split_copy(shard, ...) of a shard with claims, whose new shards
 * would not have them
 */
void
IdemCitusShardSeeStatement(QueryDesc *queryDesc)
{
	PlannedStmt *ps = queryDesc->plannedstmt;
	TargetEntry *tle;
	FuncExpr   *fe;
	char	   *fname;
	char	   *schema;
	int64		args[3];
	int			i;
	bool		move;
	IdemShardMove *m;
	MemoryContext old;

	if (ps->commandType != CMD_SELECT || ps->planTree == NULL ||
		!IsA(ps->planTree, Result) || list_length(ps->planTree->targetlist) != 1)
		return;
	tle = linitial_node(TargetEntry, ps->planTree->targetlist);
	if (!IsA(tle->expr, FuncExpr) || list_length(((FuncExpr *) tle->expr)->args) != 3)
		return;
	fe = (FuncExpr *) tle->expr;
	if (!IdemShardConstArg(linitial(fe->args), &args[0]))
		return;
	fname = get_func_name(fe->funcid);
	schema = fname ? get_namespace_name(get_func_namespace(fe->funcid)) : NULL;
	if (schema == NULL)
		return;
	move = (strcmp(schema, "citus_internal") == 0 &&
			strcmp(fname, "update_placement_metadata") == 0) ||
		(strcmp(schema, "pg_catalog") == 0 &&
		 strcmp(fname, "citus_internal_update_placement_metadata") == 0);
	if (!move && !(strcmp(schema, "pg_catalog") == 0 && strcmp(fname, "worker_split_copy") == 0))
		return;
	if (!OidIsValid(get_extension_oid("idempotency", true)))
		return;					/* a database without the extension */

	if (!move)
	{
		if (IdemShardHasLocal(args[0], true))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("shard " INT64_FORMAT " cannot be split: it has claims", args[0]),
					 errdetail("Claims kept with a shard (idem_citus_claim) move with it, but do not follow a split to the new shards."),
					 errhint("Move the shard instead, or split it once its claims have expired.")));
		return;
	}
	for (i = 1; i < 3; i++)
		if (!IdemShardConstArg(list_nth(fe->args, i), &args[i]))
			return;

	old = MemoryContextSwitchTo(TopTransactionContext);
	m = palloc(sizeof(IdemShardMove));
	m->shard = args[0];
	m->source = (int32) args[1];
	m->target = (int32) args[2];
	idem_shard_moves = lappend(idem_shard_moves, m);
	MemoryContextSwitchTo(old);
}

/* The name pattern of shard's namespaces: IDEM_SHARD_SEP, then the id */
static Datum
IdemShardSuffix(int64 shard)
{
	return CStringGetTextDatum(psprintf("%c" INT64_FORMAT, IDEM_SHARD_SEP, shard));
}

/* Store true in the bool arg: a row came */
static void
IdemShardSawRow(HeapTuple tuple pg_attribute_unused(), TupleDesc desc pg_attribute_unused(),
				void *arg)
{
	*(bool *) arg = true;
}

/* Has this node a namespace of shard's, and, if claims, a claim in one? */
static bool
IdemShardHasLocal(int64 shard, bool claims)
{
	bool		found = false;

	(void) IdemOwnerRun(IdemGetCatalog().claims, IDEM_RUN_READ_ONLY | IDEM_RUN_LATEST,
						claims ?
						"SELECT 1 FROM idempotency.claims"
						" WHERE ns OPERATOR(pg_catalog.=) ANY (ARRAY("
						"   SELECT id FROM idempotency.namespaces"
						"    WHERE pg_catalog.right(name, pg_catalog.length($1)) OPERATOR(pg_catalog.=) $1))"
						" LIMIT 1" :
						"SELECT 1 FROM idempotency.namespaces"
						" WHERE pg_catalog.right(name, pg_catalog.length($1)) OPERATOR(pg_catalog.=) $1"
						" LIMIT 1",
						1, (Oid[]) {TEXTOID}, (Datum[]) {IdemShardSuffix(shard)},
						NULL, IdemShardSawRow, &found);
	return found;
}

/* Delete this node's claims kept with shard, as they stand now */
static void
IdemShardDeleteLocal(int64 shard)
{
	if (!IdemShardHasLocal(shard, false))
		return;
	(void) IdemOwnerRun(IdemGetCatalog().claims, IDEM_RUN_LATEST,
						"DELETE FROM idempotency.claims"
						" WHERE ns OPERATOR(pg_catalog.=) ANY (ARRAY("
						"   SELECT id FROM idempotency.namespaces"
						"    WHERE pg_catalog.right(name, pg_catalog.length($1)) OPERATOR(pg_catalog.=) $1))",
						1, (Oid[]) {TEXTOID}, (Datum[]) {IdemShardSuffix(shard)},
						NULL, NULL, NULL);
}

/* A node of a Citus group: id, host, port, and the authinfo for us */
typedef struct IdemShardNode
{
	int32		nodeid;
	char	   *host;
	int32		port;
	char	   *authinfo;
} IdemShardNode;

static void
IdemShardNodeRow(HeapTuple tuple, TupleDesc desc, void *arg)
{
	IdemShardNode *node = (IdemShardNode *) arg;
	bool		isnull;

	node->nodeid = DatumGetInt32(SPI_getbinval(tuple, desc, 1, &isnull));
	node->host = SPI_getvalue(tuple, desc, 2);
	node->port = DatumGetInt32(SPI_getbinval(tuple, desc, 3, &isnull));
}

static void
IdemShardAuthinfoRow(HeapTuple tuple, TupleDesc desc, void *arg)
{
	((IdemShardNode *) arg)->authinfo = SPI_getvalue(tuple, desc, 1);
}


/* Raise a failure of conn: msg says what failed */
pg_noreturn static void
IdemShardConnError(PGconn *conn, const char *msg)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg_internal("%s", msg),
			 errdetail_internal("%s", pchomp(PQerrorMessage(conn))),
			 errhint("The node a shard moves to reads the shard's claims from the node it leaves, as the role moving it, with citus.node_conninfo and pg_dist_authinfo.")));
}

/* Wait until conn's socket is ready for io, the latch is set, or the deadline */
static void
IdemShardWaitUntil(PGconn *conn, int io, TimestampTz deadline, const char *msg)
{
	long		ms = -1L;
	int			rc;

	if (deadline != 0)
	{
		ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (ms <= 0)
			IdemShardConnError(conn, msg);
	}
	rc = WaitLatchOrSocket(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | io |
						   (deadline != 0 ? WL_TIMEOUT : 0),
						   PQsocket(conn), ms, PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
	{
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Connect to the primary node of group, as this user, to this database, as
 * Citus would (citus.node_conninfo, pg_dist_authinfo), with settings that
 * make the answers parse the same here, and a lock timeout: a lock wait
 * there could wait for this very transaction, which no deadlock detector
 * sees across nodes
 */
static PGconn *
IdemShardConnect(int32 group)
{
	IdemShardNode node = {0, NULL, 0, NULL};
	const char *keywords[12];
	const char *values[12];
	const char *extra = GetConfigOption("citus.node_conninfo", true, false);
	char	   *user = GetUserNameFromId(GetUserId(), false);
	char	   *conninfo;
	char	   *failed;
	char		port[16];
	int			k = 0;
	PGconn	   *volatile conn;
	PostgresPollingStatusType status = PGRES_POLLING_WRITING;
	TimestampTz deadline;

	(void) IdemOwnerRun(IdemGetCatalog().claims, IDEM_RUN_READ_ONLY | IDEM_RUN_LATEST,
						"SELECT nodeid, nodename, nodeport FROM pg_catalog.pg_dist_node"
						" WHERE groupid OPERATOR(pg_catalog.=) $1 AND isactive"
						"   AND noderole OPERATOR(pg_catalog.=) 'primary' LIMIT 1",
						1, (Oid[]) {INT4OID}, (Datum[]) {Int32GetDatum(group)},
						NULL, IdemShardNodeRow, &node);
	if (node.host == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no active node in Citus group %d to move claims from", group)));
	/*
	 * pg_dist_authinfo, as Citus reads it for its own connections: the rule
	 * of this node, else of every node (only superusers may read it; the
	 * extension's owner reads it here)
	 */
	if (IdemCitusAsk("SELECT pg_catalog.has_table_privilege('pg_catalog.pg_dist_authinfo', 'SELECT')",
					 0, NULL, NULL))
		(void) IdemOwnerRun(IdemGetCatalog().claims, IDEM_RUN_READ_ONLY | IDEM_RUN_LATEST,
							"SELECT authinfo FROM pg_catalog.pg_dist_authinfo"
							" WHERE rolename OPERATOR(pg_catalog.=) $1::pg_catalog.name"
							"   AND nodeid OPERATOR(pg_catalog.=) ANY (ARRAY[$2, 0])"
							" ORDER BY nodeid OPERATOR(pg_catalog.=) 0 LIMIT 1",
							2, (Oid[]) {TEXTOID, INT4OID},
							(Datum[]) {CStringGetTextDatum(user), Int32GetDatum(node.nodeid)},
							NULL, IdemShardAuthinfoRow, &node);

	/* citus.node_conninfo and the authinfo first (expanded), then ours */
	conninfo = psprintf("%s %s", extra ? extra : "", node.authinfo ? node.authinfo : "");
	if (strspn(conninfo, " ") != strlen(conninfo))
	{
		keywords[k] = "dbname";
		values[k++] = conninfo;
	}
	snprintf(port, sizeof(port), "%d", node.port);
	keywords[k] = "host";
	values[k++] = node.host;
	keywords[k] = "port";
	values[k++] = port;
	keywords[k] = "dbname";
	values[k++] = get_database_name(MyDatabaseId);
	keywords[k] = "user";
	values[k++] = user;
	keywords[k] = "application_name";
	values[k++] = "idempotency shard move";
	keywords[k] = "client_encoding";
	values[k++] = GetDatabaseEncodingName();
	keywords[k] = "options";
	values[k++] = "-c datestyle=ISO -c timezone=UTC -c intervalstyle=postgres"
		" -c bytea_output=hex -c search_path=pg_catalog -c lock_timeout=10s"
		" -c row_security=off";	/* a read filtered by a policy fails, never loses claims */
	keywords[k] = NULL;
	values[k] = NULL;

	failed = psprintf("could not connect to Citus node %s:%d to move claims", node.host, node.port);
	conn = PQconnectStartParams(keywords, values, 1);
	if (conn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 10000);
	PG_TRY();
	{
		if (PQstatus(conn) == CONNECTION_BAD)
			IdemShardConnError(conn, failed);
		while (status != PGRES_POLLING_OK)
		{
			if (status == PGRES_POLLING_FAILED)
				IdemShardConnError(conn, failed);
			IdemShardWaitUntil(conn, status == PGRES_POLLING_READING ?
							   WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE,
							   deadline, failed);
			status = PQconnectPoll(conn);
		}
	}
	PG_CATCH();
	{
		PQfinish(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return conn;
}

/* The next result of conn's query, waiting on the latch meanwhile */
static PGresult *
IdemShardResult(PGconn *conn)
{
	while (PQisBusy(conn))
	{
		IdemShardWaitUntil(conn, WL_SOCKET_READABLE, 0, NULL);
		if (!PQconsumeInput(conn))
			IdemShardConnError(conn, "could not read claims from the node a shard moves from");
	}
	return PQgetResult(conn);
}

/* Import one claim of a row of IdemShardPull's query */
static void
IdemShardImportRow(PGresult *res)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "idempotency shard claim",
											  ALLOCSET_SMALL_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	const char *name = PQgetvalue(res, 0, 0);
	const char *sep = strchr(name, IDEM_SHARD_SEP);
	int64		shard;
	text	   *parent;
	Interval   *ttl;
	IdemNamespace pns;
	IdemNamespace ns;
	IdemClaimRow row;
	bytea	   *key;

	if (sep == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a node returned namespace \"%s\" for a shard's claims", name)));
	parent = cstring_to_text_with_len(name, sep - name);
	shard = DatumGetInt64(DirectFunctionCall1(int8in, CStringGetDatum(sep + 1)));
	/* the namespace itself, if this node lacks it, with the source's TTL */
	ttl = DatumGetIntervalP(DirectFunctionCall3(interval_in,
												CStringGetDatum(PQgetvalue(res, 0, 4)),
												ObjectIdGetDatum(InvalidOid),
												Int32GetDatum(-1)));
	(void) IdemNamespaceGetWithTtl(parent, true, ttl, &pns);
	key = DatumGetByteaPP(DirectFunctionCall1(byteain,
											  CStringGetDatum(PQgetvalue(res, 0, 1))));
	row.claimed_at = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in,
															 CStringGetDatum(PQgetvalue(res, 0, 2)),
															 ObjectIdGetDatum(InvalidOid),
															 Int32GetDatum(-1)));
	row.has_fp = !PQgetisnull(res, 0, 3);
	row.fp = row.has_fp ?
		DatumGetInt64(DirectFunctionCall1(int8in, CStringGetDatum(PQgetvalue(res, 0, 3)))) : 0;
	IdemCitusShardNamespace(parent, shard, &ns);
	(void) IdemClaimImport(key, &ns, &row);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/*
 * Read the claims kept with the shards of suffixes (IdemShardSuffix's, as
 * a text array literal's elements) on group's node, and import them here,
 * a row at a time; one connection for all of a move's shards from there
 */
static void
IdemShardPull(List *shards, int32 group)
{
	PGconn	   *volatile conn = NULL;
	PGresult   *volatile res = NULL;
	StringInfoData arr;
	ListCell   *lc;

	/* {"\x1f<id>",...}: the byte needs no quoting in an array literal */
	initStringInfo(&arr);
	appendStringInfoChar(&arr, '{');
	foreach(lc, shards)
		appendStringInfo(&arr, "%s%c" INT64_FORMAT, lc == list_head(shards) ? "" : ",",
						 IDEM_SHARD_SEP, *(int64 *) lfirst(lc));
	appendStringInfoChar(&arr, '}');

	PG_TRY();
	{
		const char *params[1] = {arr.data};

		conn = IdemShardConnect(group);
		/* the namespaces first (everyone may read them): none, no claims read */
		if (!PQsendQueryParams(conn,
							   "SELECT n.name, c.key, c.claimed_at, c.fingerprint, n.ttl"
							   "  FROM (SELECT DISTINCT ON (id) id, name, ttl FROM idempotency.namespaces"
							   "         WHERE pg_catalog.substr(name, pg_catalog.strpos(name, E'\\x1f'))"
							   "               OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.text[])"
							   "         ORDER BY id, defined_at DESC) n"
							   "  JOIN LATERAL (SELECT key, claimed_at, fingerprint FROM idempotency.claims"
							   "                 WHERE ns OPERATOR(pg_catalog.=) n.id) c ON true",
							   1, NULL, params, NULL, NULL, 0) ||
			!PQsetSingleRowMode(conn))
			IdemShardConnError(conn, "could not read claims from the node a shard moves from");
		while ((res = IdemShardResult(conn)) != NULL)
		{
			ExecStatusType st = PQresultStatus(res);

			if (st == PGRES_SINGLE_TUPLE)
				IdemShardImportRow(res);
			else if (st != PGRES_TUPLES_OK)
				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("could not read claims from the node a shard moves from"),
						 errdetail_internal("%s", pchomp(PQresultErrorMessage(res))),
						 errhint("The role moving the shard needs SELECT on idempotency.claims there.")));
			PQclear(res);
			res = NULL;
		}
	}
	PG_FINALLY();
	{
		if (res != NULL)
			PQclear(res);
		if (conn != NULL)
			PQfinish(conn);
	}
	PG_END_TRY();
}

/* A pg_dist_placement row of a shard: its group, and whether we wrote it */
typedef struct IdemShardPlacementRow
{
	bool		found;
	int32		group;
	bool		ours;
} IdemShardPlacementRow;

static void
IdemShardPlacementRowGet(HeapTuple tuple, TupleDesc desc, void *arg)
{
	IdemShardPlacementRow *row = (IdemShardPlacementRow *) arg;
	bool		isnull;

	row->found = true;
	row->group = DatumGetInt32(SPI_getbinval(tuple, desc, 1, &isnull));
	row->ours = TransactionIdIsCurrentTransactionId(DatumGetTransactionId(SPI_getbinval(tuple, desc, 2, &isnull)));
}

/*
 * Before this transaction prepares or commits: move the claims of the
 * shards it moved to or from this node.  Only a placement row this very
 * transaction wrote counts, so that a call of update_placement_metadata
 * that failed, or was rolled back with a subtransaction, moves nothing.
 */
static void
IdemCitusShardMoveClaims(void)
{
	List	   *moves = idem_shard_moves;
	List	   *pulls = NIL;	/* IdemShardMove of shards moved here */
	ListCell   *lc;
	int32		local = -1;

	idem_shard_moves = NIL;
	if (!OidIsValid(get_extension_oid("idempotency", true)))
		return;
	/* the placement as this transaction leaves it */
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	(void) IdemOwnerRun(IdemGetCatalog().claims, IDEM_RUN_READ_ONLY,
						"SELECT groupid FROM pg_catalog.pg_dist_local_group",
						0, NULL, NULL, NULL, IdemShardIntRow, &local);
	foreach(lc, moves)
	{
		IdemShardMove *move = (IdemShardMove *) lfirst(lc);
		IdemShardPlacementRow now = {false, 0, false};

		(void) IdemOwnerRun(IdemGetCatalog().claims, IDEM_RUN_READ_ONLY,
							"SELECT groupid, xmin FROM pg_catalog.pg_dist_placement"
							" WHERE shardid OPERATOR(pg_catalog.=) $1",
							1, (Oid[]) {INT8OID}, (Datum[]) {Int64GetDatum(move->shard)},
							NULL, IdemShardPlacementRowGet, &now);
		if (!now.found || !now.ours || now.group != move->target)
			continue;			/* not moved by this transaction, as it says */
		if (move->target == local && move->source != local)
		{
			IdemShardDeleteLocal(move->shard);
			pulls = lappend(pulls, move);
		}
		else if (move->source == local && move->target != local)
		{
			/* the coordinator is told nothing: it could not take them */
			if (move->target == 0 && IdemShardHasLocal(move->shard, true))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("shard " INT64_FORMAT " cannot move to the coordinator: it has claims", move->shard),
						 errdetail("Claims kept with a shard (idem_citus_claim) live on workers only."),
						 errhint("Move the shard to a worker.")));
			IdemShardDeleteLocal(move->shard);
		}
	}
	/* one read per node the shards come from */
	while (pulls != NIL)
	{
		int32		source = ((IdemShardMove *) linitial(pulls))->source;
		List	   *shards = NIL;
		List	   *rest = NIL;

		foreach(lc, pulls)
		{
			IdemShardMove *move = (IdemShardMove *) lfirst(lc);

			if (move->source == source)
				shards = lappend(shards, &move->shard);
			else
				rest = lappend(rest, move);
		}
		IdemShardPull(shards, source);
		list_free(shards);
		list_free(pulls);
		pulls = rest;
	}
	PopActiveSnapshot();
	list_free_deep(moves);
}

/* Transaction end: forget; before it commits or prepares, move claims */
static void
IdemCitusShardXactCallback(XactEvent event, void *arg pg_attribute_unused())
{
	if (event == XACT_EVENT_PRE_COMMIT || event == XACT_EVENT_PRE_PREPARE)
	{
		if (idem_shard_moves != NIL && IsTransactionState())
			IdemCitusShardMoveClaims();
	}
	else if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
			 event == XACT_EVENT_PREPARE || event == XACT_EVENT_PARALLEL_COMMIT ||
			 event == XACT_EVENT_PARALLEL_ABORT)
		idem_shard_moves = NIL; /* freed with TopTransactionContext */
}

/* Register the callback; called from _PG_init */
void
IdemCitusShardInit(void)
{
	RegisterXactCallback(IdemCitusShardXactCallback, NULL);
}
