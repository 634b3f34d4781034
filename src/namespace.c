/*
 * namespace.c
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

#include "access/xact.h"
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

#include "catalog.h"
#include "namespace.h"
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
		case XACT_EVENT_PREPARE:
			IdemNamespaceSettleTentative(true);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
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
IdemNamespaceRelcacheCallback(Datum arg pg_attribute_unused(), Oid relid)
{
	if (relid == InvalidOid || relid == idem_ns_relid)
		IdemNamespaceCacheReset();
}

/* Define the GUC and register the callbacks; called from _PG_init */
void
IdemNamespaceInit(void)
{
	DefineCustomIntVariable("idempotency.default_ttl",
							"TTL of a namespace created on first use.",
							"Claims expire this long after they are made, unless their namespace was given another TTL with idem_namespace_define.",
							&idem_default_ttl,
							7 * SECS_PER_DAY,
							1,
							INT_MAX,
							PGC_USERSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	RegisterXactCallback(IdemNamespaceXactCallback, NULL);
	RegisterSubXactCallback(IdemNamespaceSubXactCallback, NULL);
	CacheRegisterRelcacheCallback(IdemNamespaceRelcacheCallback, (Datum) 0);
}

/* Check a namespace name: present, not empty, within the bound */
void
IdemValidateNamespace(const text *name)
{
	int			len = VARSIZE_ANY_EXHDR(name);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("namespace must not be empty")));
	if (len > IDEM_MAX_NAMESPACE_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("namespace name is too long"),
				 errdetail("The name is %d bytes long; the limit is %d bytes.",
						   len, IDEM_MAX_NAMESPACE_BYTES)));
}

/* Check a TTL: strictly positive and at most IDEM_MAX_TTL_YEARS */
void
IdemValidateTtl(const Interval *ttl)
{
	Interval	zero;
	Interval	max;

	memset(&zero, 0, sizeof(zero));
	memset(&max, 0, sizeof(max));
	max.month = IDEM_MAX_TTL_YEARS * MONTHS_PER_YEAR;

	if (DatumGetInt32(DirectFunctionCall2(interval_cmp,
										  IntervalPGetDatum(ttl),
										  IntervalPGetDatum(&zero))) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl must be greater than zero"),
				 errdetail("The ttl given was %s.",
						   DatumGetCString(DirectFunctionCall1(interval_out,
															   IntervalPGetDatum(ttl))))));
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
 * The idem_claims view computes expires_at the same way.
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

/* Copy row i of the SPI result (id, ttl) into entry */
static void
IdemNamespaceFromSpi(IdemNamespace *entry, uint64 i)
{
	bool		isnull;
	Datum		d;

	d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
	entry->id = DatumGetInt32(d);
	d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull);
	entry->ttl = *DatumGetIntervalP(d);
	entry->ttl_is_exact = (entry->ttl.month == 0);
	entry->ttl_usecs = entry->ttl.day * USECS_PER_DAY + entry->ttl.time;
}

/*
 * Every namespace's id and TTL, sorted by id, bypassing the cache: the purge
 * reads them afresh for each batch.  Allocated in the current memory
 * context; *count is set to their number.
 */
IdemNamespace *
IdemNamespaceLoadAll(int *count)
{
	IdemCatalog cat = IdemGetCatalog();
	MemoryContext cxt = CurrentMemoryContext;
	IdemOwnerScope scope;
	IdemNamespace *all;
	uint64		i;

	IdemOwnerScopeBegin(&scope, cat.namespaces);
	if (IdemSpiExecute("SELECT id, ttl FROM idempotency.namespaces ORDER BY id",
					   0, NULL, NULL, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read idempotency.namespaces");
	all = MemoryContextAllocZero(cxt, sizeof(IdemNamespace) * Max(SPI_processed, 1));
	for (i = 0; i < SPI_processed; i++)
		IdemNamespaceFromSpi(&all[i], i);
	*count = (int) SPI_processed;
	IdemOwnerScopeEnd(&scope);
	return all;
}

/*
 * Read a namespace row, creating it first if asked to.  Returns false if it
 * does not exist and create is false.
 */
static bool
IdemNamespaceLoad(Oid relid, const char *name, bool create,
				  IdemNamespace *entry)
{
	static const char *select_sql =
		"SELECT id, ttl FROM idempotency.namespaces"
		" WHERE name OPERATOR(pg_catalog.=) $1";
	static const char *insert_sql =
		"INSERT INTO idempotency.namespaces (name, ttl)"
		" VALUES ($1, pg_catalog.justify_hours(pg_catalog.make_interval(secs => $2)))"
		" ON CONFLICT (name) DO NOTHING RETURNING id, ttl";
	IdemOwnerScope scope;
	Oid			argtypes[2] = {TEXTOID, FLOAT8OID};
	Datum		args[2];
	bool		found;
	int			attempt;

	args[0] = CStringGetTextDatum(name);
	args[1] = Float8GetDatum((double) idem_default_ttl);

	IdemOwnerScopeBegin(&scope, relid);
	for (attempt = 0;; attempt++)
	{
		if (IdemSpiExecute(select_sql, 1, argtypes, args, NULL,
								  false, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not read idempotency.namespaces");
		found = (SPI_processed == 1);
		if (found || !create || attempt > 0)
			break;

		/*
		 * Create it.  A concurrent creator makes us wait, as any unique key
		 * does; if it commits first we read its row on the next round.
		 */
		if (IdemSpiExecute(insert_sql, 2, argtypes, args, NULL,
								  false, 1) != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "could not create namespace \"%s\"", name);
		if (SPI_processed == 1)
		{
			found = true;
			break;
		}
	}
	if (found)
		IdemNamespaceFromSpi(entry, 0);
	IdemOwnerScopeEnd(&scope);

	if (create && !found)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not create namespace \"%s\"", name),
				 errdetail("A concurrent transaction created it, and this transaction's snapshot cannot see it.")));
	return found;
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
	const char *data = VARDATA_ANY(name);
	int			len = VARSIZE_ANY_EXHDR(name);
	char		key[IDEM_MAX_NAMESPACE_BYTES + 1];
	IdemNamespace *entry;
	IdemNamespace loaded;
	IdemCatalog cat;
	bool		found;

	IdemValidateNamespace(name);

	/* Fast path: the same namespace as last time */
	entry = idem_ns_last;
	if (entry != NULL && entry->name[len] == '\0' &&
		memcmp(entry->name, data, len) == 0)
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
	if (!IdemNamespaceLoad(cat.namespaces, key, create, &loaded))
		return false;

	/* SPI may have processed invalidations that destroyed the cache */
	if (idem_ns_cache == NULL)
		return IdemNamespaceGet(name, create, out);

	entry = hash_search(idem_ns_cache, key, HASH_ENTER, &found);
	entry->id = loaded.id;
	entry->ttl = loaded.ttl;
	entry->ttl_is_exact = loaded.ttl_is_exact;
	entry->ttl_usecs = loaded.ttl_usecs;
	entry->tentative = true;
	entry->stats = IdemStatsLookup(MyDatabaseId, loaded.id);
	idem_ns_have_tentative = true;
	idem_ns_last = entry;
	*out = *entry;
	return true;
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
	static const char *upsert_sql =
		"INSERT INTO idempotency.namespaces (name, ttl) VALUES ($1, $2)"
		" ON CONFLICT (name) DO UPDATE SET ttl = EXCLUDED.ttl";
	text	   *name;
	Interval   *ttl;
	IdemCatalog cat;
	IdemOwnerScope scope;
	Oid			argtypes[2] = {TEXTOID, INTERVALOID};
	Datum		args[2];

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("namespace must not be null")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("ttl must not be null")));
	name = PG_GETARG_TEXT_PP(0);
	ttl = PG_GETARG_INTERVAL_P(1);

	IdemValidateNamespace(name);
	IdemValidateTtl(ttl);
	PreventCommandIfReadOnly("idem_namespace_define()");

	cat = IdemGetCatalog();
	args[0] = PointerGetDatum(name);
	args[1] = IntervalPGetDatum(ttl);

	IdemOwnerScopeBegin(&scope, cat.namespaces);
	if (IdemSpiExecute(upsert_sql, 2, argtypes, args, NULL,
							  false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not define namespace");
	IdemOwnerScopeEnd(&scope);

	/* The statement trigger told other backends; forget our own copy */
	IdemNamespaceCacheReset();
	PG_RETURN_VOID();
}
