/*
 * token.c
 *	  Single-use tokens against double submits: idem_token_issue and
 *	  idem_token_consume.
 *
 * The seed articles' token mechanism: a form or a client gets a token when
 * it renders, and the submit consumes it; a double click consumes nothing
 * the second time.  Consuming is one DELETE of the token's row, so it is
 * atomic: of two concurrent consumers the second waits for the first and
 * finds the row gone (or, if the first rolls back, takes it).  A token
 * gives true exactly once, and false afterwards, after its expiry, or for
 * another scope.  Expired tokens are purged like expired claims.
 */
#include "postgres.h"

#include "catalog/pg_type_d.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "base/base.h"
#include "catalog/idem_catalog.h"

PG_FUNCTION_INFO_V1(idem_token_issue);
PG_FUNCTION_INFO_V1(idem_token_consume);

/* A non-NULL, non-empty scope within the namespace-name bound */
static text *
IdemTokenScope(FunctionCallInfo fcinfo, int argno)
{
	text	   *scope = DatumGetTextPP(IdemArgNotNull(fcinfo, argno, "scope"));

	IdemValidateName("scope", VARDATA_ANY(scope), VARSIZE_ANY_EXHDR(scope),
					 IDEM_MAX_NAMESPACE_BYTES);
	return scope;
}

/* Copy the token a RETURNING row holds into arg */
static void
IdemTokenCopy(HeapTuple tuple, TupleDesc desc, void *arg)
{
	bool		isnull;

	memcpy(arg, DatumGetUUIDP(SPI_getbinval(tuple, desc, 1, &isnull)), sizeof(pg_uuid_t));
}

/*
 * idem_token_issue(scope text, ttl interval) returns uuid
 */
Datum
idem_token_issue(PG_FUNCTION_ARGS)
{
	text	   *scope = IdemTokenScope(fcinfo, 0);
	Interval   *ttl;
	IdemCatalog cat;
	Oid			argtypes[2] = {TEXTOID, INTERVALOID};
	Datum		args[2];
	pg_uuid_t  *token;

	ttl = DatumGetIntervalP(IdemArgNotNull(fcinfo, 1, "ttl"));
	IdemValidateTtl(ttl);
	IdemCheckWritable("idem_token_issue()");
	cat = IdemGetCatalog();
	IdemCheckTablePrivilege(cat.tokens, "tokens", ACL_INSERT, "Issuing a token");

	args[0] = PointerGetDatum(scope);
	args[1] = IntervalPGetDatum(ttl);
	token = palloc(sizeof(pg_uuid_t));
	if (IdemOwnerRun(cat.tokens, 0,
					 "INSERT INTO idempotency.tokens (token, scope, expires_at)"
					 " VALUES (gen_random_uuid(), $1, clock_timestamp() + $2)"
					 " RETURNING token", 2, argtypes, args, NULL,
					 IdemTokenCopy, token) != 1)
		elog(ERROR, "could not issue token");
	PG_RETURN_UUID_P(token);
}

/*
 * idem_token_consume(token uuid, scope text) returns boolean
 *
 * True exactly once per token; false for a used, expired, unknown or
 * other-scope token.  A token of another scope is not consumed.
 */
Datum
idem_token_consume(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *token;
	text	   *scope;
	IdemCatalog cat;
	Oid			argtypes[2] = {UUIDOID, TEXTOID};
	Datum		args[2];
	bool		consumed;

	token = DatumGetUUIDP(IdemArgNotNull(fcinfo, 0, "token"));
	scope = IdemTokenScope(fcinfo, 1);
	IdemCheckWritable("idem_token_consume()");
	cat = IdemGetCatalog();
	IdemCheckTablePrivilege(cat.tokens, "tokens", ACL_DELETE, "Consuming a token");

	args[0] = UUIDPGetDatum(token);
	args[1] = PointerGetDatum(scope);
	consumed = IdemOwnerRun(cat.tokens, 0,
							"DELETE FROM idempotency.tokens"
							" WHERE token = $1 AND scope = $2 AND expires_at > clock_timestamp()",
							2, argtypes, args, NULL, NULL, NULL) == 1;
	PG_RETURN_BOOL(consumed);
}
