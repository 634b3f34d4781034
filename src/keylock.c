/*
 * keylock.c
 *	  Keyed locks: idem_lock and idem_try_lock serialize work per business
 *	  key, without a Redis lock service.
 *
 * A key is hashed to 64 bits and locked as a transaction-scoped advisory
 * lock of the current database.  The lock tag carries its own field4 value,
 * IDEM_LOCK_FIELD4, so these locks never collide with the application's
 * pg_advisory_lock() calls (which use 1 and 2); in pg_locks they show as
 * locktype 'advisory' with objsubid IDEM_LOCK_FIELD4.  Two keys whose hashes
 * collide (probability 2^-64 for a pair) share a lock: a collision can only
 * add serialization, never let two holders of one key in at once.
 *
 * Waiting goes through the lock manager: lock_timeout, statement_timeout
 * and deadlock detection apply.  Locks are released at transaction end.
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lock.h"

#include "compat.h"
#include "idempotency.h"

PG_FUNCTION_INFO_V1(idem_lock);
PG_FUNCTION_INFO_V1(idem_try_lock);

/* field4 of our advisory lock tags; pg_advisory_lock uses 1 and 2 */
#define IDEM_LOCK_FIELD4	0x1de

/* The lock tag of a key */
static void
IdemKeyLockTag(FunctionCallInfo fcinfo, LOCKTAG *tag)
{
	text	   *key;
	uint64		h;

	key = DatumGetTextPP(IdemArgNotNull(fcinfo, 0, "lock key"));
	h = hash_bytes_extended((const unsigned char *) VARDATA_ANY(key),
							VARSIZE_ANY_EXHDR(key), UINT64CONST(0x1de1de1de1de1de1));
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (h >> 32), (uint32) h,
						 IDEM_LOCK_FIELD4);
}

/*
 * idem_lock(key text) returns void
 *
 * Waits for, then holds until transaction end, the lock of key.
 */
Datum
idem_lock(PG_FUNCTION_ARGS)
{
	LOCKTAG		tag;

	IdemKeyLockTag(fcinfo, &tag);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
	PG_RETURN_VOID();
}

/*
 * idem_try_lock(key text) returns boolean
 *
 * Takes the lock of key if nobody holds it, without waiting.
 */
Datum
idem_try_lock(PG_FUNCTION_ARGS)
{
	LOCKTAG		tag;

	IdemKeyLockTag(fcinfo, &tag);
	PG_RETURN_BOOL(LockAcquire(&tag, ExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL);
}
