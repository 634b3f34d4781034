/*
 * purge.h
 *	  Deleting expired claims and expired rows of registered user tables.
 */
#ifndef IDEM_PURGE_H
#define IDEM_PURGE_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "storage/itemptr.h"

/* GUCs, defined in worker.c */
extern bool idem_purge_enabled;
extern int	idem_purge_interval;
extern int	idem_purge_batch_size;
extern int	idem_purge_max_runtime;
extern int	idem_purge_history;
extern bool idem_log_purge;

/* Smallest batch the purge shrinks to after lock timeouts */
#define IDEM_PURGE_MIN_BATCH	100

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
	bool		complete;		/* no expired row was left */
	char	   *error;			/* the error that stopped it, or NULL */
} IdemPurgeResult;

extern List *IdemPurgeTargets(void);
extern int64 IdemPurgeBatch(IdemPurgeTarget *target, int batch,
							ItemPointer cursor, bool *more);
extern void IdemPurgeRecord(IdemPurgeTarget *target, IdemPurgeResult *result,
							const char *trigger);
extern void IdemPurgeDatabaseRound(void);

#endif							/* IDEM_PURGE_H */
