/*
 * catalog.c
 *	  Finding the extension's internal relations.
 *
 * The claim functions run hundreds of thousands of times per second, so the
 * OIDs of the internal relations are looked up once per backend and kept
 * until a relcache or schema invalidation says they may have changed (the
 * extension was dropped and re-created, ...).
 * Callers get a copy, so an invalidation processed in the middle of an
 * operation never changes the OIDs under its feet.
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/objectaddress.h"
#include "catalog/pg_class.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/rel.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "catalog.h"
#include "compat.h"
#include "idempotency.h"
#include "inval.h"

PG_FUNCTION_INFO_V1(idem_table_changed);

static IdemCatalog idem_catalog;
static bool idem_catalog_valid = false;

/*
 * Privileges on one internal table already checked for one user: for the
 * hot paths, whose checks would otherwise read the table's ACL each call.
 * Forgotten when the user changes, on a relcache invalidation of the table
 * (GRANT and REVOKE send one) and on role changes.
 */
typedef struct IdemAclMemo
{
	Oid			user;
	Oid			relid;
	AclMode		granted;
} IdemAclMemo;

static IdemAclMemo idem_acl_claims;
static IdemAclMemo idem_acl_watermarks;

/* Has user been found to hold mode on relid? */
static inline bool
IdemAclMemoHas(const IdemAclMemo *m, Oid user, Oid relid, AclMode mode)
{
	return m->user == user && m->relid == relid && (m->granted & mode) == mode;
}

/* Remember that user holds mode on relid */
static void
IdemAclMemoAdd(IdemAclMemo *m, Oid user, Oid relid, AclMode mode)
{
	if (m->user != user || m->relid != relid)
	{
		m->user = user;
		m->relid = relid;
		m->granted = 0;
	}
	m->granted |= mode;
}

/* Forget what was checked on relid (InvalidOid: on any table) */
static inline void
IdemAclMemoForget(IdemAclMemo *m, Oid relid)
{
	if (relid == InvalidOid || relid == m->relid)
		m->granted = 0;
}

/* Relcache invalidation: drop the OIDs when one of our relations changes */
static void
IdemCatalogInvalidate(Oid relid)
{
	/* GRANT and REVOKE: whatever the OIDs known here */
	IdemAclMemoForget(&idem_acl_claims, relid);
	IdemAclMemoForget(&idem_acl_watermarks, relid);

	if (!idem_catalog_valid ||
		relid == InvalidOid ||
		relid == idem_catalog.claims ||
		relid == idem_catalog.namespaces ||
		relid == idem_catalog.namespaces_name ||
		relid == idem_catalog.machines ||
		relid == idem_catalog.bindings ||
		relid == idem_catalog.requests ||
		relid == idem_catalog.tokens ||
		relid == idem_catalog.watermarks ||
		relid == idem_catalog.namespace_grants)
		idem_catalog_valid = false;
}

/*
 * Might relid be one of the internal relations?  For invalidation
 * callbacks, which cannot look anything up: true whenever the OIDs are not
 * known in this backend.
 */
bool
IdemCatalogHolds(Oid relid)
{
	if (!idem_catalog_valid)
		return true;
	return relid == idem_catalog.claims || relid == idem_catalog.namespaces ||
		relid == idem_catalog.machines || relid == idem_catalog.bindings ||
		relid == idem_catalog.requests || relid == idem_catalog.tokens ||
		(OidIsValid(idem_catalog.watermarks) && relid == idem_catalog.watermarks) ||
		(OidIsValid(idem_catalog.namespace_grants) && relid == idem_catalog.namespace_grants);
}

/* A schema changed: ours may have gone */
static void
IdemCatalogSchemasChanged(void)
{
	idem_catalog_valid = false;
	IdemAclMemoForget(&idem_acl_claims, InvalidOid);
	IdemAclMemoForget(&idem_acl_watermarks, InvalidOid);
}

/* Role or membership changes may change what a user may do */
static void
IdemCatalogRolesChanged(void)
{
	IdemAclMemoForget(&idem_acl_claims, InvalidOid);
	IdemAclMemoForget(&idem_acl_watermarks, InvalidOid);
}

/* Register the invalidation handlers; called from _PG_init */
void
IdemCatalogInit(void)
{
	IdemInvalOnRelcache(IdemCatalogInvalidate);
	IdemInvalOnSchemas(IdemCatalogSchemasChanged);
	IdemInvalOnRoles(IdemCatalogRolesChanged);
}

/* Look up one internal relation by name, or fail with a clear error */
static Oid
IdemLookupRelation(Oid schema, const char *relname)
{
	Oid			relid = get_relname_relid(relname, schema);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idempotency internal relation \"%s.%s\" is missing",
						IDEM_SCHEMA_NAME, relname),
				 errhint("Re-create the extension with DROP EXTENSION idempotency; CREATE EXTENSION idempotency.")));
	return relid;
}

/* Is the extension installed in the current database? */
bool
IdemExtensionPresent(void)
{
	return OidIsValid(get_extension_oid("idempotency", true));
}

/*
 * Return the OIDs of the internal relations, looking them up if needed.
 *
 * Raises an error when the extension is not installed in this database.
 */
IdemCatalog
IdemGetCatalog(void)
{
	uint64		start;

	if (idem_catalog_valid)
		return idem_catalog;

	/*
	 * The syscache lookups below may process invalidation messages; if one
	 * arrives meanwhile, what we found may be stale, so look again.
	 */
	do
	{
		IdemCatalog found;

		start = IdemInvalCounter();
		memset(&found, 0, sizeof(found));
		found.schema = get_namespace_oid(IDEM_SCHEMA_NAME, true);
		if (!OidIsValid(found.schema) || !IdemExtensionPresent())
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("extension \"idempotency\" is not installed in this database"),
					 errhint("Run CREATE EXTENSION idempotency.")));
		found.claims = IdemLookupRelation(found.schema, "claims");
		found.namespaces = IdemLookupRelation(found.schema, "namespaces");
		found.namespaces_name = IdemLookupRelation(found.schema, "namespaces_name_idx");
		found.namespace_seq = IdemLookupRelation(found.schema, "namespace_id_seq");
		found.machines = IdemLookupRelation(found.schema, "machines");
		found.bindings = IdemLookupRelation(found.schema, "machine_bindings");
		found.requests = IdemLookupRelation(found.schema, "requests");
		found.tokens = IdemLookupRelation(found.schema, "tokens");
		/* from 1.1 on; a database still at 1.0 has none */
		found.watermarks = get_relname_relid("watermarks", found.schema);
		found.namespace_grants = get_relname_relid("namespace_grants", found.schema);
		idem_catalog = found;
	} while (start != IdemInvalCounter());

	idem_catalog_valid = true;
	return idem_catalog;
}

/*
 * Check that the current user holds mode (one privilege) on the internal
 * table relid, named table; action says what needs it, for the detail.
 */
void
IdemCheckTablePrivilege(Oid relid, const char *table, AclMode mode,
						const char *action)
{
	Oid			userid = GetUserId();
	const char *priv;

	if (pg_class_aclcheck(relid, userid, mode) == ACLCHECK_OK)
		return;
	priv = mode == ACL_INSERT ? "INSERT" :
		mode == ACL_UPDATE ? "UPDATE" :
		mode == ACL_DELETE ? "DELETE" : "SELECT";
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for table %s.%s", IDEM_SCHEMA_NAME, table),
			 errdetail("%s requires the %s privilege on %s.%s.",
					   action, priv, IDEM_SCHEMA_NAME, table),
			 errhint("Ask an administrator to run GRANT %s ON %s.%s TO %s.",
					 priv, IDEM_SCHEMA_NAME, table,
					 quote_identifier(GetUserNameFromId(userid, false)))));
}

/*
 * Check that the current user holds mode on idempotency.claims.
 *
 * Access to claims is governed by ordinary table privileges, checked as the
 * caller: INSERT to claim, SELECT to check, DELETE to release.  The answer
 * is remembered until the user changes or an invalidation arrives (GRANT
 * and REVOKE invalidate the table; role changes invalidate pg_authid and
 * pg_auth_members), since claims are the hot path.
 */
void
IdemCheckClaimsPrivilege(AclMode mode)
{
	Oid			userid = GetUserId();
	Oid			relid = IdemGetCatalog().claims;

	if (IdemAclMemoHas(&idem_acl_claims, userid, relid, mode))
		return;
	IdemCheckTablePrivilege(relid, "claims", mode,
							mode == ACL_INSERT ? "Claiming" :
							mode == ACL_DELETE ? "Releasing" : "Checking");
	IdemAclMemoAdd(&idem_acl_claims, userid, relid, mode);
}

/*
 * Check that the current user holds SELECT, INSERT and UPDATE on
 * idempotency.watermarks (relid), which advancing a mark needs, as
 * INSERT ... ON CONFLICT DO UPDATE ... WHERE would.  Cached as for the
 * claims: GRANT and REVOKE invalidate the table's relcache entry, and role
 * changes the roles' syscache.
 */
void
IdemCheckWatermarksPrivilege(Oid relid)
{
	const AclMode need = ACL_SELECT | ACL_INSERT | ACL_UPDATE;
	Oid			userid = GetUserId();

	if (IdemAclMemoHas(&idem_acl_watermarks, userid, relid, need))
		return;
	if (pg_class_aclmask(relid, userid, need, ACLMASK_ALL) != need)
	{
		/* say which is missing */
		IdemCheckTablePrivilege(relid, "watermarks", ACL_SELECT, "Advancing");
		IdemCheckTablePrivilege(relid, "watermarks", ACL_INSERT, "Advancing");
		IdemCheckTablePrivilege(relid, "watermarks", ACL_UPDATE, "Advancing");
	}
	IdemAclMemoAdd(&idem_acl_watermarks, userid, relid, need);
}

/*
 * The OID of an internal table that 1.1 added, known as known, or
 * InvalidOid in a database still at 1.0.  Looked up again while unknown:
 * an ALTER EXTENSION UPDATE creates the table without invalidating the
 * OIDs this backend knows.
 */
static Oid
IdemLateRelation(Oid known, Oid schema, const char *relname)
{
	if (OidIsValid(known))
		return known;
	return get_relname_relid(relname, schema);
}

/* The OID of idempotency.watermarks, InvalidOid in a database at 1.0 */
Oid
IdemWatermarksRelation(void)
{
	IdemCatalog cat = IdemGetCatalog();

	return IdemLateRelation(cat.watermarks, cat.schema, "watermarks");
}

/* The OID of idempotency.namespace_grants, InvalidOid in a database at 1.0 */
Oid
IdemNamespaceGrantsRelation(void)
{
	IdemCatalog cat = IdemGetCatalog();

	return IdemLateRelation(cat.namespace_grants, cat.schema, "namespace_grants");
}

/*
 * Open and lock a relation a user named by a regclass argument, which may
 * be 0 or a relation dropped since: an error for the user (42P01), not an
 * internal one.
 */
Relation
IdemOpenRelationArg(Oid relid, LOCKMODE lockmode)
{
	Relation	rel = OidIsValid(relid) ? try_relation_open(relid, lockmode) : NULL;

	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	return rel;
}

/* The owner of a relation */
Oid
IdemRelationOwner(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}

/*
 * Open a user's table for configuring it (a binding, a purge policy): the
 * caller must own it, and it must be a plain table; detail says why.
 */
Relation
IdemOpenOwnedTable(Oid relid, LOCKMODE lockmode, const char *detail)
{
	Relation	rel = IdemOpenRelationArg(relid, lockmode);

	if (!IdemClassOwnercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(rel->rd_rel->relkind),
					   RelationGetRelationName(rel));
	if (rel->rd_rel->relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", RelationGetRelationName(rel)),
				 errdetail("%s", detail)));
	return rel;
}

/*
 * idempotency.idem_table_changed() returns trigger
 *
 * Statement trigger on the internal tables whose rows backends cache
 * (namespaces, machines, machine bindings): any change, through our
 * functions or by hand, makes every backend drop its cached copy once the
 * change commits, through a relcache invalidation of the table.
 */
Datum
idem_table_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("idem_table_changed() must be called as a trigger")));

	CacheInvalidateRelcacheByRelid(RelationGetRelid(trigdata->tg_relation));
	return PointerGetDatum(NULL);
}
