/*
 * request.c
 *	  API-style idempotency: idem_begin, idem_complete and idem_fail, leases
 *	  for side effects outside the database with results replayed to
 *	  retries.
 *
 * idem_claim covers work that commits with the claim.  An HTTP handler
 * that calls a payment provider cannot do that; it needs the Stripe or AWS
 * Powertools model, which these functions implement on the rows of
 * idempotency.requests:
 *
 *	 idem_begin     in_progress with a fresh owner and a lease: 'started';
 *	                another owner's live lease: 'in_progress' (HTTP 409);
 *	                a stored result: 'completed' or 'failed', for replay;
 *	                an expired lease: taken over, 'started', attempts + 1;
 *	                a fingerprint that differs: an error carrying the stored
 *	                record (HTTP 422).
 *	 idem_complete  stores the result, if the caller's owner still holds it.
 *	 idem_fail      stores a permanent error, or releases the key so that a
 *	                retry starts afresh.
 *
 * Each call is meant to commit in its own short transaction.  Decisions are
 * made on what a READ COMMITTED statement sees, and every change is a
 * conditional UPDATE (on the owner, the status, the lease), so concurrent
 * callers resolve the way row locks make them: a stale owner's complete
 * matches no row and is refused, never overwriting.  Owners are never
 * shown to anyone but the caller that started the attempt.
 *
 * Leases are wall-clock (clock_timestamp()), so that a waiting caller sees
 * one expire.  The TTL of a record follows the claim rules, counted from
 * when the work was done: completed_at (or, unfinished, created_at) plus
 * the namespace's TTL, after which the record counts as absent, unless its
 * lease is still live: a lease longer than the TTL is honoured to its end,
 * by idem_begin and by the purge alike.
 *
 * These calls are not a hot path (each wraps a call to another system), so
 * they use SPI, with plans prepared once per backend, run as the owner of
 * the table after checking the caller's privileges on it.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"
#include "utils/wait_event.h"

#include "base/base.h"
#include "store/store.h"
#include "catalog/idem_catalog.h"
#include "request.h"

PG_FUNCTION_INFO_V1(idem_begin);
PG_FUNCTION_INFO_V1(idem_complete);
PG_FUNCTION_INFO_V1(idem_fail);
PG_FUNCTION_INFO_V1(idem_extend);

/* The statements, prepared once per backend */
enum
{
	REQ_INSERT,
	REQ_SELECT,
	REQ_RESTART,
	REQ_TAKEOVER,
	REQ_COMPLETE,
	REQ_FAIL,
	REQ_RELEASE,
	REQ_EXTEND,
	REQ_NPLANS
};

static const char *const idem_request_sql[REQ_NPLANS] = {
	/* REQ_INSERT: key, ns, fingerprint, lease */
	"INSERT INTO idempotency.requests"
	" (key, ns, fingerprint, status, owner, attempts, lease_expires_at, created_at)"
	" VALUES ($1, $2, $3, 'in_progress', gen_random_uuid(), 1, clock_timestamp() + $4, now())"
	" ON CONFLICT (key, ns) DO NOTHING"
	" RETURNING owner, attempts, lease_expires_at",
	/* REQ_SELECT: key, ns, ttl */
	"SELECT status, owner, fingerprint, result, attempts, lease_expires_at, created_at,"
	"       " IDEM_REQUEST_EXPIRED_SQL("", "$3") " AS expired,"
	"       lease_expires_at <= clock_timestamp() AS lease_expired,"
	"       jsonb_build_object('status', status, 'attempts', attempts, 'result', result,"
	"                          'created_at', created_at)::text AS record,"
	"       xmin"
	"  FROM idempotency.requests WHERE key = $1 AND ns = $2",
	/* REQ_RESTART: key, ns, fingerprint, lease, observed created_at, ttl */
	"UPDATE idempotency.requests SET status = 'in_progress', owner = gen_random_uuid(),"
	"       attempts = 1, fingerprint = $3, result = NULL, created_at = now(),"
	"       completed_at = NULL, lease_expires_at = clock_timestamp() + $4"
	" WHERE key = $1 AND ns = $2 AND created_at = $5"
	"   AND " IDEM_REQUEST_EXPIRED_SQL("", "$6")
	" RETURNING owner, attempts, lease_expires_at",
	/* REQ_TAKEOVER: key, ns, fingerprint, lease, observed owner */
	"UPDATE idempotency.requests SET owner = gen_random_uuid(), attempts = attempts + 1,"
	"       fingerprint = coalesce(fingerprint, $3), lease_expires_at = clock_timestamp() + $4"
	" WHERE key = $1 AND ns = $2 AND owner = $5 AND status = 'in_progress'"
	"   AND lease_expires_at <= clock_timestamp()"
	" RETURNING owner, attempts, lease_expires_at",
	/* REQ_COMPLETE: key, ns, owner, result */
	"UPDATE idempotency.requests SET status = 'completed', result = $4,"
	"       completed_at = now(), lease_expires_at = NULL"
	" WHERE key = $1 AND ns = $2 AND owner = $3 AND status = 'in_progress'",
	/* REQ_FAIL: key, ns, owner, error */
	"UPDATE idempotency.requests SET status = 'failed', result = $4,"
	"       completed_at = now(), lease_expires_at = NULL"
	" WHERE key = $1 AND ns = $2 AND owner = $3 AND status = 'in_progress'",
	/* REQ_RELEASE: key, ns, owner */
	"DELETE FROM idempotency.requests"
	" WHERE key = $1 AND ns = $2 AND owner = $3 AND status = 'in_progress'",
	/* REQ_EXTEND: key, ns, owner, lease */
	"UPDATE idempotency.requests SET lease_expires_at = clock_timestamp() + $4"
	" WHERE key = $1 AND ns = $2 AND owner = $3 AND status = 'in_progress'"
	" RETURNING lease_expires_at"
};

static const Oid idem_request_types[REQ_NPLANS][6] = {
	{BYTEAOID, INT4OID, TEXTOID, INTERVALOID},
	{BYTEAOID, INT4OID, INTERVALOID},
	{BYTEAOID, INT4OID, TEXTOID, INTERVALOID, TIMESTAMPTZOID, INTERVALOID},
	{BYTEAOID, INT4OID, TEXTOID, INTERVALOID, UUIDOID},
	{BYTEAOID, INT4OID, UUIDOID, JSONBOID},
	{BYTEAOID, INT4OID, UUIDOID, JSONBOID},
	{BYTEAOID, INT4OID, UUIDOID},
	{BYTEAOID, INT4OID, UUIDOID, INTERVALOID}
};

static const int idem_request_nargs[REQ_NPLANS] = {4, 3, 6, 5, 4, 4, 3, 4};

static SPIPlanPtr idem_request_plans[REQ_NPLANS];

/* Run statement which with args; call between IdemOwnerScopeBegin/End */
static int
IdemRequestRun(int which, Datum *args, const char *nulls)
{
	if (idem_request_plans[which] == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare(idem_request_sql[which], idem_request_nargs[which],
									   (Oid *) idem_request_types[which]);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		idem_request_plans[which] = plan;
	}
	return SPI_execute_plan(idem_request_plans[which], args, nulls, false, 0);
}

/* What idem_begin returns */
typedef struct IdemBeginResult
{
	const char *status;
	pg_uuid_t	owner;			/* set only when status is "started" */
	Datum		result;			/* jsonb, or 0 */
	int32		attempts;
	bool		has_lease;
	TimestampTz lease_expires_at;
} IdemBeginResult;

/* Fill r from row 0 of an INSERT/UPDATE ... RETURNING owner, attempts, lease */
static void
IdemBeginStarted(IdemBeginResult *r)
{
	HeapTuple	tup = SPI_tuptable->vals[0];
	TupleDesc	desc = SPI_tuptable->tupdesc;
	bool		isnull;

	r->status = "started";
	r->owner = *DatumGetUUIDP(SPI_getbinval(tup, desc, 1, &isnull));
	r->attempts = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
	r->lease_expires_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 3, &isnull));
	r->has_lease = true;
}

/* The sign of an interval: -1, 0 or 1 */
static int
IdemIntervalSign(const Interval *iv)
{
	Interval	zero;
	int32		cmp;

	memset(&zero, 0, sizeof(zero));
	cmp = DatumGetInt32(DirectFunctionCall2(interval_cmp, IntervalPGetDatum(iv),
											IntervalPGetDatum(&zero)));
	return (cmp > 0) - (cmp < 0);
}

/* Check an interval argument is strictly positive */
static void
IdemPositiveInterval(const Interval *iv, const char *what)
{
	if (IdemIntervalSign(iv) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be greater than zero", what)));
}

/* Sleep on the latch for ms, interruptibly */
static void
IdemRequestSleep(long ms)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 ms, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/*
 * idem_begin(key text, namespace text, fingerprint text, lease interval,
 *			  wait interval) returns record
 *			  (status, owner, result, attempts, lease_expires_at)
 *
 * Starts work on key, or tells why not.  With wait, blocks up to that long
 * while another owner's live lease is in progress, until it completes,
 * fails or expires.
 */
Datum
idem_begin(PG_FUNCTION_ARGS)
{
	text	   *id = DatumGetTextPP(IdemArgNotNull(fcinfo, 0, "key"));
	text	   *nsname = DatumGetTextPP(IdemArgNotNull(fcinfo, 1, "namespace"));
	text	   *fingerprint = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	Interval   *lease = DatumGetIntervalP(IdemArgNotNull(fcinfo, 3, "lease"));
	Interval   *wait = PG_ARGISNULL(4) ? NULL : PG_GETARG_INTERVAL_P(4);
	IdemKey		key;
	IdemNamespace ns;
	IdemCatalog cat;
	IdemOwnerScope scope;
	IdemBeginResult r;
	TimestampTz deadline = 0;
	long		nap = 5;
	TupleDesc	tupdesc;
	Datum		values[5];
	bool		nulls[5];
	char		fpnull = fingerprint ? ' ' : 'n';

	IdemEncodeNamedKey(id, "key", &key);
	IdemValidateNamespace(nsname);
	IdemPositiveInterval(lease, "lease");
	if (wait != NULL)
	{
		if (IdemIntervalSign(wait) < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("wait must not be negative")));
		deadline = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
														   TimestampTzGetDatum(GetCurrentTimestamp()),
														   IntervalPGetDatum(wait)));
	}
	IdemCheckWritable("idem_begin()");
	cat = IdemGetCatalog();
	IdemCheckTablePrivilege(cat.requests, "requests", ACL_INSERT, "Starting a request");
	IdemCheckTablePrivilege(cat.requests, "requests", ACL_UPDATE, "Starting a request");
	(void) IdemNamespaceGet(nsname, true, &ns);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	memset(&r, 0, sizeof(r));
	IdemOwnerScopeBegin(&scope, cat.requests);
	for (;;)
	{
		Datum		args[6];
		char		argnulls[6] = {' ', ' ', fpnull, ' ', ' ', ' '};
		HeapTuple	tup;
		TupleDesc	desc;
		bool		isnull;
		char	   *status;
		pg_uuid_t	owner;
		bool		has_owner;
		bool		lease_expired;

		CHECK_FOR_INTERRUPTS();
		args[0] = IdemKeyDatum(&key);
		args[1] = Int32GetDatum(ns.id);
		args[2] = fingerprint ? PointerGetDatum(fingerprint) : (Datum) 0;
		args[3] = IntervalPGetDatum(lease);

		/* a new key: ours (waits for an in-flight inserter, as a unique key does) */
		if (IdemRequestRun(REQ_INSERT, args, argnulls) != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "could not start request");
		if (SPI_processed == 1)
		{
			IdemBeginStarted(&r);
			break;
		}

		args[2] = IntervalPGetDatum(&ns.ttl);
		if (IdemRequestRun(REQ_SELECT, args, NULL) != SPI_OK_SELECT)
			elog(ERROR, "could not read request");
		if (SPI_processed == 0)
		{
			/* released meanwhile: try again, on a newer snapshot */
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent idem_begin"),
						 errhint("Call idem_begin in its own READ COMMITTED transaction.")));
			continue;
		}
		tup = SPI_tuptable->vals[0];
		desc = SPI_tuptable->tupdesc;
		status = SPI_getvalue(tup, desc, 1);

		/* an expired record counts as absent: start afresh over it */
		if (DatumGetBool(SPI_getbinval(tup, desc, 8, &isnull)))
		{
			args[2] = fingerprint ? PointerGetDatum(fingerprint) : (Datum) 0;
			args[4] = SPI_getbinval(tup, desc, 7, &isnull);
			args[5] = IntervalPGetDatum(&ns.ttl);
			if (IdemRequestRun(REQ_RESTART, args, argnulls) != SPI_OK_UPDATE_RETURNING)
				elog(ERROR, "could not restart request");
			if (SPI_processed == 1)
			{
				IdemBeginStarted(&r);
				break;
			}
			continue;
		}

		/* the same key with another payload: a client bug (HTTP 422) */
		{
			char	   *stored = SPI_getvalue(tup, desc, 3);

			if (fingerprint != NULL && stored != NULL &&
				strcmp(stored, text_to_cstring(fingerprint)) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_IDEM_FINGERPRINT_MISMATCH),
						 errmsg("idempotency key reused with a different fingerprint"),
						 errdetail("Key \"%s\" in namespace \"%s\" was first used with another payload; stored record: %s.",
								   text_to_cstring(id), ns.name, SPI_getvalue(tup, desc, 10)),
						 errhint("A key must identify one request; send a new key for a different request.")));
		}

		r.attempts = DatumGetInt32(SPI_getbinval(tup, desc, 5, &isnull));
		if (strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0)
		{
			Datum		res = SPI_getbinval(tup, desc, 4, &isnull);

			r.status = strcmp(status, "completed") == 0 ? "completed" : "failed";
			r.result = isnull ? (Datum) 0 : SPI_datumTransfer(res, false, -1);
			break;
		}

		/*
		 * In progress under a lease this very transaction took (started,
		 * restarted or taken over): waiting would wait out our own lease,
		 * and a takeover would give our own key a second owner.
		 */
		if (TransactionIdIsCurrentTransactionId(DatumGetTransactionId(SPI_getbinval(tup, desc, 11, &isnull))))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("idempotency key \"%s\" is already held by this transaction",
							text_to_cstring(id)),
					 errdetail("An earlier idem_begin in this transaction started it and has not finished it."),
					 errhint("Use the owner that call returned, and finish the work with idem_complete or idem_fail.")));

		/* in progress: someone else's lease */
		{
			Datum		o = SPI_getbinval(tup, desc, 2, &isnull);

			has_owner = !isnull;
			if (has_owner)
				owner = *DatumGetUUIDP(o);
		}
		r.lease_expires_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 6, &isnull));
		r.has_lease = !isnull;
		lease_expired = DatumGetBool(SPI_getbinval(tup, desc, 9, &isnull));
		if (lease_expired && has_owner)
		{
			/* the owner is gone: take the work over */
			args[2] = fingerprint ? PointerGetDatum(fingerprint) : (Datum) 0;
			args[4] = UUIDPGetDatum(&owner);
			if (IdemRequestRun(REQ_TAKEOVER, args, argnulls) != SPI_OK_UPDATE_RETURNING)
				elog(ERROR, "could not take over request");
			if (SPI_processed == 1)
			{
				IdemBeginStarted(&r);
				break;
			}
			continue;			/* someone else was quicker: look again */
		}
		if (wait != NULL && GetCurrentTimestamp() < deadline)
		{
			long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

			/* a long wait polls many times: keep SPI's memory flat */
			SPI_freetuptable(SPI_tuptable);

			IdemRequestSleep(Max(1, Min(nap, left)));
			nap = Min(nap * 2, 100);
			continue;
		}
		r.status = "in_progress";	/* HTTP 409: when the lease expires is in the record */
		break;
	}

	/* what r points to outlives SPI: a static string, a transferred datum */
	IdemOwnerScopeEnd(&scope);
	memset(nulls, 0, sizeof(nulls));
	values[0] = CStringGetTextDatum(r.status);
	nulls[1] = (strcmp(r.status, "started") != 0);	/* a duplicate never
														 * learns the owner */
	values[1] = nulls[1] ? (Datum) 0 : UUIDPGetDatum(&r.owner);
	values[2] = r.result;
	nulls[2] = (r.result == (Datum) 0);
	values[3] = Int32GetDatum(r.attempts);
	values[4] = TimestampTzGetDatum(r.lease_expires_at);
	nulls[4] = !r.has_lease;
	tupdesc = BlessTupleDesc(tupdesc);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * Finish the attempt owner holds on key: statement which stores value, or
 * releases the key.  A caller that does not hold the attempt gets an error
 * and changes nothing.
 */
static TimestampTz
IdemRequestFinish(FunctionCallInfo fcinfo, int which, Datum value,
				  const char *funcname)
{
	text	   *id = DatumGetTextPP(IdemArgNotNull(fcinfo, 0, "key"));
	pg_uuid_t  *owner = DatumGetUUIDP(IdemArgNotNull(fcinfo, 1, "owner"));
	text	   *nsname;
	IdemKey		key;
	IdemNamespace ns;
	IdemCatalog cat;
	IdemOwnerScope scope;
	Datum		args[4];
	uint64		done;
	TimestampTz lease_expires_at = 0;
	int			expected = which == REQ_RELEASE ? SPI_OK_DELETE :
		which == REQ_EXTEND ? SPI_OK_UPDATE_RETURNING : SPI_OK_UPDATE;

	nsname = DatumGetTextPP(IdemArgNotNull(fcinfo, PG_NARGS() - 1, "namespace"));
	IdemEncodeNamedKey(id, "key", &key);
	IdemValidateNamespace(nsname);
	IdemCheckWritable(funcname);
	cat = IdemGetCatalog();
	IdemCheckTablePrivilege(cat.requests, "requests",
							which == REQ_RELEASE ? ACL_DELETE : ACL_UPDATE,
							which == REQ_EXTEND ? "Extending a lease" : "Finishing a request");
	if (!IdemNamespaceGet(nsname, false, &ns))
		ns.id = -1;

	args[0] = IdemKeyDatum(&key);
	args[1] = Int32GetDatum(ns.id);
	args[2] = UUIDPGetDatum(owner);
	args[3] = value;
	IdemOwnerScopeBegin(&scope, cat.requests);
	if (IdemRequestRun(which, args, NULL) != expected)
		elog(ERROR, "could not finish request");
	done = SPI_processed;
	if (done == 1 && which == REQ_EXTEND)
	{
		bool		isnull;

		lease_expires_at = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
															 SPI_tuptable->tupdesc, 1, &isnull));
	}
	if (done == 0)
	{
		/* say why: gone, finished, or taken over by a newer attempt */
		char	   *status = NULL;
		bool		ours = false;
		int32		attempts = 0;

		args[2] = IntervalPGetDatum(&ns.ttl);
		if (ns.id >= 0 && IdemRequestRun(REQ_SELECT, args, NULL) == SPI_OK_SELECT &&
			SPI_processed == 1)
		{
			HeapTuple	tup = SPI_tuptable->vals[0];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;
			Datum		o = SPI_getbinval(tup, desc, 2, &isnull);

			status = SPI_getvalue(tup, desc, 1);
			ours = !isnull && memcmp(DatumGetUUIDP(o), owner, UUID_LEN) == 0;
			attempts = DatumGetInt32(SPI_getbinval(tup, desc, 5, &isnull));
		}
		/* completing twice with the same owner is a harmless repeat */
		if (!(ours && which == REQ_COMPLETE && status && strcmp(status, "completed") == 0))
			ereport(ERROR,
					(errcode(ERRCODE_IDEM_LEASE_NOT_HELD),
					 errmsg("this attempt does not hold key \"%s\" in namespace \"%s\"",
							text_to_cstring(id), text_to_cstring(nsname)),
					 status == NULL ?
					 errdetail("No request is in progress for the key.") :
					 ours ?
					 errdetail("This attempt already finished the request as %s.", status) :
					 strcmp(status, "in_progress") == 0 ?
					 errdetail("Attempt %d holds the request now: this attempt's lease expired or was released. Nothing was stored.", attempts) :
					 errdetail("Attempt %d finished the request as %s. Nothing was stored.",
							   attempts, status),
					 errhint("Call idem_begin again to see the request's current state.")));
	}
	IdemOwnerScopeEnd(&scope);
	return lease_expires_at;
}

/*
 * idem_extend(key text, owner uuid, lease interval, namespace text)
 * returns timestamptz
 *
 * The heartbeat of a long attempt: the lease owner holds now lasts lease
 * from now.  An owner whose lease ran out may still extend it as long as
 * nobody took the key over (the takeover and the extension serialize on
 * the row); anyone else gets ID004.
 */
Datum
idem_extend(PG_FUNCTION_ARGS)
{
	Interval   *lease = DatumGetIntervalP(IdemArgNotNull(fcinfo, 2, "lease"));

	IdemPositiveInterval(lease, "lease");
	PG_RETURN_TIMESTAMPTZ(IdemRequestFinish(fcinfo, REQ_EXTEND, IntervalPGetDatum(lease),
											"idem_extend()"));
}

/*
 * idem_complete(key text, owner uuid, result jsonb, namespace text)
 * returns void
 */
Datum
idem_complete(PG_FUNCTION_ARGS)
{
	IdemRequestFinish(fcinfo, REQ_COMPLETE, IdemArgNotNull(fcinfo, 2, "result"),
					  "idem_complete()");
	PG_RETURN_VOID();
}

/*
 * idem_fail(key text, owner uuid, error jsonb, retryable boolean,
 *			 namespace text) returns void
 *
 * Retryable: the key is released, and a retry starts afresh.  Otherwise
 * the error is stored and replayed to every retry.
 */
Datum
idem_fail(PG_FUNCTION_ARGS)
{
	Datum		error = IdemArgNotNull(fcinfo, 2, "error");
	bool		retryable = DatumGetBool(IdemArgNotNull(fcinfo, 3, "retryable"));

	IdemRequestFinish(fcinfo, retryable ? REQ_RELEASE : REQ_FAIL, error, "idem_fail()");
	PG_RETURN_VOID();
}
