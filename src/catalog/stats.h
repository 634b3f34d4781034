/*
 * stats.h
 *	  Per-namespace counters kept in shared memory since server start.
 */
#ifndef IDEM_STATS_H
#define IDEM_STATS_H

#include "postgres.h"

#include "port/atomics.h"

/* The counters, in the order idem_stats shows them */
typedef enum IdemStatCounter
{
	IDEM_STAT_CLAIMS,			/* claims newly made */
	IDEM_STAT_DUPLICATES,		/* claims refused as duplicates */
	IDEM_STAT_WAITS,			/* waits for an in-flight claimer */
	IDEM_STAT_FINGERPRINT_MISMATCHES,	/* duplicates with another payload */
	IDEM_STAT_TAKEOVERS,		/* expired claims taken over */
	IDEM_STAT_BUSY,				/* idem_try_claim calls that returned NULL */
	IDEM_STAT_RELEASES,			/* claims removed by idem_release */
	IDEM_STAT_PURGED,			/* expired claims deleted by the purge */
	IDEM_STAT_REQUEST_BEGINS,	/* idem_begin calls that started an attempt */
	IDEM_STAT_REQUEST_REPLAYS,	/* idem_begin calls answered with a stored result */
	IDEM_STAT_REQUEST_IN_FLIGHT,	/* idem_begin calls answered in_progress */
	IDEM_STAT_REQUEST_MISMATCHES,	/* idem_begin calls refused with ID001 */
	IDEM_STAT_REQUEST_TAKEOVERS,	/* attempts started over an expired lease */
	IDEM_STAT_REQUEST_FAILURES, /* idem_fail calls, retryable or not */
	IDEM_STAT_REQUEST_FORGETS,	/* requests removed by idem_request_forget */
	IDEM_STAT_NCOUNTERS
} IdemStatCounter;

/*
 * Key of a stats entry: one per namespace per installation of the
 * extension in a database.  The namespaces table's OID tells installations
 * apart, since namespace ids start again when the extension is re-created.
 */
typedef struct IdemStatsKey
{
	Oid			dbid;
	Oid			relid;			/* idempotency.namespaces */
	int32		nsid;
} IdemStatsKey;

typedef struct IdemStatsEntry
{
	IdemStatsKey key;
	pg_atomic_uint64 counters[IDEM_STAT_NCOUNTERS];
} IdemStatsEntry;

/* GUC: how many namespaces the shared statistics can track */
extern int	idem_stats_max;

/* Count one event; entry is NULL when statistics are unavailable */
static inline void
IdemStatsCount(IdemStatsEntry *entry, IdemStatCounter counter)
{
	if (entry != NULL)
		pg_atomic_fetch_add_u64(&entry->counters[counter], 1);
}

/* Count n events */
static inline void
IdemStatsAdd(IdemStatsEntry *entry, IdemStatCounter counter, int64 n)
{
	if (entry != NULL)
		pg_atomic_fetch_add_u64(&entry->counters[counter], (uint64) n);
}

extern Size IdemStatsShmemSize(void);
extern void IdemStatsShmemInit(void);
extern IdemStatsEntry *IdemStatsLookup(Oid dbid, Oid relid, int32 nsid);

#endif							/* IDEM_STATS_H */
