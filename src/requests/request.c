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
 *	                a fingerprint that differs: an error that names the key
 *	                and nothing of the stored request (HTTP 422).
 *	 idem_complete  stores the result (JSON, an HTTP response or both), if
 *	                the caller's owner still holds it.
 *	 idem_fail      stores a permanent error, or releases the key so that a
 *	                retry starts afresh.
 *	 idem_request_forget  an administrator's delete of a stored request.
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
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
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
PG_FUNCTION_INFO_V1(idem_request_forget);

/* The statements, prepared once per backend and schema */
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
	REQ_FORGET,
	REQ_NPLANS
};

/*
 * Each statement is a template with two %s, filled for the schema the
 * database has: 1.1's requests table has the HTTP response and the
 * heartbeat; 1.0's (a server running this library before ALTER EXTENSION
 * UPDATE) has neither, and its SQL functions never pass a response.
 */
typedef struct IdemRequestStmt
{
	const char *sql;
	const char *fill[2][2];		/* [has_http][placeholder] */
	int			nargs;
	Oid			types[7];
} IdemRequestStmt;

static const IdemRequestStmt idem_request_stmts[REQ_NPLANS] = {
	/* REQ_INSERT: key, ns, fingerprint, lease */
	{"INSERT INTO idempotency.requests"
		" (key, ns, fingerprint, status, owner, attempts, lease_expires_at, created_at%s)"
		" VALUES ($1, $2, $3, 'in_progress', gen_random_uuid(), 1, clock_timestamp() + $4, now()%s)"
		" ON CONFLICT (key, ns) DO NOTHING"
		" RETURNING owner, attempts, lease_expires_at",
		{{"", ""}, {", heartbeat_at", ", clock_timestamp()"}},
	4, {BYTEAOID, INT4OID, TEXTOID, INTERVALOID}},
	/* REQ_SELECT: key, ns, ttl */
	{"SELECT status, owner, fingerprint, result, attempts, lease_expires_at, created_at,"
		"       " IDEM_REQUEST_EXPIRED_SQL("", "$3") " AS expired,"
		"       lease_expires_at <= clock_timestamp() AS lease_expired,"
		"       xmin, %s%s"
		"  FROM idempotency.requests WHERE key = $1 AND ns = $2",
		{{"NULL::integer, NULL::jsonb, NULL::bytea, created_at", ""},
		{"response_status, response_headers, response_body,", " coalesce(heartbeat_at, created_at)"}},
	3, {BYTEAOID, INT4OID, INTERVALOID}},
	/* REQ_RESTART: key, ns, fingerprint, lease, observed created_at, ttl */
	{"UPDATE idempotency.requests SET status = 'in_progress', owner = gen_random_uuid(),"
		"       attempts = 1, fingerprint = $3, result = NULL, created_at = now(),"
		"       completed_at = NULL, lease_expires_at = clock_timestamp() + $4%s%s"
		" WHERE key = $1 AND ns = $2 AND created_at = $5"
		"   AND " IDEM_REQUEST_EXPIRED_SQL("", "$6")
		" RETURNING owner, attempts, lease_expires_at",
		{{"", ""}, {", response_status = NULL, response_headers = NULL, response_body = NULL",
		", heartbeat_at = clock_timestamp()"}},
	6, {BYTEAOID, INT4OID, TEXTOID, INTERVALOID, TIMESTAMPTZOID, INTERVALOID}},
	/* REQ_TAKEOVER: key, ns, fingerprint, lease, observed owner */
	{"UPDATE idempotency.requests SET owner = gen_random_uuid(), attempts = attempts + 1,"
		"       fingerprint = coalesce(fingerprint, $3), lease_expires_at = clock_timestamp() + $4%s%s"
		" WHERE key = $1 AND ns = $2 AND owner = $5 AND status = 'in_progress'"
		"   AND lease_expires_at <= clock_timestamp()"
		" RETURNING owner, attempts, lease_expires_at",
		{{"", ""}, {", heartbeat_at = clock_timestamp()", ""}},
	5, {BYTEAOID, INT4OID, TEXTOID, INTERVALOID, UUIDOID}},
	/* REQ_COMPLETE: key, ns, owner, result, response status, headers, body */
	{"UPDATE idempotency.requests SET status = 'completed', result = $4,"
		"       completed_at = now(), lease_expires_at = NULL%s%s"
		" WHERE key = $1 AND ns = $2 AND owner = $3 AND status = 'in_progress'",
		{{"", ""}, {", response_status = $5, response_headers = $6,", " response_body = $7"}},
	7, {BYTEAOID, INT4OID, UUIDOID, JSONBOID, INT4OID, JSONBOID, BYTEAOID}},
	/* REQ_FAIL: key, ns, owner, error, response status, headers, body */
	{"UPDATE idempotency.requests SET status = 'failed', result = $4,"
		"       completed_at = now(), lease_expires_at = NULL%s%s"
		" WHERE key = $1 AND ns = $2 AND owner = $3 AND status = 'in_progress'",
		{{"", ""}, {", response_status = $5, response_headers = $6,", " response_body = $7"}},
	7, {BYTEAOID, INT4OID, UUIDOID, JSONBOID, INT4OID, JSONBOID, BYTEAOID}},
	/* REQ_RELEASE: key, ns, owner */
	{"DELETE FROM idempotency.requests"
		" WHERE key = $1 AND ns = $2 AND owner = $3 AND status = 'in_progress'%s%s",
		{{"", ""}, {"", ""}},
	3, {BYTEAOID, INT4OID, UUIDOID}},
	/* REQ_EXTEND: key, ns, owner, lease */
	{"UPDATE idempotency.requests SET lease_expires_at = clock_timestamp() + $4%s%s"
		" WHERE key = $1 AND ns = $2 AND owner = $3 AND status = 'in_progress'"
		" RETURNING lease_expires_at",
		{{"", ""}, {", heartbeat_at = clock_timestamp()", ""}},
	4, {BYTEAOID, INT4OID, UUIDOID, INTERVALOID}},
	/* REQ_FORGET: key, ns */
	{"DELETE FROM idempotency.requests WHERE key = $1 AND ns = $2%s%s",
		{{"", ""}, {"", ""}},
	2, {BYTEAOID, INT4OID}}
};

/* Columns of REQ_SELECT's row */
#define REQ_COL_STATUS			1
#define REQ_COL_OWNER			2
#define REQ_COL_FINGERPRINT		3
#define REQ_COL_RESULT			4
#define REQ_COL_ATTEMPTS		5
#define REQ_COL_LEASE			6
#define REQ_COL_CREATED			7
#define REQ_COL_EXPIRED			8
#define REQ_COL_LEASE_EXPIRED	9
#define REQ_COL_XMIN			10
#define REQ_COL_RESP_STATUS		11
#define REQ_COL_RESP_HEADERS	12
#define REQ_COL_RESP_BODY		13
#define REQ_COL_PROGRESS_AT		14

static SPIPlanPtr idem_request_plans[2][REQ_NPLANS];

/* The shortest Retry-After hint idem_begin gives, in microseconds */
#define IDEM_RETRY_AFTER_MIN_USECS	(100 * 1000)

/*
 * Does this database's requests table have 1.1's columns?  A syscache
 * lookup: the schema changes only with ALTER EXTENSION UPDATE.
 */
static bool
IdemRequestsHaveHttp(Oid requests)
{
	return get_attnum(requests, "heartbeat_at") != InvalidAttrNumber;
}

/* Run statement which with args; call between IdemOwnerScopeBegin/End */
static int
IdemRequestRun(bool http, int which, Datum *args, const char *nulls)
{
	const IdemRequestStmt *stmt = &idem_request_stmts[which];

	if (idem_request_plans[http][which] == NULL)
	{
		char	   *sql = psprintf(stmt->sql, stmt->fill[http][0], stmt->fill[http][1]);
		SPIPlanPtr	plan = SPI_prepare(sql, stmt->nargs, (Oid *) stmt->types);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		pfree(sql);
		idem_request_plans[http][which] = plan;
	}
	return SPI_execute_plan(idem_request_plans[http][which], args, nulls, false, 0);
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
	bool		has_response;
	int32		response_status;
	Datum		response_headers;	/* jsonb, or 0 */
	Datum		response_body;	/* bytea, or 0 */
	bool		has_retry_after;
	int64		retry_after_usecs;
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

/* A nullable varlena column of row tup, copied out of SPI's memory, or 0 */
static Datum
IdemRequestColumn(HeapTuple tup, TupleDesc desc, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tup, desc, col, &isnull);

	return isnull ? (Datum) 0 : SPI_datumTransfer(d, false, -1);
}

/*
 * The Retry-After hint of an in-flight request: as long as the owner has
 * been at it since it started or last extended its lease (an owner that
 * finishes in 200 ms is retried after about that), at least 100 ms, and
 * never past the lease, after which a retry takes the work over.
 */
static int64
IdemRetryAfter(TimestampTz progress_at, TimestampTz lease_expires_at)
{
	TimestampTz now = GetCurrentTimestamp();
	int64		since = now - progress_at;
	int64		left = lease_expires_at - now;

	return Max(IDEM_RETRY_AFTER_MIN_USECS, Min(since, left));
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
 *			  (status, owner, result, attempts, lease_expires_at
 *			   [1.1: response_status, response_headers, response_body,
 *			   retry_after])
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
	bool		http;
	TupleDesc	tupdesc;
	Datum		values[9];
	bool		nulls[9];
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
	/* 1.0's function returns the first five columns */
	if (tupdesc->natts != 5 && tupdesc->natts != 9)
		elog(ERROR, "idem_begin must return 5 or 9 columns");
	http = IdemRequestsHaveHttp(cat.requests);

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
		if (IdemRequestRun(http, REQ_INSERT, args, argnulls) != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "could not start request");
		if (SPI_processed == 1)
		{
			IdemBeginStarted(&r);
			break;
		}

		args[2] = IntervalPGetDatum(&ns.ttl);
		if (IdemRequestRun(http, REQ_SELECT, args, NULL) != SPI_OK_SELECT)
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
		status = SPI_getvalue(tup, desc, REQ_COL_STATUS);

		/* an expired record counts as absent: start afresh over it */
		if (DatumGetBool(SPI_getbinval(tup, desc, REQ_COL_EXPIRED, &isnull)))
		{
			args[2] = fingerprint ? PointerGetDatum(fingerprint) : (Datum) 0;
			args[4] = SPI_getbinval(tup, desc, REQ_COL_CREATED, &isnull);
			args[5] = IntervalPGetDatum(&ns.ttl);
			if (IdemRequestRun(http, REQ_RESTART, args, argnulls) != SPI_OK_UPDATE_RETURNING)
				elog(ERROR, "could not restart request");
			if (SPI_processed == 1)
			{
				IdemBeginStarted(&r);
				break;
			}
			continue;
		}

		/*
		 * The same key with another payload: a client bug (HTTP 422).  The
		 * detail carries nothing of the stored request: when two clients'
		 * keys collide, it is the other one's.
		 */
		{
			char	   *stored = SPI_getvalue(tup, desc, REQ_COL_FINGERPRINT);

			if (fingerprint != NULL && stored != NULL &&
				strcmp(stored, text_to_cstring(fingerprint)) != 0)
			{
				IdemStatsCount(ns.stats, IDEM_STAT_REQUEST_MISMATCHES);
				ereport(ERROR,
						(errcode(ERRCODE_IDEM_FINGERPRINT_MISMATCH),
						 errmsg("idempotency key reused with a different fingerprint"),
						 errdetail("Key \"%s\" in namespace \"%s\" was first used with another payload.",
								   text_to_cstring(id), ns.name),
						 errhint("A key must identify one request; send a new key for a different request.")));
			}
		}

		r.attempts = DatumGetInt32(SPI_getbinval(tup, desc, REQ_COL_ATTEMPTS, &isnull));
		if (strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0)
		{
			r.status = strcmp(status, "completed") == 0 ? "completed" : "failed";
			r.result = IdemRequestColumn(tup, desc, REQ_COL_RESULT);
			r.response_status = DatumGetInt32(SPI_getbinval(tup, desc, REQ_COL_RESP_STATUS, &isnull));
			r.has_response = !isnull;
			r.response_headers = IdemRequestColumn(tup, desc, REQ_COL_RESP_HEADERS);
			r.response_body = IdemRequestColumn(tup, desc, REQ_COL_RESP_BODY);
			IdemStatsCount(ns.stats, IDEM_STAT_REQUEST_REPLAYS);
			break;
		}

		/*
		 * In progress under a lease this very transaction took (started,
		 * restarted or taken over): waiting would wait out our own lease,
		 * and a takeover would give our own key a second owner.
		 */
		if (TransactionIdIsCurrentTransactionId(DatumGetTransactionId(SPI_getbinval(tup, desc, REQ_COL_XMIN, &isnull))))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("idempotency key \"%s\" is already held by this transaction",
							text_to_cstring(id)),
					 errdetail("An earlier idem_begin in this transaction started it and has not finished it."),
					 errhint("Use the owner that call returned, and finish the work with idem_complete or idem_fail.")));

		/* in progress: someone else's lease */
		{
			Datum		o = SPI_getbinval(tup, desc, REQ_COL_OWNER, &isnull);

			has_owner = !isnull;
			if (has_owner)
				owner = *DatumGetUUIDP(o);
		}
		r.lease_expires_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, REQ_COL_LEASE, &isnull));
		r.has_lease = !isnull;
		lease_expired = DatumGetBool(SPI_getbinval(tup, desc, REQ_COL_LEASE_EXPIRED, &isnull));
		if (lease_expired && has_owner)
		{
			/* the owner is gone: take the work over */
			args[2] = fingerprint ? PointerGetDatum(fingerprint) : (Datum) 0;
			args[4] = UUIDPGetDatum(&owner);
			if (IdemRequestRun(http, REQ_TAKEOVER, args, argnulls) != SPI_OK_UPDATE_RETURNING)
				elog(ERROR, "could not take over request");
			if (SPI_processed == 1)
			{
				IdemBeginStarted(&r);
				IdemStatsCount(ns.stats, IDEM_STAT_REQUEST_TAKEOVERS);
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
		r.status = "in_progress";	/* HTTP 409, retried after the hint */
		if (r.has_lease)
		{
			TimestampTz progress_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, REQ_COL_PROGRESS_AT, &isnull));

			r.has_retry_after = true;
			r.retry_after_usecs = IdemRetryAfter(progress_at, r.lease_expires_at);
		}
		IdemStatsCount(ns.stats, IDEM_STAT_REQUEST_IN_FLIGHT);
		break;
	}
	if (strcmp(r.status, "started") == 0)
		IdemStatsCount(ns.stats, IDEM_STAT_REQUEST_BEGINS);

	/* what r points to outlives SPI: a static string, transferred datums */
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
	values[5] = Int32GetDatum(r.response_status);
	nulls[5] = !r.has_response;
	values[6] = r.response_headers;
	nulls[6] = (r.response_headers == (Datum) 0);
	values[7] = r.response_body;
	nulls[7] = (r.response_body == (Datum) 0);
	nulls[8] = !r.has_retry_after;
	if (r.has_retry_after)
	{
		Interval   *iv = palloc0(sizeof(Interval));

		iv->time = r.retry_after_usecs;
		values[8] = IntervalPGetDatum(iv);
	}
	tupdesc = BlessTupleDesc(tupdesc);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * An HTTP response to store: status, headers (a JSON object of strings)
 * and body, the arguments from first on of 1.1's idem_complete and
 * idem_fail; 1.0's have none.  Checks them, and fills args and nulls from
 * index 4 on.  Returns whether a response was given.
 */
static bool
IdemResponseArgs(FunctionCallInfo fcinfo, int first, Datum *args, char *nulls)
{
	int			i;

	for (i = 0; i < 3; i++)
	{
		bool		given = PG_NARGS() > first + i && !PG_ARGISNULL(first + i);

		nulls[4 + i] = given ? ' ' : 'n';
		args[4 + i] = given ? PG_GETARG_DATUM(first + i) : (Datum) 0;
	}
	if (nulls[4] == 'n')
	{
		if (nulls[5] == ' ' || nulls[6] == ' ')
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("response_status must not be null when response headers or a body are given")));
		return false;
	}
	{
		int32		code = DatumGetInt32(args[4]);

		if (code < 100 || code > 599)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("response_status must be between 100 and 599"),
					 errdetail("It is %d.", code)));
	}
	if (nulls[5] == ' ')
	{
		Jsonb	   *headers = DatumGetJsonbP(args[5]);
		JsonbIterator *it;
		JsonbValue	v;
		JsonbIteratorToken tok;

		if (!JB_ROOT_IS_OBJECT(headers) || JB_ROOT_IS_SCALAR(headers))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("response_headers must be a JSON object"),
					 errhint("Map each header name to its value, as in {\"content-type\": \"application/json\"}.")));
		it = JsonbIteratorInit(&headers->root);
		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			if (tok == WJB_VALUE && v.type != jbvString)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("response_headers must map each header name to a string")));
		}
		args[5] = PointerGetDatum(headers);
	}
	return true;
}

/*
 * Finish the attempt owner holds on key: statement which stores value (and
 * a response), or releases the key.  A caller that does not hold the
 * attempt gets an error and changes nothing.
 */
static TimestampTz
IdemRequestFinish(FunctionCallInfo fcinfo, int which, int nsarg, Datum *args,
				  char *nulls, const char *funcname)
{
	text	   *id = DatumGetTextPP(IdemArgNotNull(fcinfo, 0, "key"));
	pg_uuid_t  *owner = DatumGetUUIDP(IdemArgNotNull(fcinfo, 1, "owner"));
	text	   *nsname;
	IdemKey		key;
	IdemNamespace ns;
	IdemCatalog cat;
	IdemOwnerScope scope;
	uint64		done;
	bool		http;
	TimestampTz lease_expires_at = 0;
	int			expected = which == REQ_RELEASE ? SPI_OK_DELETE :
		which == REQ_EXTEND ? SPI_OK_UPDATE_RETURNING : SPI_OK_UPDATE;

	nsname = DatumGetTextPP(IdemArgNotNull(fcinfo, nsarg, "namespace"));
	IdemEncodeNamedKey(id, "key", &key);
	IdemValidateNamespace(nsname);
	IdemCheckWritable(funcname);
	cat = IdemGetCatalog();
	IdemCheckTablePrivilege(cat.requests, "requests",
							which == REQ_RELEASE ? ACL_DELETE : ACL_UPDATE,
							which == REQ_EXTEND ? "Extending a lease" : "Finishing a request");
	if (!IdemNamespaceGet(nsname, false, &ns))
	{
		ns.id = -1;
		ns.stats = NULL;
	}
	http = IdemRequestsHaveHttp(cat.requests);

	args[0] = IdemKeyDatum(&key);
	args[1] = Int32GetDatum(ns.id);
	args[2] = UUIDPGetDatum(owner);
	IdemOwnerScopeBegin(&scope, cat.requests);
	if (IdemRequestRun(http, which, args, nulls) != expected)
		elog(ERROR, "could not finish request");
	done = SPI_processed;
	if (done == 1 && which == REQ_EXTEND)
	{
		bool		isnull;

		lease_expires_at = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
															 SPI_tuptable->tupdesc, 1, &isnull));
	}
	if (done == 1 && (which == REQ_FAIL || which == REQ_RELEASE))
		IdemStatsCount(ns.stats, IDEM_STAT_REQUEST_FAILURES);
	if (done == 0)
	{
		/* say why: gone, finished, or taken over by a newer attempt */
		char	   *status = NULL;
		bool		ours = false;
		int32		attempts = 0;

		args[2] = IntervalPGetDatum(&ns.ttl);
		if (ns.id >= 0 && IdemRequestRun(http, REQ_SELECT, args, NULL) == SPI_OK_SELECT &&
			SPI_processed == 1)
		{
			HeapTuple	tup = SPI_tuptable->vals[0];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;
			Datum		o = SPI_getbinval(tup, desc, REQ_COL_OWNER, &isnull);

			status = SPI_getvalue(tup, desc, REQ_COL_STATUS);
			ours = !isnull && memcmp(DatumGetUUIDP(o), owner, UUID_LEN) == 0;
			attempts = DatumGetInt32(SPI_getbinval(tup, desc, REQ_COL_ATTEMPTS, &isnull));
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
	Datum		args[4];

	IdemPositiveInterval(lease, "lease");
	args[3] = IntervalPGetDatum(lease);
	PG_RETURN_TIMESTAMPTZ(IdemRequestFinish(fcinfo, REQ_EXTEND, 3, args, NULL,
											"idem_extend()"));
}

/*
 * idem_complete(key text, owner uuid, result jsonb, namespace text
 *				 [1.1: response_status integer, response_headers jsonb,
 *				 response_body bytea]) returns void
 *
 * Needs a result, a response or both.
 */
Datum
idem_complete(PG_FUNCTION_ARGS)
{
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	bool		response = IdemResponseArgs(fcinfo, 4, args, nulls);

	if (PG_ARGISNULL(2) && !response)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("idem_complete needs a result or a response_status")));
	nulls[3] = PG_ARGISNULL(2) ? 'n' : ' ';
	args[3] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	IdemRequestFinish(fcinfo, REQ_COMPLETE, 3, args, nulls, "idem_complete()");
	PG_RETURN_VOID();
}

/*
 * idem_fail(key text, owner uuid, error jsonb, retryable boolean,
 *			 namespace text [1.1: response_status integer, response_headers
 *			 jsonb, response_body bytea]) returns void
 *
 * Retryable: the key is released, and a retry starts afresh; an error or
 * response given is not stored.  Otherwise the error and response are
 * stored and replayed to every retry.
 */
Datum
idem_fail(PG_FUNCTION_ARGS)
{
	bool		retryable = DatumGetBool(IdemArgNotNull(fcinfo, 3, "retryable"));
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};

	(void) IdemResponseArgs(fcinfo, 5, args, nulls);
	nulls[3] = PG_ARGISNULL(2) ? 'n' : ' ';
	args[3] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	IdemRequestFinish(fcinfo, retryable ? REQ_RELEASE : REQ_FAIL, 4, args,
					  retryable ? NULL : nulls, "idem_fail()");
	PG_RETURN_VOID();
}

/*
 * idem_request_forget(key text, namespace text) returns boolean
 *
 * An administrator's delete of a stored request, whatever its state: the
 * next idem_begin with the key starts afresh.  An owner still at work
 * finds, at idem_complete, that it no longer holds the key (ID004).
 * Needs EXECUTE (revoked from PUBLIC) and DELETE on idempotency.requests.
 */
Datum
idem_request_forget(PG_FUNCTION_ARGS)
{
	text	   *id = DatumGetTextPP(IdemArgNotNull(fcinfo, 0, "key"));
	text	   *nsname = DatumGetTextPP(IdemArgNotNull(fcinfo, 1, "namespace"));
	IdemKey		key;
	IdemNamespace ns;
	IdemCatalog cat;
	IdemOwnerScope scope;
	Datum		args[2];
	bool		forgot;

	IdemEncodeNamedKey(id, "key", &key);
	IdemValidateNamespace(nsname);
	IdemCheckWritable("idem_request_forget()");
	cat = IdemGetCatalog();
	IdemCheckTablePrivilege(cat.requests, "requests", ACL_DELETE, "Forgetting a request");
	if (!IdemNamespaceGet(nsname, false, &ns))
		PG_RETURN_BOOL(false);

	args[0] = IdemKeyDatum(&key);
	args[1] = Int32GetDatum(ns.id);
	IdemOwnerScopeBegin(&scope, cat.requests);
	if (IdemRequestRun(IdemRequestsHaveHttp(cat.requests), REQ_FORGET, args, NULL) != SPI_OK_DELETE)
		elog(ERROR, "could not forget request");
	forgot = SPI_processed > 0;
	IdemOwnerScopeEnd(&scope);
	if (forgot)
		IdemStatsCount(ns.stats, IDEM_STAT_REQUEST_FORGETS);
	PG_RETURN_BOOL(forgot);
}
