/*
 * policy.c
 *	  idem_purge_policy_add / idem_purge_policy_remove: user tables the purge
 *	  keeps bounded, such as a hand-made processed-events table.
 *
 * A policy names a table, a time column and a TTL; the purge deletes rows
 * whose time column is older than the TTL, as the table's owner.  Only the
 * table's owner (or a superuser) may add or remove its policy.
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type_d.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "catalog/idem_catalog.h"

PG_FUNCTION_INFO_V1(idem_purge_policy_add);
PG_FUNCTION_INFO_V1(idem_purge_policy_remove);

/* Open a table for a policy change: it must be a table the caller owns */
static Relation
IdemPolicyOpen(FunctionCallInfo fcinfo, const char *funcname)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table must not be null")));
	PreventCommandIfReadOnly(funcname);
	return IdemOpenOwnedTable(PG_GETARG_OID(0), AccessShareLock,
							  "Purge policies apply to plain tables only.");
}

/*
 * idem_purge_policy_add(rel regclass, time_column name, ttl interval)
 * returns void
 *
 * Makes the purge delete rows of rel whose time_column is older than ttl.
 * Adding a policy again replaces it.
 */
Datum
idem_purge_policy_add(PG_FUNCTION_ARGS)
{
	Relation	rel = IdemPolicyOpen(fcinfo, "idem_purge_policy_add()");
	Name		column;
	Interval   *ttl;
	AttrNumber	attno;
	Oid			type;
	IdemCatalog cat;
	Oid			argtypes[3] = {OIDOID, NAMEOID, INTERVALOID};
	Datum		args[3];

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("time column must not be null")));
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("ttl must not be null")));
	column = PG_GETARG_NAME(1);
	ttl = PG_GETARG_INTERVAL_P(2);
	IdemValidateTtl(ttl);

	attno = get_attnum(RelationGetRelid(rel), NameStr(*column));
	if (attno == InvalidAttrNumber || attno < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						NameStr(*column), RelationGetRelationName(rel))));
	type = get_atttype(RelationGetRelid(rel), attno);
	if (type != TIMESTAMPTZOID && type != TIMESTAMPOID && type != DATEOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("time column \"%s\" must be of type timestamptz, timestamp or date",
						NameStr(*column)),
				 errdetail("It is of type %s.", format_type_be(type))));

	cat = IdemGetCatalog();
	args[0] = ObjectIdGetDatum(RelationGetRelid(rel));
	args[1] = NameGetDatum(column);
	args[2] = IntervalPGetDatum(ttl);
	(void) IdemOwnerRun(cat.claims, IDEM_RUN_LATEST,
						"INSERT INTO idempotency.purge_policies (rel, time_column, ttl)"
						" VALUES ($1::pg_catalog.regclass, $2, $3)"
						" ON CONFLICT (rel) DO UPDATE SET time_column = EXCLUDED.time_column,"
						" ttl = EXCLUDED.ttl, added_at = pg_catalog.now()",
						3, argtypes, args, NULL, NULL, NULL);
	table_close(rel, NoLock);	/* held to commit: no DROP may orphan the row */
	PG_RETURN_VOID();
}

/*
 * idem_purge_policy_remove(rel regclass) returns boolean
 *
 * Stops purging rel; false if it had no policy.
 */
Datum
idem_purge_policy_remove(PG_FUNCTION_ARGS)
{
	Relation	rel = IdemPolicyOpen(fcinfo, "idem_purge_policy_remove()");
	IdemCatalog cat = IdemGetCatalog();
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1];
	uint64		removed;

	args[0] = ObjectIdGetDatum(RelationGetRelid(rel));
	removed = IdemOwnerRun(cat.claims, IDEM_RUN_LATEST,
						   "DELETE FROM idempotency.purge_policies"
						   " WHERE rel OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
						   1, argtypes, args, NULL, NULL, NULL);
	table_close(rel, NoLock);
	PG_RETURN_BOOL(removed > 0);
}
