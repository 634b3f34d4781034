/*
 * namespaces.c
 *	  Claim namespaces: their TTLs and the per-backend cache of them.
 *
 * A namespace scopes event ids per consumer and carries the TTL of its
 * claims.  Namespaces are rows of idempotency.namespaces, created by
 * idem_namespace_define or on first use.  Every claim needs its namespace's
 * id and TTL, so each backend caches them by name.
 *
 * The cache must never outlive the truth:
 *	 - an entry loaded or created in the current transaction is "tentative"
 *	   and is dropped if the transaction or any subtransaction aborts, since
 *	   the row it came from may vanish with it;
 *	 - changes made by other backends arrive as relcache invalidations of
 *	   idempotency.namespaces, sent by idem_namespace_define and by a
 *	   statement trigger on the table for hand-made edits.
 *
 * Cache misses go through SPI, as the table's owner and with a pinned
 * search_path; they are rare, so the cost does not matter.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "commands/sequence.h"
#include "common/hashfn.h"
#include "storage/lmgr.h"
#include "utils/fmgroids.h"
#include "utils/snapmgr.h"
#include "catalog/pg_type_d.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "catalog/pg_class.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "namespaces.h"
#include "stats.h"

PG_FUNCTION_INFO_V1(idem_namespace_define);

int			idem_default_ttl = 7 * SECS_PER_DAY;

static HTAB *idem_ns_cache = NULL;
static IdemNamespace *idem_ns_last = NULL;	/* most recently used entry */
static bool idem_ns_have_tentative = false;
static Oid	idem_ns_relid = InvalidOid; /* relation the cache was read from */

/* Drop every cached namespace */
static void
IdemNamespaceCacheReset(void)
{
	if (idem_ns_cache != NULL)
	{
		hash_destroy(idem_ns_cache);
		idem_ns_cache = NULL;
	}
	idem_ns_last = NULL;
	idem_ns_have_tentative = false;
}

/* Drop entries loaded in the current transaction, or mark them permanent */
static void
IdemNamespaceSettleTentative(bool keep)
{
	HASH_SEQ_STATUS status;
	IdemNamespace *entry;

	if (!idem_ns_have_tentative || idem_ns_cache == NULL)
		return;
	hash_seq_init(&status, idem_ns_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (!entry->tentative)
			continue;
		if (keep)
			entry->tentative = false;
		else
			hash_search(idem_ns_cache, entry->name, HASH_REMOVE, NULL);
	}
	idem_ns_last = NULL;
	idem_ns_have_tentative = false;
}

/* Transaction end: tentative entries become permanent or disappear */
static void
IdemNamespaceXactCallback(XactEvent event, void *arg pg_attribute_unused())
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			IdemNamespaceSettleTentative(true);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			/* a prepared transaction's rows are not committed yet */
			IdemNamespaceSettleTentative(false);
			break;
		default:
			break;
	}
}

/* A rolled-back savepoint may take namespace rows with it */
static void
IdemNamespaceSubXactCallback(SubXactEvent event,
							 SubTransactionId mySubid pg_attribute_unused(),
							 SubTransactionId parentSubid pg_attribute_unused(),
							 void *arg pg_attribute_unused())
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		IdemNamespaceSettleTentative(false);
}

/* Another backend, or a hand-made edit, changed idempotency.namespaces */
static void
IdemNamespaceInvalidate(Oid relid)
{
	if (relid == InvalidOid || relid == idem_ns_relid)
		IdemNamespaceCacheReset();
}

/* Register the callbacks; called from _PG_init (the GUC is init/guc.c's) */
void
IdemNamespaceInit(void)
{

	RegisterXactCallback(IdemNamespaceXactCallback, NULL);
	RegisterSubXactCallback(IdemNamespaceSubXactCallback, NULL);
	IdemInvalOnRelcache(IdemNamespaceInvalidate);
}

/* Check a namespace name's length: not empty, within the bound */
static void
IdemValidateNamespaceLength(const text *name)
{
	IdemCheckLength(VARSIZE_ANY_EXHDR(name), IDEM_MAX_NAMESPACE_BYTES,
					"namespace", "namespace name", "name", NULL);
}

/*
 * Check a namespace name given by a user: its length, and no byte
 * IDEM_SHARD_SEP, which only the names of idem_citus_claim's shard
 * namespaces hold
 */
void
IdemValidateNamespace(const text *name)
{
	IdemValidateNamespaceLength(name);
	if (memchr(VARDATA_ANY(name), IDEM_SHARD_SEP, VARSIZE_ANY_EXHDR(name)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("namespace must not contain the byte 0x1f"),
				 errdetail("The byte is reserved: it separates a namespace from a shard id in the namespaces of idem_citus_claim().")));
}

/*
 * Check a TTL: greater than zero on every date, and at most
 * IDEM_MAX_TTL_YEARS.  Expiry adds the TTL in UTC (IdemNamespaceExpiry),
 * where a day is 24 hours but a month 28 to 31 days, so a TTL such as
 * '1 mon -29 days' would be a day in March and nothing in February: each
 * month counts as 28 days if it adds, 31 if it subtracts.
 */
void
IdemValidateTtl(const Interval *ttl)
{
	Interval	zero;
	Interval	max;
	int64		shortest;

	memset(&max, 0, sizeof(max));
	max.month = IDEM_MAX_TTL_YEARS * MONTHS_PER_YEAR;

	memset(&zero, 0, sizeof(zero));
	if (DatumGetInt32(DirectFunctionCall2(interval_cmp,
										  IntervalPGetDatum(ttl),
										  IntervalPGetDatum(&zero))) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl must be greater than zero"),
				 errdetail("The ttl given was %s.",
						   DatumGetCString(DirectFunctionCall1(interval_out,
															   IntervalPGetDatum(ttl))))));
	shortest = (int64) ttl->month * (ttl->month >= 0 ? 28 : 31) * USECS_PER_DAY +
		(int64) ttl->day * USECS_PER_DAY + ttl->time;
	if (shortest <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl must be greater than zero on every date"),
				 errdetail("The ttl given was %s.",
						   DatumGetCString(DirectFunctionCall1(interval_out,
															   IntervalPGetDatum(ttl)))),
				 errhint("A month counts as 28 days when it adds to a ttl and as 31 when it subtracts.")));
	if (DatumGetInt32(DirectFunctionCall2(interval_cmp,
										  IntervalPGetDatum(ttl),
										  IntervalPGetDatum(&max))) > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl must be at most %d years", IDEM_MAX_TTL_YEARS),
				 errdetail("The ttl given was %s.",
						   DatumGetCString(DirectFunctionCall1(interval_out,
															   IntervalPGetDatum(ttl))))));
}

/*
 * When a claim made at claimed_at expires.
 *
 * Calendar arithmetic is done in UTC, so the answer never depends on the
 * session's TimeZone: a day is always 24 hours, a month a calendar month.
 * idempotency.idem_expires_at() is the same rule in SQL, for the views and
 * for statements.
 */
TimestampTz
IdemNamespaceExpiry(const IdemNamespace *ns, TimestampTz claimed_at)
{
	if (ns->ttl_is_exact)
		return claimed_at + ns->ttl_usecs;
	return DatumGetTimestamp(DirectFunctionCall2(timestamp_pl_interval,
												 TimestampGetDatum(claimed_at),
												 IntervalPGetDatum(&ns->ttl)));
}

/* Set ns's TTL, and the exact length expiry uses when it has no months */
static void
IdemNamespaceSetTtl(IdemNamespace *ns, const Interval *ttl)
{
	ns->ttl = *ttl;
	ns->ttl_is_exact = (ttl->month == 0);
	ns->ttl_usecs = ttl->day * USECS_PER_DAY + ttl->time;
	ns->ttl_class = IdemTtlClass(ttl);
}

/* Seconds of a TTL, months counted as 30 days */
double
IdemTtlSeconds(const Interval *ttl)
{
	return ttl->month * 30.0 * SECS_PER_DAY + ttl->day * (double) SECS_PER_DAY +
		ttl->time / (double) USECS_PER_SEC;
}

/*
 * The TTL class of a TTL, floor(log2(seconds)): claims of one class share
 * a chain of generations (generation.c)
 */
int32
IdemTtlClass(const Interval *ttl)
{
	double		secs = IdemTtlSeconds(ttl);
	int32		c = 0;

	while (c < 62 && secs >= 2.0)
	{
		secs /= 2.0;
		c++;
	}
	return c;
}

/* qsort and bsearch comparator of int32 namespace ids */
int
IdemInt32Compare(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return (x > y) - (x < y);
}

/* bsearch comparator: a namespace id against an IdemNamespace */
static int
IdemNamespaceIdCompare(const void *key, const void *elem)
{
	return IdemInt32Compare(key, &((const IdemNamespace *) elem)->id);
}

/* The namespace with id nsid among nss (sorted by id, as from
 * IdemNamespaceLoadAll), or NULL */
const IdemNamespace *
IdemNamespaceFindById(const IdemNamespace *nss, int nns, int32 nsid)
{
	return bsearch(&nsid, nss, nns, sizeof(IdemNamespace), IdemNamespaceIdCompare);
}

/* Collects the (id, ttl) rows of IdemNamespaceLoadAll */
typedef struct IdemNamespaceList
{
	IdemNamespace *all;
	int			n;
	int			max;
} IdemNamespaceList;

/* Append an (id, ttl) row to the IdemNamespaceList arg */
static void
IdemNamespaceCollect(HeapTuple tuple, TupleDesc desc, void *arg)
{
	IdemNamespaceList *list = arg;
	IdemNamespace *entry;
	bool		isnull;

	if (list->n == list->max)
	{
		list->max *= 2;
		list->all = repalloc(list->all, sizeof(IdemNamespace) * list->max);
	}
	entry = &list->all[list->n++];
	memset(entry, 0, sizeof(*entry));
	entry->id = DatumGetInt32(SPI_getbinval(tuple, desc, 1, &isnull));
	IdemNamespaceSetTtl(entry, DatumGetIntervalP(SPI_getbinval(tuple, desc, 2, &isnull)));
}

/*
 * Every namespace's id and TTL, sorted by id, bypassing the cache: the purge
 * reads them afresh for each batch.  Allocated in the current memory
 * context; *count is set to their number.
 */
IdemNamespace *
IdemNamespaceLoadAll(int *count)
{
	IdemNamespaceList list;

	list.n = 0;
	list.max = 16;
	list.all = palloc(sizeof(IdemNamespace) * list.max);
	(void) IdemOwnerRun(IdemGetCatalog().namespaces, IDEM_RUN_READ_ONLY | IDEM_RUN_LATEST,
						"SELECT DISTINCT ON (id) id, ttl FROM idempotency.namespaces"
						" ORDER BY id, defined_at DESC",
						0, NULL, NULL, NULL, IdemNamespaceCollect, &list);
	*count = list.n;
	return list.all;
}

/* What a scan of the rows of one namespace found */
typedef struct IdemNamespaceRow
{
	bool		found;			/* a row visible to the scan */
	bool		ours;			/* the row chosen was written by us */
	int32		id;
	Interval	ttl;
	TimestampTz created_at;
	TimestampTz defined_at;
} IdemNamespaceRow;

/*
 * Read the rows of namespace name under snapshot.  Every row of a name has
 * the same id (see the file header); the TTL is the one of the row defined
 * last.
 */
static void
IdemNamespaceScan(const IdemCatalog *cat, const char *name, Snapshot snapshot,
				  IdemNamespaceRow *row)
{
	Relation	rel = table_open(cat->namespaces, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	int			att_id = SPI_fnumber(desc, "id");
	int			att_ttl = SPI_fnumber(desc, "ttl");
	int			att_created = SPI_fnumber(desc, "created_at");
	int			att_defined = SPI_fnumber(desc, "defined_at");
	ScanKeyData skey;
	SysScanDesc scan;
	HeapTuple	tuple;

	memset(row, 0, sizeof(*row));
	if (att_id <= 0 || att_ttl <= 0 || att_created <= 0 || att_defined <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idempotency.namespaces is missing a column"),
				 errhint("Re-create the extension with DROP EXTENSION idempotency; CREATE EXTENSION idempotency.")));
	/* systable_beginscan takes heap attribute numbers */
	ScanKeyInit(&skey, SPI_fnumber(desc, "name"), BTEqualStrategyNumber,
				F_TEXTEQ, CStringGetTextDatum(name));
	scan = systable_beginscan(rel, cat->namespaces_name, true, snapshot, 1, &skey);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		bool		isnull;
		TimestampTz defined_at;

		defined_at = DatumGetTimestampTz(heap_getattr(tuple, att_defined, desc, &isnull));
		if (row->found && defined_at < row->defined_at)
			continue;
		row->found = true;
		row->ours = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data));
		row->id = DatumGetInt32(heap_getattr(tuple, att_id, desc, &isnull));
		row->ttl = *DatumGetIntervalP(heap_getattr(tuple, att_ttl, desc, &isnull));
		row->created_at = DatumGetTimestampTz(heap_getattr(tuple, att_created, desc, &isnull));
		row->defined_at = defined_at;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
}

/*
 * Take the lock that serialises writers of namespace name's rows (first
 * users and idem_namespace_define), so that each writer sees every row
 * written before, in flight or not.  Only writers of the same name meet on
 * it, and only for a scan and an insert: it is never held while waiting
 * for anything else.
 */
static void
IdemNamespaceLockName(const char *name, bool acquire)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId,
						 hash_bytes((const unsigned char *) name, strlen(name)),
						 0, IDEM_NAMESPACE_LOCK_FIELD4);
	if (acquire)
		(void) LockAcquire(&tag, ExclusiveLock, false, false);
	else
		LockRelease(&tag, ExclusiveLock, false);
}

/*
 * Write a row of namespace name, as the table's owner: a copy of row if it
 * was found, else a new namespace with a new id and ttl (NULL for the
 * default TTL).  With define, the row is defined now and older rows of the
 * name that we can see are deleted.  Fills row with what was written.
 */
static void
IdemNamespaceWrite(const IdemCatalog *cat, const char *name, const Interval *ttl,
				   bool define, IdemNamespaceRow *row)
{
	static const char *insert_sql =
		"INSERT INTO idempotency.namespaces (id, name, ttl, created_at, defined_at)"
		" VALUES ($1, $2, $3, $4, $5)";
	static const char *delete_sql =
		"DELETE FROM idempotency.namespaces"
		" WHERE name OPERATOR(pg_catalog.=) $1 AND defined_at OPERATOR(pg_catalog.<) $2";
	Oid			argtypes[5] = {INT4OID, TEXTOID, INTERVALOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	Datum		args[5];
	TimestampTz now = GetCurrentTimestamp();

	if (!row->found)
	{
		/* the caller's claim privilege is checked already */
		row->id = (int32) nextval_internal(cat->namespace_seq, false);
		row->created_at = now;
		row->defined_at = now;
		if (ttl == NULL)
		{
			memset(&row->ttl, 0, sizeof(row->ttl));
			row->ttl.time = (int64) idem_default_ttl * USECS_PER_SEC;
			row->ttl = *DatumGetIntervalP(DirectFunctionCall1(interval_justify_hours,
															  IntervalPGetDatum(&row->ttl)));
		}
	}
	if (ttl != NULL)
		row->ttl = *ttl;
	if (define)
		row->defined_at = Max(now, row->defined_at + 1);
	row->found = true;
	row->ours = true;

	args[0] = Int32GetDatum(row->id);
	args[1] = CStringGetTextDatum(name);
	args[2] = IntervalPGetDatum(&row->ttl);
	args[3] = TimestampTzGetDatum(row->created_at);
	args[4] = TimestampTzGetDatum(row->defined_at);
	(void) IdemOwnerRun(cat->namespaces, IDEM_RUN_LATEST, insert_sql,
						5, argtypes, args, NULL, NULL, NULL);
	if (define)
	{
		Oid			deltypes[2] = {TEXTOID, TIMESTAMPTZOID};
		Datum		delargs[2] = {args[1], args[4]};

		(void) IdemOwnerRun(cat->namespaces, IDEM_RUN_LATEST, delete_sql,
							2, deltypes, delargs, NULL, NULL, NULL);
	}
}

/*
 * Find namespace name, creating it first if asked to.  Returns false if it
 * does not exist and create is false.  *tentative is set when the row
 * found is not (yet) committed by anyone: ours, or adopted from a
 * transaction in flight.
 *
 * Lookups read committed rows and our own, whenever committed (like a
 * catalog lookup), so they never depend on the transaction's snapshot and
 * work in parallel mode.  A first use writes a row in the caller's
 * transaction, adopting the id of a row another transaction has in flight
 * rather than waiting for it: each transaction that claims in a namespace
 * then commits a row that maps the name to the id, and nobody waits.
 */
static bool
IdemNamespaceLoad(const IdemCatalog *cat, const char *name, bool create,
				  const Interval *create_ttl, IdemNamespace *entry, bool *tentative)
{
	IdemNamespaceRow row;

	IdemNamespaceScan(cat, name, SnapshotSelf, &row);
	if (!row.found && create)
	{
		SnapshotData dirty;

		InitDirtySnapshot(dirty);
		IdemNamespaceLockName(name, true);
		/* committed meanwhile, by a writer we waited for: nothing to write */
		IdemNamespaceScan(cat, name, SnapshotSelf, &row);
		if (!row.found)
		{
			/* adopt the id of a row in flight, or make a new one */
			IdemNamespaceScan(cat, name, &dirty, &row);
			IdemNamespaceWrite(cat, name, row.found ? NULL : create_ttl, false, &row);
		}
		IdemNamespaceLockName(name, false);
	}
	if (!row.found)
		return false;
	entry->id = row.id;
	IdemNamespaceSetTtl(entry, &row.ttl);
	*tentative = row.ours;
	return true;
}

/*
 * Copy the namespace called name into *out, loading it (and, if create is
 * true, creating it) on a cache miss.  Returns false for a namespace that
 * does not exist when create is false.
 *
 * The caller gets a copy because any later lock acquisition may process an
 * invalidation that empties the cache.
 */
bool
IdemNamespaceGet(const text *name, bool create, IdemNamespace *out)
{
	IdemValidateNamespace(name);
	return IdemNamespaceGetWithTtl(name, create, NULL, out);
}

/*
 * As IdemNamespaceGet, but a namespace created here gets create_ttl (NULL:
 * idempotency.default_ttl)
 */
bool
IdemNamespaceGetWithTtl(const text *name, bool create, const Interval *create_ttl,
						IdemNamespace *out)
{
	const char *data = VARDATA_ANY(name);
	int			len = VARSIZE_ANY_EXHDR(name);
	char		key[IDEM_MAX_NAMESPACE_BYTES + 1];
	IdemNamespace *entry;
	IdemNamespace loaded;
	IdemCatalog cat;
	bool		found;
	bool		tentative;

	IdemValidateNamespaceLength(name);

	/*
	 * Fast path: the same namespace as last time.  The bytes of the cached
	 * name after its NUL are undefined, so compare the len bytes first (a
	 * shorter cached name differs at its NUL) and read name[len] after.
	 */
	entry = idem_ns_last;
	if (entry != NULL && memcmp(entry->name, data, len) == 0 &&
		entry->name[len] == '\0')
	{
		*out = *entry;
		return true;
	}

	memcpy(key, data, len);
	key[len] = '\0';

	if (idem_ns_cache == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = IDEM_MAX_NAMESPACE_BYTES + 1;
		ctl.entrysize = sizeof(IdemNamespace);
		ctl.hcxt = CacheMemoryContext;
		idem_ns_cache = hash_create("idempotency namespaces", 16, &ctl,
									HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}

	entry = hash_search(idem_ns_cache, key, HASH_FIND, NULL);
	if (entry != NULL)
	{
		idem_ns_last = entry;
		*out = *entry;
		return true;
	}

	/* Miss: read (or create) the row, then cache it */
	cat = IdemGetCatalog();
	idem_ns_relid = cat.namespaces;
	memset(&loaded, 0, sizeof(loaded));
	if (!IdemNamespaceLoad(&cat, key, create, create_ttl, &loaded, &tentative))
		return false;

	/* SPI may have processed invalidations that destroyed the cache */
	if (idem_ns_cache == NULL)
		return IdemNamespaceGetWithTtl(name, create, create_ttl, out);

	entry = hash_search(idem_ns_cache, key, HASH_ENTER, &found);
	entry->id = loaded.id;
	IdemNamespaceSetTtl(entry, &loaded.ttl);
	entry->tentative = tentative;
	entry->stats = IdemStatsLookup(MyDatabaseId, cat.namespaces, loaded.id);
	idem_ns_have_tentative |= tentative;
	idem_ns_last = entry;
	*out = *entry;
	return true;
}

/*
 * Remove redundant rows of namespaces, keeping the one defined last of
 * each name; rows locked by a transaction in flight are left for next
 * time.  Run by the purge worker at the start of a round.  Returns the
 * number of rows removed.
 */
uint64
IdemNamespaceCompact(void)
{
	static const char *dup_sql =
		"SELECT a.ctid FROM idempotency.namespaces a"
		" JOIN idempotency.namespaces b ON b.name OPERATOR(pg_catalog.=) a.name"
		" AND ROW(b.defined_at, b.ctid) > ROW(a.defined_at, a.ctid)"
		" LIMIT 1";
	static const char *delete_sql =
		"DELETE FROM idempotency.namespaces WHERE ctid = ANY (ARRAY("
		" SELECT a.ctid FROM idempotency.namespaces a"
		" JOIN idempotency.namespaces b ON b.name OPERATOR(pg_catalog.=) a.name"
		" AND ROW(b.defined_at, b.ctid) > ROW(a.defined_at, a.ctid)"
		" FOR UPDATE OF a SKIP LOCKED))";
	Oid			relid = IdemGetCatalog().namespaces;

	/* the DELETE's statement trigger would invalidate every backend's cache */
	if (IdemOwnerRun(relid, IDEM_RUN_READ_ONLY | IDEM_RUN_LATEST, dup_sql,
					 0, NULL, NULL, NULL, NULL, NULL) == 0)
		return 0;
	return IdemOwnerRun(relid, IDEM_RUN_LATEST, delete_sql, 0, NULL, NULL, NULL, NULL, NULL);
}

/* Write a defining row of namespace name with ttl */
static void
IdemNamespaceDefineOne(const IdemCatalog *cat, const char *name, const Interval *ttl)
{
	IdemNamespaceRow row;
	SnapshotData dirty;

	InitDirtySnapshot(dirty);
	IdemNamespaceLockName(name, true);
	IdemNamespaceScan(cat, name, &dirty, &row);
	IdemNamespaceWrite(cat, name, ttl, true, &row);
	IdemNamespaceLockName(name, false);
}

/* Collects the names a query returns into a List of C strings */
static void
IdemNamespaceCollectName(HeapTuple tuple, TupleDesc desc, void *arg)
{
	List	  **names = (List **) arg;
	char	   *name = SPI_getvalue(tuple, desc, 1);

	if (name != NULL)
		*names = lappend(*names, name);
}

/*
 * The shard namespaces of name (idem_citus_claim's, "name" IDEM_SHARD_SEP
 * shard id) follow its TTL: define each of them with ttl too
 */
static void
IdemNamespaceDefineShards(const IdemCatalog *cat, const char *name, const Interval *ttl)
{
	List	   *names = NIL;
	ListCell   *lc;
	char	   *prefix = psprintf("%s%c", name, IDEM_SHARD_SEP);

	(void) IdemOwnerRun(cat->namespaces, IDEM_RUN_READ_ONLY | IDEM_RUN_LATEST,
						"SELECT DISTINCT name FROM idempotency.namespaces"
						" WHERE pg_catalog.left(name, pg_catalog.length($1)) OPERATOR(pg_catalog.=) $1",
						1, (Oid[]) {TEXTOID}, (Datum[]) {CStringGetTextDatum(prefix)},
						NULL, IdemNamespaceCollectName, &names);
	foreach(lc, names)
		IdemNamespaceDefineOne(cat, (const char *) lfirst(lc), ttl);
}

/*
 * Give namespace name (an internal one: no check of its bytes) the TTL
 * ttl, as idem_namespace_define would
 */
void
IdemNamespaceDefineInternal(const char *name, const Interval *ttl)
{
	IdemCatalog cat = IdemGetCatalog();

	IdemNamespaceDefineOne(&cat, name, ttl);
	IdemNamespaceCacheReset();
}

/*
 * idem_namespace_define(namespace text, ttl interval) returns void
 *
 * Creates a namespace, or changes the TTL of an existing one.  The new TTL
 * applies to the namespace's existing claims as well.
 */
Datum
idem_namespace_define(PG_FUNCTION_ARGS)
{
	text	   *name = DatumGetTextPP(IdemArgNotNull(fcinfo, 0, "namespace"));
	Interval   *ttl = DatumGetIntervalP(IdemArgNotNull(fcinfo, 1, "ttl"));
	char	   *cname;
	IdemCatalog cat;

	IdemValidateNamespace(name);
	IdemValidateTtl(ttl);
	IdemCheckWritable("idem_namespace_define()");
	cname = text_to_cstring(name);

	cat = IdemGetCatalog();
	IdemNamespaceDefineOne(&cat, cname, ttl);
	IdemNamespaceDefineShards(&cat, cname, ttl);

	/* The statement trigger told other backends; forget our own copy */
	IdemNamespaceCacheReset();
	PG_RETURN_VOID();
}
