/*
 * stats.c
 *	  Per-namespace counters kept in shared memory since server start.
 *
 * Entries live in a shared hash keyed by (database, namespace id).  An
 * entry is never removed once created (a reset only zeroes it), so each
 * backend keeps a pointer to it in its namespace cache and counts with a
 * single atomic add, without taking any lock.
 *
 * Counters count calls, including calls made by transactions that later
 * roll back, as pg_stat_statements does.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"

#include "base/base.h"
#include "stats.h"

PG_FUNCTION_INFO_V1(idem_stats_read);
PG_FUNCTION_INFO_V1(idem_stats_reset);

int			idem_stats_max = 1000;

static HTAB *idem_stats_hash = NULL;
static bool idem_stats_full_warned = false;

/* Shared memory needed by the statistics hash */
Size
IdemStatsShmemSize(void)
{
	return hash_estimate_size(idem_stats_max, sizeof(IdemStatsEntry));
}

/* Create or attach to the statistics hash; caller holds AddinShmemInitLock */
void
IdemStatsShmemInit(void)
{
	HASHCTL		info;

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(IdemStatsKey);
	info.entrysize = sizeof(IdemStatsEntry);
	idem_stats_hash = IdemShmemInitHash("idempotency stats", idem_stats_max,
										&info, HASH_ELEM | HASH_BLOBS);
}

/*
 * Remove the entries of database dbid left by an earlier installation of
 * the extension (another namespaces table than relid).  Caller holds the
 * lock exclusively.
 */
static void
IdemStatsForgetStale(Oid dbid, Oid relid)
{
	HASH_SEQ_STATUS status;
	IdemStatsEntry *entry;

	hash_seq_init(&status, idem_stats_hash);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (entry->key.dbid == dbid && entry->key.relid != relid)
			(void) hash_search(idem_stats_hash, &entry->key, HASH_REMOVE, NULL);
	}
}

/*
 * Find or create the counters of a namespace.  Returns NULL when shared
 * memory is unavailable or idempotency.stats_max_namespaces namespaces are
 * counted already, which is a hard limit: entries of earlier installations
 * of the extension in this database are dropped to make room first.
 */
IdemStatsEntry *
IdemStatsLookup(Oid dbid, Oid relid, int32 nsid)
{
	IdemStatsKey key;
	IdemStatsEntry *entry;
	bool		found;
	int			i;

	if (!IdemShmemReady() || idem_stats_hash == NULL)
		return NULL;

	memset(&key, 0, sizeof(key));
	key.dbid = dbid;
	key.relid = relid;
	key.nsid = nsid;

	LWLockAcquire(idem_shared->lock, LW_SHARED);
	entry = hash_search(idem_stats_hash, &key, HASH_FIND, NULL);
	LWLockRelease(idem_shared->lock);
	if (entry != NULL)
		return entry;

	LWLockAcquire(idem_shared->lock, LW_EXCLUSIVE);
	entry = hash_search(idem_stats_hash, &key, HASH_FIND, NULL);
	if (entry == NULL && hash_get_num_entries(idem_stats_hash) >= idem_stats_max)
		IdemStatsForgetStale(dbid, relid);
	if (entry == NULL && hash_get_num_entries(idem_stats_hash) < idem_stats_max)
	{
		entry = hash_search(idem_stats_hash, &key, HASH_ENTER_NULL, &found);
		if (entry != NULL && !found)
		{
			for (i = 0; i < IDEM_STAT_NCOUNTERS; i++)
				pg_atomic_init_u64(&entry->counters[i], 0);
		}
	}
	LWLockRelease(idem_shared->lock);

	if (entry == NULL && !idem_stats_full_warned)
	{
		idem_stats_full_warned = true;
		ereport(WARNING,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("idempotency statistics are full"),
				 errdetail("idempotency.stats_max_namespaces is %d; namespace id %d of this database is not counted in idem_stats.",
						   idem_stats_max, nsid),
				 errhint("Raise idempotency.stats_max_namespaces and restart the server.")));
	}
	return entry;
}

/*
 * idempotency.idem_stats_read() returns setof record
 *
 * The counters of the current database's namespaces; backs the idem_stats
 * view.  Without shared memory it returns nothing and says why.
 */
Datum
idem_stats_read(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HASH_SEQ_STATUS status;
	IdemStatsEntry *entry;
	Oid			relid = IdemGetCatalog().namespaces;

	IdemInitMaterializedSRF(fcinfo);

	if (!IdemShmemReady())
	{
		ereport(NOTICE,
				(errmsg("idem_stats is empty because idempotency is not loaded through shared_preload_libraries"),
				 errhint("Add idempotency to shared_preload_libraries and restart the server.")));
		return (Datum) 0;
	}

	LWLockAcquire(idem_shared->lock, LW_SHARED);
	hash_seq_init(&status, idem_stats_hash);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		Datum		values[IDEM_STAT_NCOUNTERS + 1];
		bool		nulls[IDEM_STAT_NCOUNTERS + 1];
		int			i;

		if (entry->key.dbid != MyDatabaseId || entry->key.relid != relid)
			continue;
		memset(nulls, 0, sizeof(nulls));
		values[0] = Int32GetDatum(entry->key.nsid);
		for (i = 0; i < IDEM_STAT_NCOUNTERS; i++)
			values[i + 1] = Int64GetDatum((int64) pg_atomic_read_u64(&entry->counters[i]));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(idem_shared->lock);
	return (Datum) 0;
}

/*
 * idem_stats_reset() returns void
 *
 * Zeroes the counters of the current database.
 */
Datum
idem_stats_reset(PG_FUNCTION_ARGS)
{
	HASH_SEQ_STATUS status;
	IdemStatsEntry *entry;
	Oid			relid;

	if (!IdemShmemReady())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idempotency statistics are not available"),
				 errhint("Add idempotency to shared_preload_libraries and restart the server.")));

	relid = IdemGetCatalog().namespaces;
	LWLockAcquire(idem_shared->lock, LW_EXCLUSIVE);
	IdemStatsForgetStale(MyDatabaseId, relid);
	hash_seq_init(&status, idem_stats_hash);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		int			i;

		if (entry->key.dbid != MyDatabaseId)
			continue;
		for (i = 0; i < IDEM_STAT_NCOUNTERS; i++)
			pg_atomic_write_u64(&entry->counters[i], 0);
	}
	LWLockRelease(idem_shared->lock);
	PG_RETURN_VOID();
}
