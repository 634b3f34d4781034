/*
 * generation.c
 *	  Claim generations: time slices of the claims, one chain per TTL class,
 *	  dropped whole once every claim in them has expired.
 *
 * Deleting expired claims from one big table costs a heap scan per purge
 * round and a VACUUM that dirties nearly every leaf page of the random-key
 * index.  So claims of namespaces whose TTL is at least
 * idempotency.generation_min_ttl live in generations instead: tables
 * idempotency.claims_g<id> that inherit from idempotency.claims, so that
 * every read of the claims (idem_claims, a SELECT, pg_dump) sees them all.
 *
 *	 - A TTL class is a power of two of seconds: class c holds namespaces
 *	   with TTLs in [2^c, 2^(c+1)) seconds, so one chain never keeps
 *	   another's claims alive for long.  Each class has at most one open
 *	   generation, which takes its new claims.
 *	 - The maintenance pass (the purge worker's round, idem_purge()) opens a
 *	   new generation once the open one is older than the class's span,
 *	   2^c / idempotency.generations_per_ttl seconds, or holds
 *	   idempotency.generation_max_claims claims, and closes the old one.
 *	   Claimers count their insertions in shared memory (genfilter.c); the
 *	   one that makes a generation reach the bound wakes the launcher, which
 *	   runs this pass at once rather than at the next purge interval.  A
 *	   generation's pg_class.reltuples counts too, for the claims counted
 *	   before a restart, or written with SQL.
 *	   A switch counts itself in shared memory before it commits, so that a
 *	   claimer whose map missed it catches up (claimstore.c).
 *	 - It seals a closed generation once no claimer can still be inserting
 *	   into it: it takes a SHARE lock on it without waiting (a claimer holds
 *	   ROW EXCLUSIVE while it inserts, and checks after locking that its
 *	   generation is still open), reads every tuple, and stores the
 *	   namespaces it holds, the newest and oldest claimed_at of each, and a
 *	   filter of its claims (genfilter.c) in idempotency.generations.
 *	 - It drops a sealed generation once every namespace in it has passed
 *	   its newest claim's expiry under the TTLs of now: a DROP TABLE in the
 *	   same transaction as the row's deletion, its lock taken without
 *	   waiting by the worker (idem_purge() waits).  No DELETE, no VACUUM;
 *	   the space goes back to the operating system.
 *
 * Every step is one transaction, so a crash leaves the previous state or
 * the next.  Claims of shorter TTLs, claims made before a class has its
 * first generation, and rows a user inserts into idempotency.claims itself
 * stay in idempotency.claims, which the purge still deletes from.  How a
 * claim stays unique across all of them is in claimstore.c.
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_policy.h"
#include "catalog/pg_type_d.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "base/base.h"
#include "claimcache.h"
#include "generation.h"
#include "catalog/idem_catalog.h"
#include "genfilter.h"
#include "genstripe.h"

PG_FUNCTION_INFO_V1(idem_generation_switch);

int			idem_generation_min_ttl = 10;
int			idem_generations_per_ttl = 4;
int			idem_generation_max_claims = 250000;

static IdemGenCache idem_genmap_gen = IDEM_GEN_CACHE_INIT("idempotency generations");
static IdemGenMap *idem_genmap = NULL;
static uint64 idem_genmap_version = 0;
static Oid	idem_genmap_table = InvalidOid;	/* idempotency.generations */

/*
 * Generations dropped by this transaction, whose slots go at commit: a
 * drop rolled back with its subtransaction keeps its slot
 */
typedef struct IdemGenDropped
{
	int32		gen_id;
	SubTransactionId subid;		/* that dropped it, or its committed parent */
} IdemGenDropped;

static List *idem_gen_dropped = NIL;	/* of IdemGenDropped, in TopMemoryContext */

/*
 * A finer filter a seal built for shared memory, loaded when the sealing
 * transaction commits (never before: until then no claimer may trust it),
 * dropped if the subtransaction that built it aborts
 */
typedef struct IdemGenPendingFilter
{
	int32		gen_id;
	int32		ttl_class;
	SubTransactionId subid;		/* that built it, or its committed parent */
	IdemFilter	filter;			/* in TopMemoryContext */
} IdemGenPendingFilter;

static List *idem_gen_pending = NIL;



/* OID of idempotency.claims, for the write hooks; InvalidOid if none */
static Oid	idem_gen_root = InvalidOid;
static bool idem_gen_root_known = false;

/*
 * Changes of idempotency.generations this backend has seen (invalidations
 * of it), flagged so as never to equal a count of opens in shared memory:
 * the count of opens of a backend without one (IdemGenOpensSeen)
 */
#define IDEM_GEN_OPENS_LOCAL	(UINT64CONST(1) << 62)
static uint64 idem_genmap_changes = 0;

/* Forget the map when idempotency.generations changes */
static void
IdemGenMapInvalidate(Oid relid)
{
	if (relid == InvalidOid || relid == idem_gen_root)
		idem_gen_root_known = false;
	if (relid != InvalidOid && relid != idem_genmap_table)
		return;
	idem_genmap_changes++;
	if (idem_genmap != NULL)
	{
		idem_genmap = NULL;
		IdemGenCacheRetire(&idem_genmap_gen);
	}
}

/* A schema changed: ours may have come or gone */
static void
IdemGenSchemasChanged(void)
{
	idem_gen_root_known = false;
}

/* The OID of idempotency.claims, or InvalidOid; cached */
static Oid
IdemGenRootOid(void)
{
	if (!idem_gen_root_known)
	{
		Oid			schema = get_namespace_oid(IDEM_SCHEMA_NAME, true);

		idem_gen_root = OidIsValid(schema) ? get_relname_relid("claims", schema) : InvalidOid;
		idem_gen_root_known = true;
	}
	return idem_gen_root;
}

/*
 * Before a statement starts (init.c's ExecutorStart hook): a statement
 * that writes idempotency.claims by hand (INSERT, UPDATE,
 * MERGE, in SQL or PL/pgSQL) may add claims of any namespace there: fill
 * its announcement bitmap (genfilter.c).  The statement holds its lock on
 * the table already, so the maintenance pass cannot empty the bitmap
 * between this and its writes.
 */
void
IdemGenExecutorStart(QueryDesc *queryDesc, int eflags)
{
	if ((eflags & EXEC_FLAG_EXPLAIN_ONLY) == 0 &&
		IdemPlannedStmtHasResultRelations(queryDesc->plannedstmt))
	{
		ListCell   *lc;

		foreach(lc, queryDesc->plannedstmt->rtable)
		{
			RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

			if (rte->rtekind == RTE_RELATION && rte->rellockmode >= RowExclusiveLock &&
				OidIsValid(rte->relid) && rte->relid == IdemGenRootOid())
			{
				IdemGenRootAnnounceAll();
				break;
			}
		}
	}
}

/* Free a pending filter */
static void
IdemGenPendingFree(IdemGenPendingFilter *p)
{
	if (p->filter.bits != NULL)
		pfree(p->filter.bits);
	pfree(p);
}

/*
 * A pending filter of generation gen_id for n claims, listed before its
 * bits are allocated, so that an error frees it with the transaction
 */
static IdemGenPendingFilter *
IdemGenPendingAdd(int32 gen_id, int32 ttl_class, uint64 n)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	IdemGenPendingFilter *p = palloc0(sizeof(IdemGenPendingFilter));

	p->gen_id = gen_id;
	p->ttl_class = ttl_class;
	p->subid = GetCurrentSubTransactionId();
	idem_gen_pending = lappend(idem_gen_pending, p);
	IdemGenStripeGeometry(ttl_class, n, &p->filter);
	MemoryContextSwitchTo(old);
	return p;
}

/*
 * At the end of a transaction that sealed generations: a committed one
 * puts their finer filters into stripe lanes (genstripe.c), or else loads
 * them into shared memory as they are (where a slot and room are to be
 * had; a claimer loads the stored filter otherwise), any other end forgets
 * them.  A prepared transaction's commit comes later, in another
 * backend, so its seals keep only their stored filters.
 */
static void
IdemGenPendingEnd(XactEvent event)
{
	ListCell   *lc;

	if (idem_gen_pending == NIL)
		return;
	foreach(lc, idem_gen_pending)
	{
		IdemGenPendingFilter *p = lfirst(lc);

		if (event == XACT_EVENT_COMMIT)
		{
			int			slot = IdemGenSlotFind(p->gen_id, true, false);

			if (slot >= 0 &&
				!IdemGenFilterPlaceLane(slot, p->gen_id, p->ttl_class, &p->filter))
				(void) IdemGenFilterLoad(slot, p->gen_id, (const char *) p->filter.bits,
										 (Size) p->filter.nblocks * IDEM_FILTER_BLOCK_BYTES,
										 p->filter.nhashes, true);
		}
		IdemGenPendingFree(p);
	}
	list_free(idem_gen_pending);
	idem_gen_pending = NIL;
}

/* A subtransaction's seals and drops go with it, or pass to its parent */
static void
IdemGenSubXactCallback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg pg_attribute_unused())
{
	ListCell   *lc;

	if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, idem_gen_pending)
		{
			IdemGenPendingFilter *p = lfirst(lc);

			if (p->subid == mySubid)
				p->subid = parentSubid;
		}
		foreach(lc, idem_gen_dropped)
		{
			IdemGenDropped *d = lfirst(lc);

			if (d->subid == mySubid)
				d->subid = parentSubid;
		}
	}
	else if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		foreach(lc, idem_gen_pending)
		{
			IdemGenPendingFilter *p = lfirst(lc);

			if (p->subid == mySubid)
			{
				IdemGenPendingFree(p);
				idem_gen_pending = foreach_delete_current(idem_gen_pending, lc);
			}
		}
		foreach(lc, idem_gen_dropped)
		{
			IdemGenDropped *d = lfirst(lc);

			if (d->subid == mySubid)
			{
				pfree(d);
				idem_gen_dropped = foreach_delete_current(idem_gen_dropped, lc);
			}
		}
	}
}

/*
 * At the end of a transaction: add its claims to their generation's count,
 * load the finer filters of its seals, and free the shared slots of
 * generations dropped by a committed one
 */
static void
IdemGenXactCallback(XactEvent event, void *arg pg_attribute_unused())
{
	ListCell   *lc;

	IdemGenSwitchEnd(event);
	/* a short session's claims count too (genfilter.c batches them) */
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE)
	{
		IdemGenCountFlushPending();
		IdemGenPendingEnd(event);
	}
	if (idem_gen_dropped == NIL)
		return;
	if (event == XACT_EVENT_COMMIT)
		foreach(lc, idem_gen_dropped)
			IdemGenSlotFree(((IdemGenDropped *) lfirst(lc))->gen_id);
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE)
	{
		list_free_deep(idem_gen_dropped);
		idem_gen_dropped = NIL;
	}
}

/*
 * Before a utility statement (init.c's ProcessUtility hook): a COPY into
 * the claims announces; DROP EXTENSION idempotency drops the generations
 * first.  They inherit
 * from idempotency.claims but are not members of the extension (pg_dump
 * must dump their rows), so they would otherwise block the drop.
 */
void
IdemGenProcessUtility(PlannedStmt *pstmt)
{
	Node	   *parsetree = pstmt->utilityStmt;

	/*
	 * COPY into idempotency.claims (a restore, say): lock the table as COPY
	 * will, then fill its announcement bitmap, before any row goes in
	 */
	if (IsA(parsetree, CopyStmt) && ((CopyStmt *) parsetree)->is_from &&
		((CopyStmt *) parsetree)->relation != NULL && OidIsValid(IdemGenRootOid()))
	{
		Oid			relid = RangeVarGetRelid(((CopyStmt *) parsetree)->relation,
											 NoLock, true);

		if (OidIsValid(relid) && relid == IdemGenRootOid())
		{
			LockRelationOid(relid, RowExclusiveLock);
			IdemGenRootAnnounceAll();
		}
	}

	if (IsA(parsetree, DropStmt) &&
		((DropStmt *) parsetree)->removeType == OBJECT_EXTENSION)
	{
		ListCell   *lc;

		foreach(lc, ((DropStmt *) parsetree)->objects)
		{
			Node	   *name = lfirst(lc);

			if (IsA(name, String) && strcmp(strVal(name), "idempotency") == 0 &&
				OidIsValid(get_extension_oid("idempotency", true)) &&
				IdemExtensionOwnercheck(get_extension_oid("idempotency", true), GetUserId()))
			{
				Oid			schema = get_namespace_oid(IDEM_SCHEMA_NAME, true);
				Oid			claims = OidIsValid(schema) ?
					get_relname_relid("claims", schema) : InvalidOid;

				if (OidIsValid(claims))
				{
					List	   *children = find_inheritance_children(claims, AccessExclusiveLock);
					ListCell   *c;

					foreach(c, children)
					{
						char	   *rel = get_rel_name(lfirst_oid(c));

						if (rel != NULL && strncmp(rel, "claims_g", 8) == 0 &&
							get_rel_namespace(lfirst_oid(c)) == schema)
						{
							ObjectAddress obj;

							obj.classId = RelationRelationId;
							obj.objectId = lfirst_oid(c);
							obj.objectSubId = 0;
							performDeletion(&obj, DROP_CASCADE, PERFORM_DELETION_INTERNAL);
						}
					}
					CommandCounterIncrement();
				}
				IdemGenDbForget();
			}
		}
	}
}

/* Register the callbacks; called from _PG_init (the GUCs are init/guc.c's) */
void
IdemGenerationInit(void)
{
	IdemInvalOnRelcache(IdemGenMapInvalidate);
	IdemInvalOnSchemas(IdemGenSchemasChanged);
	RegisterXactCallback(IdemGenXactCallback, NULL);
	RegisterSubXactCallback(IdemGenSubXactCallback, NULL);
}

/*
 * idempotency.generation_max_claims is 0 or at least IDEM_GEN_MIN_CLAIMS:
 * a smaller bound would make a busy class a table every few claims, and
 * run out of the shared slots (IDEM_GEN_SLOTS) that hold their filters
 */
bool
IdemGenMaxClaimsCheck(int *newval, void **extra pg_attribute_unused(),
					  GucSource source pg_attribute_unused())
{
	if (*newval != 0 && *newval < IDEM_GEN_MIN_CLAIMS)
	{
		GUC_check_errdetail("A bound must be at least %d claims, or 0 for none.",
							IDEM_GEN_MIN_CLAIMS);
		return false;
	}
	return true;
}

/* The name of a generation's table */
static char *
IdemGenRelName(int32 id)
{
	return psprintf("claims_g%d", id);
}

/* Read an int4[] or timestamptz[] column into a palloc'd C array */
static int
IdemGenArray(HeapTuple tuple, TupleDesc desc, int col, Oid elemtype, Datum **out)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, col, &isnull);
	int			n = 0;
	bool	   *nulls;

	*out = NULL;
	if (isnull)
		return 0;
	if (elemtype == INT4OID)
		deconstruct_array(DatumGetArrayTypeP(d), INT4OID, 4, true, TYPALIGN_INT,
						  out, &nulls, &n);
	else
		deconstruct_array(DatumGetArrayTypeP(d), TIMESTAMPTZOID, 8, FLOAT8PASSBYVAL,
						  TYPALIGN_DOUBLE, out, &nulls, &n);
	return n;
}

/* Collects rows of idempotency.generations into a map */
typedef struct IdemGenCollect
{
	IdemGeneration *gens;
	int			n;
	int			max;
	Oid			schema;
} IdemGenCollect;

/* One row of idempotency.generations: id, class, state, namespaces, last, filter? */
static void
IdemGenCollectRow(HeapTuple tuple, TupleDesc desc, void *arg)
{
	IdemGenCollect *c = arg;
	IdemGeneration *g;
	bool		isnull;
	char	   *state;
	Datum	   *ns;
	Datum	   *last;
	Datum	   *first;
	int			n;
	int			m;
	int			f;
	int			i;

	if (c->n == c->max)
	{
		c->max *= 2;
		c->gens = repalloc(c->gens, sizeof(IdemGeneration) * c->max);
	}
	g = &c->gens[c->n++];
	memset(g, 0, sizeof(*g));
	g->id = DatumGetInt32(SPI_getbinval(tuple, desc, 1, &isnull));
	g->ttl_class = DatumGetInt32(SPI_getbinval(tuple, desc, 2, &isnull));
	state = TextDatumGetCString(SPI_getbinval(tuple, desc, 3, &isnull));
	g->state = strcmp(state, "open") == 0 ? IDEM_GEN_OPEN :
		strcmp(state, "closed") == 0 ? IDEM_GEN_CLOSED : IDEM_GEN_SEALED;
	n = IdemGenArray(tuple, desc, 4, INT4OID, &ns);
	m = IdemGenArray(tuple, desc, 5, TIMESTAMPTZOID, &last);
	f = IdemGenArray(tuple, desc, 7, TIMESTAMPTZOID, &first);
	g->nns = Min(n, m);
	/* arrays that disagree, or claims without namespaces: a damaged row */
	g->inconsistent = n != m || (f > 0 && f != n);
	g->nsids = palloc(sizeof(int32) * Max(g->nns, 1));
	g->last_claimed = palloc(sizeof(TimestampTz) * Max(g->nns, 1));
	g->first_claimed = palloc(sizeof(TimestampTz) * Max(g->nns, 1));
	for (i = 0; i < g->nns; i++)
	{
		g->nsids[i] = DatumGetInt32(ns[i]);
		g->last_claimed[i] = DatumGetTimestampTz(last[i]);
		/* unknown (a row from before the column): as old as can be */
		g->first_claimed[i] = i < f ? DatumGetTimestampTz(first[i]) : DT_NOBEGIN;
	}
	g->has_filter = DatumGetBool(SPI_getbinval(tuple, desc, 6, &isnull)) && !isnull;
	g->opened_at = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 8, &isnull));
	g->claims = DatumGetInt64(SPI_getbinval(tuple, desc, 9, &isnull));
	if (isnull)
		g->claims = -1;
	if (g->state == IDEM_GEN_SEALED && g->claims != 0 && g->nns == 0)
		g->inconsistent = true;
	g->relid = get_relname_relid(IdemGenRelName(g->id), c->schema);
	g->slot = -1;
	g->stripe_ref = IDEM_STRIPE_NO_LANE;
	g->stripe_changes = PG_UINT64_MAX;
}

/* Read every generation, latest committed state, newest first */
static IdemGeneration *
IdemGenLoad(MemoryContext cxt, int *count)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	IdemGenCollect c;
	IdemCatalog cat = IdemGetCatalog();

	c.n = 0;
	c.max = 8;
	c.gens = palloc(sizeof(IdemGeneration) * c.max);
	c.schema = cat.schema;
	(void) IdemOwnerRun(cat.claims, IDEM_RUN_READ_ONLY | IDEM_RUN_LATEST,
						"SELECT id, ttl_class, state, namespaces, last_claimed, filter IS NOT NULL,"
						" first_claimed, opened_at, claims FROM idempotency.generations ORDER BY id DESC",
						0, NULL, NULL, NULL, IdemGenCollectRow, &c);
	MemoryContextSwitchTo(old);
	*count = c.n;
	return c.gens;
}

/*
 * How many generations this database has opened, as far as a claimer can
 * tell: the count in shared memory (genfilter.c), read before the map and
 * again after a claimer's insertion, which reads the map again if it moved
 * (IdemStoreCatchUp).  Without it (no shared_preload_libraries, or no
 * entry for the database), the changes of idempotency.generations this
 * backend has seen, after taking in the invalidations sent so far: a
 * switch's transaction sends its invalidation of the table (the
 * generations_changed trigger) before it releases its lock on the new
 * generation's table, which any claimer in it, or any probe of it, waits
 * for.  So of a claimer in the old open generation whose map missed the
 * switch and one in the new, either the latter's probe of the old
 * generation sees the former's entry, or the former inserted its entry
 * after that probe (under the same leaf page's lock), and finds the
 * invalidation here afterwards.  Either way the map is read once per
 * change of it, not per claim.
 */
uint64
IdemGenOpensSeen(void)
{
	uint64		opens = IdemGenOpensRead();

	if (opens != PG_UINT64_MAX)
		return opens;
	AcceptInvalidationMessages();
	return IDEM_GEN_OPENS_LOCAL | idem_genmap_changes;
}

/* Build a map in cxt: the count of opens first, then the rows */
static IdemGenMap *
IdemGenMapBuild(MemoryContext cxt)
{
	IdemGenMap *map = MemoryContextAllocZero(cxt, sizeof(IdemGenMap));
	int			i;

	/*
	 * The count of opens, then whether a switch is in flight, then the
	 * rows.  A switch counts its open before it commits, so while one is in
	 * flight the count may include a generation the rows do not show yet:
	 * then the map claims one open fewer, so that a claimer's check after
	 * its insertion (IdemStoreCatchUp) reads the generations again.
	 */
	map->opens = IdemGenOpensSeen();
	if (IdemGenSwitchInFlight() && map->opens != PG_UINT64_MAX && map->opens > 0)
		map->opens--;
	map->gens = IdemGenLoad(cxt, &map->ngens);
	map->version = ++idem_genmap_version;
	for (i = 0; i < map->ngens; i++)
		if (map->gens[i].state != IDEM_GEN_SEALED)
			map->gens[i].slot = IdemGenSlotFind(map->gens[i].id, true, false);
	return map;
}

/* Forget the map at the end of a transaction that read it in parallel mode */
static void
IdemGenMapReset(void)
{
	idem_genmap = NULL;
}

/*
 * The live generations, as last committed.  Valid until the end of the
 * transaction even if replaced meanwhile; compare versions to notice.
 */
IdemGenMap *
IdemGenMapGet(void)
{
	while (idem_genmap == NULL)
	{
		uint64		start;
		IdemGenMap *map;

		CHECK_FOR_INTERRUPTS();
		/*
		 * What has arrived so far first: without shared memory the build
		 * takes in invalidations (IdemGenOpensSeen), and one that was
		 * already waiting would make every attempt look overtaken
		 */
		AcceptInvalidationMessages();
		start = IdemInvalCounter();

		idem_genmap_table = get_relname_relid("generations", IdemGetCatalog().schema);
		map = IdemGenMapBuild(IdemGenCacheContext(&idem_genmap_gen));
		if (IdemInvalCounter() == start)
		{
			idem_genmap = map;
			if (IsInParallelMode())
				IdemGenCacheResetAtEnd(&idem_genmap_gen, IdemGenMapReset);	/* read under the query's snapshot */
		}
		else
			IdemGenCacheRetire(&idem_genmap_gen);	/* changed meanwhile */
	}
	return idem_genmap;
}

/*
 * A map read afresh now, whatever the cache says (a switch may have
 * committed without our having processed its invalidation yet); it
 * replaces the cached map, so that the next operation uses it rather than
 * reading the table again.  Valid until the end of the transaction.
 */
IdemGenMap *
IdemGenMapFresh(void)
{
	if (idem_genmap != NULL)
	{
		idem_genmap = NULL;
		IdemGenCacheRetire(&idem_genmap_gen);
	}
	return IdemGenMapGet();
}

/* The TTL class of a namespace's claims */
int32
IdemGenClassOf(const IdemNamespace *ns)
{
	return ns->ttl_class;
}

/*
 * The open generation new claims of ns go to, or NULL for the claims table:
 * where the class has none, and for a TTL below the claimer's
 * idempotency.generation_min_ttl (the worker may have opened a generation
 * for the class under its own setting; the claims table is the claimer's
 * word, and uniqueness holds across both).  Its relid is invalid if its
 * table is gone: the claimer decides (claimstore.c), not this lookup,
 * which must not send the claim elsewhere.
 */
IdemGeneration *
IdemGenTarget(IdemGenMap *map, const IdemNamespace *ns)
{
	int32		c = IdemGenClassOf(ns);
	int			i;

	if (IdemTtlSeconds(&ns->ttl) < idem_generation_min_ttl)
		return NULL;

	for (i = 0; i < map->ngens; i++)
		if (map->gens[i].state == IDEM_GEN_OPEN && map->gens[i].ttl_class == c)
			return &map->gens[i];
	return NULL;
}

/* A stored filter, as read by IdemGenLoadFilter */
typedef struct IdemStoredFilter
{
	bytea	   *bits;
	int			nhashes;
} IdemStoredFilter;

/* Copy the filter row out of SPI */
static void
IdemGenFilterRow(HeapTuple tuple, TupleDesc desc, void *arg)
{
	IdemStoredFilter *f = arg;
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, 1, &isnull);

	if (isnull)
		return;
	f->bits = DatumGetByteaPCopy(d);
	f->nhashes = DatumGetInt32(SPI_getbinval(tuple, desc, 2, &isnull));
	if (isnull)
		f->bits = NULL;
}

/* Load a sealed generation's filter into shared memory; false if it cannot */
static bool
IdemGenLoadFilter(IdemGeneration *gen)
{
	Datum		arg = Int32GetDatum(gen->id);
	Oid			argtype = INT4OID;
	bool		loaded = false;
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "idempotency filter load",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	IdemStoredFilter f = {NULL, 0};

	(void) IdemOwnerRun(IdemGetCatalog().claims, IDEM_RUN_READ_ONLY | IDEM_RUN_LATEST,
						"SELECT filter, filter_hashes FROM idempotency.generations WHERE id = $1",
						1, &argtype, &arg, NULL, IdemGenFilterRow, &f);
	if (f.bits != NULL)
		loaded = IdemGenFilterLoad(gen->slot, gen->id, VARDATA_ANY(f.bits),
								   VARSIZE_ANY_EXHDR(f.bits), f.nhashes, false);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return loaded;
}

/* Position of ns among the namespaces of sealed generation gen, or -1 */
static inline int
IdemGenNsIndex(const IdemGeneration *gen, const IdemNamespace *ns)
{
	int32	   *found = bsearch(&ns->id, gen->nsids, gen->nns, sizeof(int32),
								IdemInt32Compare);

	return found == NULL ? -1 : (int) (found - gen->nsids);
}

/*
 * Has every claim of ns in sealed generation gen expired at now (or has it
 * none)?
 */
bool
IdemGenSealedExpired(IdemGeneration *gen, const IdemNamespace *ns, TimestampTz now)
{
	int			i = IdemGenNsIndex(gen, ns);

	return i < 0 || IdemNamespaceExpiry(ns, gen->last_claimed[i]) < now;
}

/*
 * Is every claim of ns in sealed generation gen live at now?  Its oldest
 * claim of ns has not expired.
 */
bool
IdemGenSealedAllLive(IdemGeneration *gen, const IdemNamespace *ns, TimestampTz now)
{
	int			i = IdemGenNsIndex(gen, ns);

	return i >= 0 && IdemNamespaceExpiry(ns, gen->first_claimed[i]) >= now;
}

/*
 * Which of view's stripes (IdemGenStripeView of a hash, for gen's class)
 * holds sealed generation gen in a lane, as of the count the view was
 * taken at: its index in view, or -1 when unsure.  Through gen's stripe
 * lane as this backend last saw it its own, checked again if the stripe
 * changed since.
 */
int
IdemGenLaneView(IdemGeneration *gen, const IdemStripeView *view, int nview)
{
	int			si;
	int			v;

	if (gen->stripe_ref == IDEM_STRIPE_NO_LANE)
	{
		if (gen->slot < 0)
			return -1;
		gen->stripe_ref = IdemGenSlotStripeRef(gen->slot, gen->id);
		gen->stripe_changes = PG_UINT64_MAX;
		if (gen->stripe_ref == IDEM_STRIPE_NO_LANE)
			return -1;
	}
	si = IDEM_STRIPE_REF_STRIPE(gen->stripe_ref);
	for (v = 0; v < nview && view[v].stripe != si; v++)
		;
	if (v == nview)
		return -1;
	if (view[v].changes != gen->stripe_changes)
	{
		/* the stripe changed since: is the lane still gen's? */
		if (!IdemGenStripeOwner(gen->stripe_ref, gen->id, &gen->stripe_changes))
		{
			gen->stripe_ref = IDEM_STRIPE_NO_LANE;
			return -1;
		}
		if (view[v].changes != gen->stripe_changes)
			return -1;
	}
	return v;
}

/* Does sealed generation gen hold claims of ns, live or expired? */
bool
IdemGenSealedHolds(const IdemGeneration *gen, const IdemNamespace *ns)
{
	return IdemGenNsIndex(gen, ns) >= 0;
}

/*
 * Might sealed generation gen hold a live claim of ns whose filter hash is
 * fhash?  No if ns is not among its namespaces, if every claim of ns in it
 * has expired, or if its filter says so.  Loads the filter on first use.
 */
bool
IdemGenSealedMayHold(IdemGeneration *gen, const IdemNamespace *ns,
					 TimestampTz now, uint64 fhash)
{
	int			t;

	Assert(gen->state == IDEM_GEN_SEALED);
	if (IdemGenSealedExpired(gen, ns, now))
		return false;
	if (!gen->has_filter || gen->filter_failed)
		return true;
	if (gen->slot < 0)
		gen->slot = IdemGenSlotFind(gen->id, true, false);
	t = IdemGenFilterTest(gen->slot, gen->id, fhash);
	if (t < 0)
	{
		if (gen->slot < 0 || !IdemGenLoadFilter(gen))
		{
			gen->filter_failed = true;
			return true;
		}
		t = IdemGenFilterTest(gen->slot, gen->id, fhash);
	}
	return t != 0;
}

/* Run one statement on the internal tables as their owner; rows processed */
static uint64
IdemGenRun(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls)
{
	return IdemOwnerRun(IdemGetCatalog().claims, 0, sql, nargs, types, values,
						nulls, NULL, NULL);
}

/* A step's row changed under the pass (a concurrent pass, or by hand) */
static void
IdemGenChanged(int32 id)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("generation %d changed during maintenance", id),
			 errhint("The next purge round goes on from its new state.")));
}

/* Read one int8 column of a one-row result */
static void
IdemGenInt8Row(HeapTuple tuple, TupleDesc desc, void *arg)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, 1, &isnull);

	*(int64 *) arg = isnull ? 0 : DatumGetInt64(d);
}

/*
 * Open a new generation of class c, closing old (the open one, or NULL):
 * its table, its row, and its shared slot, fresh, since nobody can have
 * claimed into it yet.  Returns its id.
 */
static int32
IdemGenOpen(int32 c, IdemGeneration *old)
{
	int64		id = 0;
	Oid			types[2] = {INT4OID, INT4OID};
	Datum		values[2];
	char	   *name;

	(void) IdemOwnerRun(IdemGetCatalog().claims, 0,
						"SELECT nextval('idempotency.generation_id_seq')",
						0, NULL, NULL, NULL, IdemGenInt8Row, &id);
	if (id <= 0 || id > PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("generation id %lld is out of range", (long long) id)));
	name = IdemGenRelName((int32) id);
	IdemGenRun(psprintf("CREATE TABLE " IDEM_SCHEMA_NAME ".%s () INHERITS (" IDEM_SCHEMA_NAME ".claims)"
						" WITH (vacuum_truncate = false)", name),
			   0, NULL, NULL, NULL);
	IdemGenRun(psprintf("ALTER TABLE " IDEM_SCHEMA_NAME ".%s ADD CONSTRAINT %s PRIMARY KEY (key, ns)",
						name, quote_identifier(psprintf("%s_pkey", name))),
			   0, NULL, NULL, NULL);
	/* the namespace policies (1.1), since the table can be named directly */
	if (OidIsValid(IdemNamespaceGrantsRelation()))
		IdemGenRun(psprintf("SELECT idempotency.idem_claims_policies('" IDEM_SCHEMA_NAME ".%s')",
							name),
				   0, NULL, NULL, NULL);
	if (old != NULL)
	{
		values[0] = Int32GetDatum(old->id);
		if (IdemGenRun("UPDATE idempotency.generations SET state = 'closed', closed_at = now()"
					   " WHERE id = $1 AND state = 'open'",
					   1, types, values, NULL) != 1)
			IdemGenChanged(old->id);
	}
	values[0] = Int32GetDatum((int32) id);
	values[1] = Int32GetDatum(c);
	/* counted first: a claimer that sees the count move reads the map again */
	IdemGenOpensBump();
	(void) IdemGenSlotFind((int32) id, true, true);
	IdemGenRun("INSERT INTO idempotency.generations (id, ttl_class, state) VALUES ($1, $2, 'open')",
			   2, types, values, NULL);
	return (int32) id;
}

/* Close an open generation without a successor: its class has no namespace */
static void
IdemGenClose(IdemGeneration *gen)
{
	Oid			type = INT4OID;
	Datum		value = Int32GetDatum(gen->id);

	if (IdemGenRun("UPDATE idempotency.generations SET state = 'closed', closed_at = now()"
				   " WHERE id = $1 AND state = 'open'",
				   1, &type, &value, NULL) != 1)
		IdemGenChanged(gen->id);
}

/* Per namespace, the newest claimed_at a seal found */
typedef struct IdemGenNsEntry
{
	int32		nsid;
	TimestampTz last;
	TimestampTz first;
} IdemGenNsEntry;

/* qsort comparator of IdemGenNsEntry by namespace id */
static int
IdemGenNsEntryCmp(const void *a, const void *b)
{
	return IdemInt32Compare(&((const IdemGenNsEntry *) a)->nsid,
						&((const IdemGenNsEntry *) b)->nsid);
}

/* Do finer filters get built (by seals and refinements) here and now? */
static inline bool
IdemGenFineFilters(void)
{
	return idem_filter_memory_bits_per_claim > idem_filter_bits_per_claim &&
		!idem_debug_legacy_filters && IdemGenFiltersShared();
}

/*
 * Add every tuple of a generation's table, dead or alive, to filter (and
 * to also, if not NULL): the scan behind a seal's filters and a
 * refinement's
 */
static void
IdemGenFilterScan(Relation rel, AttrNumber att_ns, AttrNumber att_key,
				  IdemFilter *filter, IdemFilter *also)
{
	TableScanDesc scan = IdemTableBeginScan(rel, SnapshotAny, 0, NULL);
	HeapTuple	tuple;

	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		bool		isnull;
		int32		nsid = DatumGetInt32(heap_getattr(tuple, att_ns, RelationGetDescr(rel), &isnull));
		Datum		keyd = heap_getattr(tuple, att_key, RelationGetDescr(rel), &isnull);
		bytea	   *key = DatumGetByteaPP(keyd);
		uint64		fhash = IdemFilterHash(nsid, key);

		CHECK_FOR_INTERRUPTS();
		IdemFilterAdd(filter, fhash);
		if (also != NULL)
			IdemFilterAdd(also, fhash);
		if ((Pointer) key != DatumGetPointer(keyd))
			pfree(key);
	}
	table_endscan(scan);
}

/*
 * Seal a closed generation: if no claimer holds it (a SHARE lock taken
 * without waiting, kept to the end of the transaction), read every tuple,
 * dead or alive, twice: once for its namespaces and their newest claims,
 * once for the filter.  Returns false if claimers are still in it.
 */
static bool
IdemGenSeal(IdemGeneration *gen)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tuple;
	AttrNumber	att_ns;
	AttrNumber	att_key;
	AttrNumber	att_at;
	HTAB	   *nshash;
	HASHCTL		ctl;
	HASH_SEQ_STATUS seq;
	IdemGenNsEntry *e;
	IdemGenNsEntry *sorted;
	IdemFilter	filter;
	IdemGenPendingFilter *fine = NULL;
	int64		n = 0;
	int			nns;
	int			i;
	Datum	   *nsd;
	Datum	   *lastd;
	Datum	   *firstd;
	bytea	   *bits;
	Size		len;
	Oid			types[7] = {INT4OID, INT8OID, INT4ARRAYOID, TIMESTAMPTZARRAYOID, BYTEAOID, INT4OID,
	TIMESTAMPTZARRAYOID};
	Datum		values[7];

	if (!OidIsValid(gen->relid) || !ConditionalLockRelationOid(gen->relid, ShareLock))
		return false;
	rel = table_open(gen->relid, NoLock);
	att_ns = get_attnum(gen->relid, "ns");
	att_key = get_attnum(gen->relid, "key");
	att_at = get_attnum(gen->relid, "claimed_at");
	if (att_ns == InvalidAttrNumber || att_key == InvalidAttrNumber ||
		att_at == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("generation table %s lacks a claims column", RelationGetRelationName(rel))));

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(int32);
	ctl.entrysize = sizeof(IdemGenNsEntry);
	ctl.hcxt = CurrentMemoryContext;
	nshash = hash_create("idempotency seal namespaces", 64, &ctl,
						 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	scan = IdemTableBeginScan(rel, SnapshotAny, 0, NULL);
	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		bool		isnull;
		bool		found;
		int32		nsid = DatumGetInt32(heap_getattr(tuple, att_ns, RelationGetDescr(rel), &isnull));
		TimestampTz at = DatumGetTimestampTz(heap_getattr(tuple, att_at, RelationGetDescr(rel), &isnull));

		CHECK_FOR_INTERRUPTS();
		e = hash_search(nshash, &nsid, HASH_ENTER, &found);
		if (!found || at > e->last)
			e->last = at;
		if (!found || at < e->first)
			e->first = at;
		n++;
	}
	table_endscan(scan);

	IdemFilterInit(&filter, (uint64) n, idem_filter_bits_per_claim);
	if (IdemGenFineFilters())
		fine = IdemGenPendingAdd(gen->id, gen->ttl_class, (uint64) n);
	IdemGenFilterScan(rel, att_ns, att_key, &filter, fine != NULL ? &fine->filter : NULL);
	table_close(rel, NoLock);

	nns = (int) hash_get_num_entries(nshash);
	sorted = palloc(sizeof(IdemGenNsEntry) * Max(nns, 1));
	i = 0;
	hash_seq_init(&seq, nshash);
	while ((e = hash_seq_search(&seq)) != NULL)
		sorted[i++] = *e;
	qsort(sorted, nns, sizeof(IdemGenNsEntry), IdemGenNsEntryCmp);
	nsd = palloc(sizeof(Datum) * Max(nns, 1));
	lastd = palloc(sizeof(Datum) * Max(nns, 1));
	firstd = palloc(sizeof(Datum) * Max(nns, 1));
	for (i = 0; i < nns; i++)
	{
		nsd[i] = Int32GetDatum(sorted[i].nsid);
		lastd[i] = TimestampTzGetDatum(sorted[i].last);
		firstd[i] = TimestampTzGetDatum(sorted[i].first);
	}
	hash_destroy(nshash);

	len = (Size) filter.nblocks * IDEM_FILTER_BLOCK_BYTES;
	bits = palloc_extended(len + VARHDRSZ, MCXT_ALLOC_HUGE);
	SET_VARSIZE(bits, len + VARHDRSZ);
	memcpy(VARDATA(bits), filter.bits, len);

	values[0] = Int32GetDatum(gen->id);
	values[1] = Int64GetDatum(n);
	values[2] = PointerGetDatum(construct_array(nsd, nns, INT4OID, 4, true, TYPALIGN_INT));
	values[3] = PointerGetDatum(construct_array(lastd, nns, TIMESTAMPTZOID, 8,
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[4] = PointerGetDatum(bits);
	values[5] = Int32GetDatum(filter.nhashes);
	values[6] = PointerGetDatum(construct_array(firstd, nns, TIMESTAMPTZOID, 8,
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	if (IdemGenRun("UPDATE idempotency.generations SET state = 'sealed', sealed_at = now(),"
				   " claims = $2, namespaces = $3, last_claimed = $4, filter = $5, filter_hashes = $6,"
				   " first_claimed = $7 WHERE id = $1 AND state = 'closed'",
				   7, types, values, NULL) != 1)
		IdemGenChanged(gen->id);

	/*
	 * The stored filter goes into shared memory only from the committed
	 * row, when a claimer first needs it, and the finer one when this
	 * transaction commits: it may still roll back.
	 */
	pfree(filter.bits);
	pfree(bits);
	return true;
}

/*
 * Add a reason a pass held back to done->why, in the pass's memory context:
 * "; " between reasons, and only the first few, so that a store damaged
 * all over still gets one short line
 */
static void IdemGenHold(IdemGenMaintenance *done, const char *fmt,...) pg_attribute_printf(2, 3);

static void
IdemGenHold(IdemGenMaintenance *done, const char *fmt,...)
{
	StringInfoData buf;
	va_list		args;

	done->held++;
	if (done->held > 4)
	{
		if (done->held == 5)
			done->why = psprintf("%s; and more", done->why);
		return;
	}
	initStringInfo(&buf);
	if (done->why != NULL)
		appendStringInfo(&buf, "%s; ", done->why);
	for (;;)
	{
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&buf, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&buf, needed);
	}
	done->why = buf.data;
}

/*
 * Does table relid have a valid unique index claims can probe: a btree on
 * the two columns key and ns, in either order, with their default operator
 * classes, no expression or predicate (the rule of claimrel.c's
 * IdemIndexOnClaimKey, which claimers apply), as every generation table
 * gets at its opening and a restore gives back in its post-data step?
 * Read from the catalogs, without locking the table.  The families of the
 * two default operator classes come from the caller, looked up once a pass:
 * GetDefaultOpClass scans pg_opclass, and a store holds many generations.
 */
/*
 * The attribute numbers of columns key and ns of relid, in one scan of
 * pg_attribute (a cold backend would pay two catalog cache misses).
 */
static void
IdemGenKeyAtts(Oid relid, AttrNumber *att_key, AttrNumber *att_ns)
{
	Relation	pg_attribute;
	SysScanDesc scan;
	ScanKeyData key[2];
	HeapTuple	tuple;

	*att_key = *att_ns = InvalidAttrNumber;
	ScanKeyInit(&key[0], Anum_pg_attribute_attrelid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	ScanKeyInit(&key[1], Anum_pg_attribute_attnum, BTGreaterStrategyNumber, F_INT2GT,
				Int16GetDatum(0));
	pg_attribute = table_open(AttributeRelationId, AccessShareLock);
	scan = systable_beginscan(pg_attribute, AttributeRelidNumIndexId, true, NULL, 2, key);
	while ((*att_key == InvalidAttrNumber || *att_ns == InvalidAttrNumber) &&
		   HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_attribute att = (Form_pg_attribute) GETSTRUCT(tuple);

		if (att->attisdropped)
			continue;
		if (strcmp(NameStr(att->attname), "key") == 0)
			*att_key = att->attnum;
		else if (strcmp(NameStr(att->attname), "ns") == 0)
			*att_ns = att->attnum;
	}
	systable_endscan(scan);
	table_close(pg_attribute, AccessShareLock);
}

static bool
IdemGenHasKeyIndex(Oid relid, Oid key_family, Oid ns_family)
{
	AttrNumber	att_key;
	AttrNumber	att_ns;
	Relation	pg_index;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	bool		found = false;

	IdemGenKeyAtts(relid, &att_key, &att_ns);
	if (att_key == InvalidAttrNumber || att_ns == InvalidAttrNumber)
		return false;
	ScanKeyInit(&key, Anum_pg_index_indrelid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	pg_index = table_open(IndexRelationId, AccessShareLock);
	scan = systable_beginscan(pg_index, IndexIndrelidIndexId, true, NULL, 1, &key);
	while (!found && HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_index index = (Form_pg_index) GETSTRUCT(tuple);
		bool		isnull;
		Datum		d;
		oidvector  *opclasses;
		int			c;

		if (!index->indisunique || !index->indisvalid || !index->indisready ||
			!index->indislive || !index->indimmediate || index->indnkeyatts != 2 ||
			!heap_attisnull(tuple, Anum_pg_index_indexprs, NULL) ||
			!heap_attisnull(tuple, Anum_pg_index_indpred, NULL))
			continue;
		d = heap_getattr(tuple, Anum_pg_index_indclass, RelationGetDescr(pg_index), &isnull);
		if (isnull)
			continue;
		opclasses = (oidvector *) DatumGetPointer(d);

		/*
		 * Operator families belong to one access method, so opclasses of the
		 * two btree families make it a btree: no lookup of the index's
		 * pg_class row (a catalog read per generation in a new backend).
		 */
		found = true;
		for (c = 0; c < 2 && found; c++)
		{
			AttrNumber	att = index->indkey.values[c];
			Oid			family = att == att_key ? key_family : att == att_ns ? ns_family : InvalidOid;

			found = OidIsValid(family) &&
				get_opclass_family(opclasses->values[c]) == family;
		}
		found = found && index->indkey.values[0] != index->indkey.values[1];
	}
	systable_endscan(scan);
	table_close(pg_index, AccessShareLock);
	return found;
}

/* The generation_id_seq's state, for IdemGenStoreIncomplete */
typedef struct IdemGenSeqState
{
	int64		last_value;
	bool		is_called;
} IdemGenSeqState;

static void
IdemGenSeqRow(HeapTuple tuple, TupleDesc desc, void *arg)
{
	IdemGenSeqState *seq = arg;
	bool		isnull;

	seq->last_value = DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull));
	seq->is_called = DatumGetBool(SPI_getbinval(tuple, desc, 2, &isnull));
}

/* The namespace policies idem_claims_policies() puts on a claims table */
static const char *const IdemGenPolicyNames[] = {
	"claims_namespace_check", "claims_namespace_claim",
	"claims_namespace_release", "claims_namespace_update"
};

/*
 * The first generation whose table lacks a namespace policy that
 * idempotency.claims has (a switch gives each new table all of them), or
 * NULL.  A serial pg_restore creates every index before any policy, so a
 * generation restored up to its index looks whole without this test, and a
 * drop then fails the restore's CREATE POLICY.  One scan of pg_policy,
 * a small catalog, whatever the number of generations.
 */
static const IdemGeneration *
IdemGenMissingPolicy(const IdemGeneration *gens, int ngens, Oid claims)
{
	uint8	   *masks = palloc0(sizeof(uint8) * Max(ngens, 1));
	uint8		parent = 0;
	Relation	pg_policy;
	SysScanDesc scan;
	HeapTuple	tuple;
	const IdemGeneration *missing = NULL;
	int			i;

	pg_policy = table_open(PolicyRelationId, AccessShareLock);
	scan = systable_beginscan(pg_policy, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_policy pol = (Form_pg_policy) GETSTRUCT(tuple);
		size_t		bit;

		for (bit = 0; bit < lengthof(IdemGenPolicyNames); bit++)
			if (strcmp(NameStr(pol->polname), IdemGenPolicyNames[bit]) == 0)
				break;
		if (bit == lengthof(IdemGenPolicyNames))
			continue;
		if (pol->polrelid == claims)
			parent |= 1 << bit;
		else
			for (i = 0; i < ngens; i++)
				if (gens[i].relid == pol->polrelid)
					masks[i] |= 1 << bit;
	}
	systable_endscan(scan);
	table_close(pg_policy, AccessShareLock);
	for (i = 0; i < ngens && missing == NULL; i++)
		if (OidIsValid(gens[i].relid) && (masks[i] & parent) != parent)
			missing = &gens[i];
	pfree(masks);
	return missing;
}

/* Read one bool column of a one-row result */
static void
IdemGenBoolRow(HeapTuple tuple, TupleDesc desc, void *arg)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, 1, &isnull);

	*(bool *) arg = !isnull && DatumGetBool(d);
}

/*
 * Is a session of another backend that names itself appname (pg_restore
 * and pg_dump do, in application_name) connected to this database?
 */
static bool
IdemGenClientConnected(Oid claims, const char *appname)
{
	bool		connected = false;
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];

	/*
	 * The sessions as they are now: a transaction keeps its first read of
	 * them to its end, and the pass may have read them long ago
	 */
	pgstat_clear_snapshot();
	values[0] = CStringGetTextDatum(appname);
	(void) IdemOwnerRun(claims, IDEM_RUN_READ_ONLY | IDEM_RUN_LATEST,
						"SELECT EXISTS (SELECT FROM pg_catalog.pg_stat_activity"
						" WHERE datname = pg_catalog.current_database()"
						" AND application_name = $1"
						" AND pid <> pg_catalog.pg_backend_pid())",
						1, argtypes, values, NULL, IdemGenBoolRow, &connected);
	return connected;
}

/*
 * Is the store of this database incomplete, so that no switch, seal or drop
 * may run?  Each test is a state that a restore passes through (pg_restore
 * -j loads the generations' rows and tables before the namespaces, and
 * adds their primary keys last) and a running store never shows:
 *
 *	 - a generation table, idempotency.claims_g<N> inheriting from
 *	   idempotency.claims, without its row in idempotency.generations;
 *	 - a generation table without its unique index on (key, ns), or
 *	   without a namespace policy that idempotency.claims has;
 *	 - a pg_restore connected to this database (application_name
 *	   pg_restore, as it names itself): what it restores last, the grants
 *	   and comments, may name a generation table, and a dropped one would
 *	   fail it;
 *	 - generations without a single namespace;
 *	 - the generation id sequence behind the highest id (the next switch
 *	   would take the name of a table being restored);
 *	 - the extension being created, or a binary upgrade.
 *
 * Says why in done.
 */
static bool
IdemGenStoreIncomplete(const IdemGeneration *gens, int ngens, int nns,
					   IdemGenMaintenance *done)
{
	IdemCatalog cat = IdemGetCatalog();
	List	   *children;
	ListCell   *lc;
	int32		maxid = 0;
	IdemGenSeqState seq = {0, false};
	Oid			key_family = InvalidOid;
	Oid			ns_family = InvalidOid;
	int			i;

	if (creating_extension || IsBinaryUpgrade)
	{
		IdemGenHold(done, "the extension is being created or upgraded");
		return true;
	}
	if (ngens > 0)
	{
		key_family = get_opclass_family(GetDefaultOpClass(BYTEAOID, BTREE_AM_OID));
		ns_family = get_opclass_family(GetDefaultOpClass(INT4OID, BTREE_AM_OID));
	}
	for (i = 0; i < ngens; i++)
	{
		maxid = Max(maxid, gens[i].id);
		if (OidIsValid(gens[i].relid) &&
			!IdemGenHasKeyIndex(gens[i].relid, key_family, ns_family))
		{
			IdemGenHold(done, "table %s.%s has no valid unique index on (key, ns)",
						IDEM_SCHEMA_NAME, IdemGenRelName(gens[i].id));
			return true;
		}
	}
	if (ngens > 0)
	{
		const IdemGeneration *gen = IdemGenMissingPolicy(gens, ngens, cat.claims);

		if (gen != NULL)
		{
			IdemGenHold(done, "table %s.%s lacks a namespace policy that %s.claims has",
						IDEM_SCHEMA_NAME, IdemGenRelName(gen->id), IDEM_SCHEMA_NAME);
			return true;
		}
	}
	children = find_inheritance_children(cat.claims, NoLock);
	foreach(lc, children)
	{
		Oid			child = lfirst_oid(lc);
		char	   *name;
		int32		id;
		char		tail;

		/* a generation's own table, found by its name when gens was read */
		for (i = 0; i < ngens && gens[i].relid != child; i++)
			;
		if (i < ngens)
			continue;
		name = get_rel_name(child);
		if (name == NULL || get_rel_namespace(child) != cat.schema ||
			sscanf(name, "claims_g%d%c", &id, &tail) != 1)
			continue;			/* not a generation's name: not ours */
		for (i = 0; i < ngens && gens[i].id != id; i++)
			;
		if (i == ngens)
		{
			IdemGenHold(done, "table %s.%s has no row in %s.generations",
						IDEM_SCHEMA_NAME, quote_identifier(name), IDEM_SCHEMA_NAME);
			return true;
		}
	}
	list_free(children);
	if (ngens > 0 && nns == 0)
	{
		IdemGenHold(done, "%s.namespaces is empty", IDEM_SCHEMA_NAME);
		return true;
	}
	if (ngens > 0 && IdemGenClientConnected(cat.claims, "pg_restore"))
	{
		IdemGenHold(done, "a pg_restore is connected to database \"%s\"",
					get_database_name(MyDatabaseId));
		return true;
	}
	(void) IdemOwnerRun(cat.claims, IDEM_RUN_READ_ONLY | IDEM_RUN_LATEST,
						"SELECT last_value, is_called FROM idempotency.generation_id_seq",
						0, NULL, NULL, NULL, IdemGenSeqRow, &seq);
	if (seq.is_called ? seq.last_value < maxid : seq.last_value <= maxid)
	{
		IdemGenHold(done, "%s.generation_id_seq is behind generation %d",
					IDEM_SCHEMA_NAME, maxid);
		return true;
	}
	return false;
}

/*
 * Has every claim of sealed generation gen expired, as its own data shows:
 * the newest claim of each namespace it holds, as the seal recorded it,
 * plus that namespace's TTL as it now stands (a TTL made longer keeps it)?
 * A namespace that cannot be found, or a row that does not add up, proves
 * nothing: the generation is held, and the pass says why.
 */
static bool
IdemGenExpired(const IdemGeneration *gen, const IdemNamespace *nss, int nns,
			   TimestampTz now, IdemGenMaintenance *done)
{
	int			i;

	if (gen->inconsistent)
	{
		IdemGenHold(done, "generation %d kept: its recorded namespaces and claims do not match",
					gen->id);
		return false;
	}
	for (i = 0; i < gen->nns; i++)
	{
		const IdemNamespace *ns = IdemNamespaceFindById(nss, nns, gen->nsids[i]);

		if (ns == NULL)
		{
			IdemGenHold(done, "generation %d kept: its namespace %d is not defined",
						gen->id, gen->nsids[i]);
			return false;
		}
		if (IdemNamespaceExpiry(ns, gen->last_claimed[i]) >= now)
			return false;
	}
	return true;
}

/*
 * Drop an expired sealed generation, if nobody is reading it: its row and
 * its table in one transaction.  Returns false if it is in use.
 */
static bool
IdemGenDrop(IdemGeneration *gen, int64 *claims, bool wait)
{
	Oid			type = INT4OID;
	Datum		value = Int32GetDatum(gen->id);
	IdemGenDropped *d;
	MemoryContext old;

	Assert(OidIsValid(gen->relid));

	/*
	 * Claimers do not read an expired generation, so waiting for its lock
	 * (under the caller's lock_timeout) stalls only readers of
	 * idempotency.claims as a whole; the worker never waits.
	 */
	if (wait)
		LockRelationOid(gen->relid, AccessExclusiveLock);
	else if (!ConditionalLockRelationOid(gen->relid, AccessExclusiveLock))
		return false;
	/* the table under our lock is still the generation's */
	if (get_relname_relid(IdemGenRelName(gen->id), IdemGetCatalog().schema) != gen->relid)
		IdemGenChanged(gen->id);
	*claims = 0;
	if (IdemOwnerRun(IdemGetCatalog().claims, 0,
					 "DELETE FROM idempotency.generations WHERE id = $1 AND state = 'sealed'"
					 " RETURNING coalesce(claims, 0)",
					 1, &type, &value, NULL, IdemGenInt8Row, claims) != 1)
		IdemGenChanged(gen->id);
	IdemGenRun(psprintf("DROP TABLE " IDEM_SCHEMA_NAME ".%s", IdemGenRelName(gen->id)),
			   0, NULL, NULL, NULL);
	old = MemoryContextSwitchTo(TopMemoryContext);
	d = palloc(sizeof(IdemGenDropped));
	d->gen_id = gen->id;
	d->subid = GetCurrentSubTransactionId();
	idem_gen_dropped = lappend(idem_gen_dropped, d);
	MemoryContextSwitchTo(old);
	return true;
}

/*
 * Empty the announcement bitmap of idempotency.claims if the table's
 * unique index holds no entry at all, dead or alive, while nobody can be
 * writing it: a SHARE lock, taken without waiting and kept to the end of
 * the transaction.  Every writer that comes after announces again.  So
 * claims of namespaces with generations skip the table once it is empty.
 */
static void
IdemGenRootSweep(void)
{
	Oid			relid = IdemGetCatalog().claims;
	Relation	heap;
	List	   *indexes;
	ListCell   *lc;
	bool		empty = false;

	if (!ConditionalLockRelationOid(relid, ShareLock))
		return;
	heap = table_open(relid, NoLock);
	indexes = RelationGetIndexList(heap);
	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), AccessShareLock);

		if (index->rd_index->indisunique && index->rd_index->indisvalid &&
			index->rd_rel->relam == BTREE_AM_OID)
		{
			IndexScanDesc scan = IdemIndexBeginScan(heap, index, SnapshotAny, 0, 0);

			index_rescan(scan, NULL, 0, NULL, 0);
			empty = index_getnext_tid(scan, ForwardScanDirection) == NULL;
			index_endscan(scan);
			index_close(index, NoLock);
			break;
		}
		index_close(index, NoLock);
	}
	list_free(indexes);
	table_close(heap, NoLock);
	if (empty)
		IdemGenRootClear();
	/* the clearing is not transactional: writers may go on at once */
	UnlockRelationOid(relid, ShareLock);
}

/*
 * Has open generation g reached idempotency.generation_max_claims?  By the
 * claims counted in shared memory (this backend's own included) or, after
 * a restart, by its pg_class.reltuples.
 */
static bool
IdemGenOverSize(IdemGeneration *g)
{
	uint64		claims;
	HeapTuple	tuple;

	if (idem_generation_max_claims <= 0)
		return false;
	IdemGenCountFlushPending();
	claims = IdemGenSlotClaims(IdemGenSlotFind(g->id, false, false), g->id);
	if (claims >= (uint64) idem_generation_max_claims)
		return true;
	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(g->relid));
	if (HeapTupleIsValid(tuple))
	{
		float4		reltuples = ((Form_pg_class) GETSTRUCT(tuple))->reltuples;

		ReleaseSysCache(tuple);
		if (reltuples >= (float4) idem_generation_max_claims)
			return true;
	}
	return false;
}

/*
 * Might a refinement find work, by shared memory alone?  A worker round
 * asks before it starts a transaction for one.
 */
bool
IdemGenRefineWanted(void)
{
	return IdemGenFineFilters() && IdemGenAnyWantsFine();
}

/*
 * Refine the filter of one sealed generation whose slot holds a stored
 * filter that claimers loaded (after a restart, say): a finer one from a
 * scan of its table, every tuple as the seal read them, sized by the
 * seal's count (more tuples, from updates, only add false positives),
 * loaded in its place when this transaction commits.  A sealed generation
 * takes no claims, so the scan finds what the seal found, less what
 * VACUUM removed (claims no longer live).  A generation being dropped is
 * skipped, not waited for.  Returns false if none was left to refine.
 */
bool
IdemGenRefineFilter(void)
{
	IdemGeneration *gens;
	int			ngens;
	int			i;

	if (!IdemGenRefineWanted())
		return false;
	gens = IdemGenLoad(CurrentMemoryContext, &ngens);
	for (i = 0; i < ngens; i++)
	{
		IdemGeneration *g = &gens[i];
		int			slot;
		Relation	rel;
		AttrNumber	att_ns;
		AttrNumber	att_key;

		if (g->state != IDEM_GEN_SEALED || !g->has_filter || g->claims < 0 ||
			!OidIsValid(g->relid))
			continue;
		/* only stored filters that claimers loaded, where a finer one may fit */
		slot = IdemGenSlotFind(g->id, false, false);
		if (slot < 0 || !IdemGenFilterWantsFine(slot, g->id))
			continue;
		if (!ConditionalLockRelationOid(g->relid, AccessShareLock))
			continue;
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(g->relid)))
		{
			UnlockRelationOid(g->relid, AccessShareLock);
			continue;
		}
		rel = table_open(g->relid, NoLock);
		att_ns = get_attnum(g->relid, "ns");
		att_key = get_attnum(g->relid, "key");
		if (att_ns == InvalidAttrNumber || att_key == InvalidAttrNumber)
		{
			table_close(rel, NoLock);
			continue;
		}
		IdemGenFilterScan(rel, att_ns, att_key,
						  &IdemGenPendingAdd(g->id, g->ttl_class, (uint64) g->claims)->filter, NULL);
		table_close(rel, NoLock);
		return true;
	}
	return false;
}

/* Advisory lock field4 that serialises maintenance passes */
#define IDEM_GEN_LOCK_FIELD4	480

/*
 * Wait until no maintenance pass is in flight: one that opens a generation
 * has ended, its invalidations sent, when it lets go of the pass's lock.
 * For a claimer that finds no table for an open generation (claimstore.c).
 */
void
IdemGenMaintenanceWait(void)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, 0, 0, IDEM_GEN_LOCK_FIELD4);
	(void) LockAcquire(&tag, ShareLock, false, false);
	LockRelease(&tag, ShareLock, false);
}

/*
 * Has open generation g lost its table (a DROP TABLE by hand)?  Then the
 * pass replaces it, whatever its age: its claimers fail until it does.
 */
static bool
IdemGenTableGone(const IdemGeneration *g)
{
	return !OidIsValid(g->relid);
}

/*
 * The step a maintenance pass is at ("opening ..."), for the context of its
 * errors and for the worker's log line after the pass rolled back; empty
 * outside a pass.  Static, so that it outlives the transaction's abort.
 */
static char idem_gen_step[160];

static void IdemGenStep(const char *fmt,...) pg_attribute_printf(1, 2);

static void
IdemGenStep(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(idem_gen_step, sizeof(idem_gen_step), fmt, ap);
	va_end(ap);
}

/* Error context callback of a maintenance pass */
static void
IdemGenStepContext(void *arg pg_attribute_unused())
{
	if (idem_gen_step[0] != '\0')
		errcontext("while %s", idem_gen_step);
}

/*
 * The step the last maintenance pass failed at, or NULL: read in the
 * PG_CATCH of a pass (or after its abort), it says what the pass was doing
 */
const char *
IdemGenMaintainStep(void)
{
	return idem_gen_step[0] != '\0' ? idem_gen_step : NULL;
}

/*
 * Drop the sealed generations whose claims have all expired, unless a
 * pg_dump is connected to the database: it reads the list of tables, then
 * locks each, and a table dropped in between fails the whole dump.  Asked
 * just before the drops and again after them (a backlog's drops take a
 * while, and the manual pass waits for their locks), in a subtransaction
 * that a pg_dump found the second time rolls back.  What is left is a dump
 * whose session starts and lists the tables between the second test and
 * the commit, as with any DROP TABLE.
 */
static void
IdemGenDropExpired(IdemGeneration *gens, int ngens, const IdemNamespace *nss,
				   int nns, TimestampTz now, bool wait, IdemGenMaintenance *done)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	Oid			claims = IdemGetCatalog().claims;
	int		   *expired = palloc(sizeof(int) * Max(ngens, 1));
	int			nexpired = 0;
	int			dropped = 0;
	int64		claims_dropped = 0;
	int			skipped = 0;
	int			i;

	for (i = 0; i < ngens; i++)
	{
		if (gens[i].state != IDEM_GEN_SEALED ||
			!IdemGenExpired(&gens[i], nss, nns, now, done))
			continue;
		if (!OidIsValid(gens[i].relid))
		{
			/* its claims went with the table: nothing of ours proves more */
			IdemGenHold(done, "generation %d kept: table %s.%s is missing",
						gens[i].id, IDEM_SCHEMA_NAME, IdemGenRelName(gens[i].id));
			continue;
		}
		expired[nexpired++] = i;
	}
	if (nexpired == 0)
		return;
	if (IdemGenClientConnected(claims, "pg_dump"))
	{
		IdemGenHold(done, "a pg_dump is connected to database \"%s\": expired generations are dropped when it ends",
					get_database_name(MyDatabaseId));
		return;
	}

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		for (i = 0; i < nexpired; i++)
		{
			IdemGeneration *g = &gens[expired[i]];
			int64		n = 0;

			IdemGenStep("dropping generation %d", g->id);
			if (IdemGenDrop(g, &n, wait))
			{
				dropped++;
				claims_dropped += n;
			}
			else
			{
				skipped++;
				expired[i] = -1;	/* not dropped */
			}
		}
	}
	PG_CATCH();
	{
		ReThrowError(IdemSubxactCaught(cxt, owner));
	}
	PG_END_TRY();

	if (dropped > 0 && IdemGenClientConnected(claims, "pg_dump"))
	{
		IdemSubxactEnd(false, cxt, owner);
		IdemGenHold(done, "a pg_dump connected to database \"%s\" while expired generations were dropped: the drops are undone, and done when it ends",
					get_database_name(MyDatabaseId));
		done->skipped += skipped;
		return;
	}
	IdemSubxactEnd(true, cxt, owner);
	for (i = 0; i < nexpired; i++)
		if (expired[i] >= 0)
			gens[expired[i]].id = 0;	/* gone */
	done->dropped += dropped;
	done->claims_dropped += claims_dropped;
	done->skipped += skipped;
}

/*
 * One maintenance pass, in the caller's transaction: open generations for
 * the TTL classes in use, switch those older than their span (and class
 * force_class whatever its age: IDEM_GEN_ALL_CLASSES for all of them, -1
 * for none), seal the
 * closed ones nobody inserts into any more, and drop the sealed ones whose
 * claims have all expired.  Waits for no lock but, with wait, a drop's (for
 * idem_purge(): what the worker would drop is gone when it returns), and
 * the lock on idempotency.claims that creating a generation's table takes
 * (under the caller's lock_timeout); a step that would wait is left to the
 * next pass.  A concurrent pass makes this one do nothing.  Its errors
 * say which step failed (IdemGenMaintainStep).
 */
void
IdemGenMaintain(int32 force_class, bool wait, IdemGenMaintenance *done)
{
	LOCKTAG		tag;
	IdemNamespace *nss;
	int			nns;
	IdemGeneration *gens;
	int			ngens;
	int32	   *live;
	int			nlive = 0;
	TimestampTz now = GetCurrentTimestamp();
	int32	   *classes;
	int			nclasses = 0;
	int			i;
	int			j;
	ErrorContextCallback errcallback;

	memset(done, 0, sizeof(*done));
	idem_gen_step[0] = '\0';
	if (IsolationUsesXactSnapshot())
	{
		/* it reads the latest state, and could not write it under an old snapshot */
		done->skipped++;
		return;
	}
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, 0, 0, IDEM_GEN_LOCK_FIELD4);
	/* with wait (idem_purge() and the like), behind a pass in flight */
	if (LockAcquire(&tag, ExclusiveLock, false, !wait) == LOCKACQUIRE_NOT_AVAIL)
	{
		done->skipped++;
		return;
	}
	/* a pass waited for may have made tables: see them */
	AcceptInvalidationMessages();

	errcallback.callback = IdemGenStepContext;
	errcallback.arg = NULL;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	IdemGenStep("reading the generations");
	nss = IdemNamespaceLoadAll(&nns);
	gens = IdemGenLoad(CurrentMemoryContext, &ngens);
	if (IdemGenStoreIncomplete(gens, ngens, nns, done))
	{
		done->incomplete = true;
		error_context_stack = errcallback.previous;
		idem_gen_step[0] = '\0';
		return;
	}
	/* the generations live after the pass, for the slot sweep */
	live = palloc(sizeof(int32) * (2 * ngens + nns + 1));	/* at most one open per class and per switch */

	/* the classes that get generations */
	classes = palloc(sizeof(int32) * Max(nns, 1));
	for (i = 0; i < nns; i++)
	{
		int32		c;

		if (IdemTtlSeconds(&nss[i].ttl) < idem_generation_min_ttl)
			continue;
		c = IdemTtlClass(&nss[i].ttl);
		for (j = 0; j < nclasses && classes[j] != c; j++)
			;
		if (j == nclasses)
			classes[nclasses++] = c;
	}

	/* open, switch or close */
	for (j = 0; j < nclasses; j++)
	{
		IdemGeneration *open = NULL;

		for (i = 0; i < ngens; i++)
			if (gens[i].state == IDEM_GEN_OPEN && gens[i].ttl_class == classes[j])
				open = &gens[i];
		if (open == NULL)
		{
			IdemGenStep("opening the first generation of TTL class %d, a table inheriting from idempotency.claims",
						classes[j]);
			live[nlive++] = IdemGenOpen(classes[j], NULL);
			done->opened++;
		}
	}
	for (i = 0; i < ngens; i++)
	{
		IdemGeneration *g = &gens[i];
		double		span;
		bool		in_use = false;

		if (g->state != IDEM_GEN_OPEN)
			continue;
		for (j = 0; j < nclasses; j++)
			in_use |= (classes[j] == g->ttl_class);
		span = ldexp(1.0, g->ttl_class) / idem_generations_per_ttl;
		/*
		 * Switched: when asked to, at the end of its span, at the size
		 * bound, and when its namespaces are unknown (its bitmap, made
		 * after a restart, says "may hold" to every claim of every other
		 * class, which then probes it: the next one will know), and when
		 * its table is gone
		 */
		if (force_class != IDEM_GEN_ALL_CLASSES && force_class != g->ttl_class &&
			now < g->opened_at + (TimestampTz) (Max(span, 1.0) * USECS_PER_SEC) &&
			!IdemGenOverSize(g) && !IdemGenNsUnknown(g->id) && !IdemGenTableGone(g))
			continue;
		if (in_use)
		{
			IdemGenStep("switching TTL class %d from generation %d to a new one, a table inheriting from idempotency.claims",
						g->ttl_class, g->id);
			live[nlive++] = IdemGenOpen(g->ttl_class, g);
			done->opened++;
		}
		else
		{
			IdemGenStep("closing generation %d", g->id);
			IdemGenClose(g);
		}
		g->state = IDEM_GEN_CLOSED;
	}

	/* seal: a generation closed above has its claimers in flight still */
	for (i = 0; i < ngens; i++)
	{
		if (gens[i].state != IDEM_GEN_CLOSED)
			continue;
		if (!OidIsValid(gens[i].relid))
		{
			IdemGenHold(done, "generation %d kept unsealed: table %s.%s is missing",
						gens[i].id, IDEM_SCHEMA_NAME, IdemGenRelName(gens[i].id));
			continue;
		}
		IdemGenStep("sealing generation %d", gens[i].id);
		if (IdemGenSeal(&gens[i]))
			done->sealed++;
		else
		{
			done->skipped++;
			done->seal_skipped++;
		}
	}

	IdemGenDropExpired(gens, ngens, nss, nns, now, wait, done);
	IdemGenStep("sweeping what dropped generations left");
	IdemGenRootSweep();

	/* slots of generations dropped, or opened by transactions that aborted */
	for (i = 0; i < ngens; i++)
		if (gens[i].id != 0)
			live[nlive++] = gens[i].id;
	IdemGenSlotSweep(live, nlive);
	CommandCounterIncrement();
	error_context_stack = errcallback.previous;
	idem_gen_step[0] = '\0';
}

/*
 * idem_generation_switch(namespace text DEFAULT NULL) returns integer
 *
 * Switches the TTL class of namespace (every class in use if NULL) to a
 * new generation now, seals what no claimer holds any more and drops what
 * has expired, as the next purge round would; returns the number of
 * generations opened.  For operators and tests; administrators only.
 */
Datum
idem_generation_switch(PG_FUNCTION_ARGS)
{
	IdemGenMaintenance done;
	int32		c = IDEM_GEN_ALL_CLASSES;

	PreventCommandIfReadOnly("idem_generation_switch()");
	if (!PG_ARGISNULL(0))
	{
		IdemNamespace ns;

		if (!IdemNamespaceGet(PG_GETARG_TEXT_PP(0), false, &ns))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("namespace \"%s\" does not exist",
							text_to_cstring(PG_GETARG_TEXT_PP(0)))));
		c = IdemGenClassOf(&ns);
	}
	IdemGenMaintain(c, true, &done);
	if (done.incomplete)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot switch claim generations: %s", done.why),
				 errdetail("No generation is switched, sealed or dropped while the extension's objects are incomplete."),
				 errhint("During a restore, wait for it to end; otherwise repair the object named.")));
	if (done.why != NULL)
		ereport(NOTICE,
				(errmsg("claim generations left alone: %s", done.why)));
	PG_RETURN_INT32(done.opened);
}
