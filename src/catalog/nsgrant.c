/*
 * nsgrant.c
 *	  Per-namespace privileges: idem_namespace_grant, idem_namespace_revoke
 *	  and the check every claim, check and release makes.
 *
 * A namespace with at least one row in idempotency.namespace_grants is
 * restricted: only superusers and roles whose privileges include those of
 * a grantee of the needed privilege ('claim', 'check' or 'release') may
 * act in it.  Namespaces without grants behave as before 1.1.  The table
 * privileges on the claims apply in both cases; the namespace check comes
 * on top, before anything is read or written, so that a refused claimer
 * does not even create the namespace.
 *
 * Grants are keyed by the namespace's name, not its id: a namespace can be
 * restricted before its first claim, and idem_citus_claim's per-shard
 * namespaces ("name" 0x1f "shard") follow the grants of their name.
 *
 * Statements on idempotency.claims and its generations themselves honour
 * the grants through row-level security: the extension's own policies call
 * idem_namespace_allows(ns, privilege), which maps the namespace id to its
 * name's grants (an id no namespace has yet is open to superusers only, so
 * that no claim can be planted for a restricted namespace created later).
 * The claim functions, which bypass the executor, recognise exactly these
 * policies (IdemNsGrantPolicyKind, for claimrel.c) and check the same
 * grants themselves.
 *
 * Every backend caches the whole table (it holds one row per namespace,
 * grantee and privilege, so it is small), read with the latest snapshot
 * like a catalog, plus per namespace the privileges already found for the
 * current user.  The statement trigger on the table sends a relcache
 * invalidation; so that a grant or revoke takes effect at the next
 * statement of every backend even inside a transaction, where no lock
 * acquisition may process invalidations, the first check of each statement
 * (a new statement start time, transaction or executor start) accepts
 * pending invalidation messages.  Role and membership changes drop
 * the cache too.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
#include "nodes/makefuncs.h"
#include "commands/user.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type_d.h"
#include "utils/array.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/parsenodes.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "base/base.h"
#include "namespaces.h"
#include "nsgrant.h"

PG_FUNCTION_INFO_V1(idem_namespace_grant);
PG_FUNCTION_INFO_V1(idem_namespace_revoke);
PG_FUNCTION_INFO_V1(idem_namespace_visible);
PG_FUNCTION_INFO_V1(idem_namespace_allows);

/* What a backend knows of the grants table */
typedef enum IdemNsGrantState
{
	IDEM_GRANTS_UNKNOWN,		/* not read since the last invalidation */
	IDEM_GRANTS_NONE,			/* no grant (or no table: a database at 1.0) */
	IDEM_GRANTS_SOME			/* idem_grants holds the restricted namespaces */
} IdemNsGrantState;

/* A restricted namespace: who holds what in it */
typedef struct IdemNsGrantEntry
{
	char		name[IDEM_MAX_NAMESPACE_BYTES + 1]; /* hash key */
	int			ngrants;
	int			maxgrants;
	Oid		   *roles;			/* grantees */
	uint8	   *privs;			/* and their privileges (IDEM_NSPRIV_*) */
	Oid			memo_user;		/* privileges found held by this user */
	uint8		memo_held;
} IdemNsGrantEntry;

/*
 * A stored namespace id (shard namespaces too), and the grants of its name
 * if it is restricted: for the row policies, which see ids, not names
 */
typedef struct IdemNsGrantIdEntry
{
	int32		nsid;			/* hash key */
	IdemNsGrantEntry *grants;
} IdemNsGrantIdEntry;

static IdemGenCache idem_grants_gen = IDEM_GEN_CACHE_INIT("idempotency namespace grants");
static IdemNsGrantState idem_grants_state = IDEM_GRANTS_UNKNOWN;
static HTAB *idem_grants = NULL;	/* by name */
static HTAB *idem_grants_ids = NULL;	/* by namespace id */
static IdemNsGrantEntry *idem_grants_last = NULL;
static Oid	idem_grants_relid = InvalidOid;
static Oid	idem_grants_ns_relid = InvalidOid;	/* idempotency.namespaces */
static bool idem_grants_statement_only = false; /* read in parallel mode */

static bool IdemNsGrantEntryHeld(IdemNsGrantEntry *e, int priv);

/*
 * The statement whose invalidation messages were last accepted: its start
 * time, its transaction, and the count of executor starts (several
 * statements of one simple-query message share a start time; so do the
 * statements of a PL/pgSQL function)
 */
static TimestampTz idem_grants_stmt = 0;
static LocalTransactionId idem_grants_lxid = InvalidLocalTransactionId;
static uint64 idem_grants_executor_seen = 0;
static uint64 idem_executor_starts = 0;

/* Forget the grants; they are read again at the next check */
static void
IdemNsGrantReset(void)
{
	idem_grants_state = IDEM_GRANTS_UNKNOWN;
	idem_grants = NULL;
	idem_grants_ids = NULL;
	idem_grants_last = NULL;
	idem_grants_statement_only = false;
	IdemGenCacheRetire(&idem_grants_gen);
}

/*
 * Relcache invalidation: of the grants table, of the namespaces (a new
 * namespace may have a restricted name), of every relation, or of any
 * relation while the table is not known (ALTER EXTENSION UPDATE creates it)
 */
static void
IdemNsGrantInvalidate(Oid relid)
{
	if (idem_grants_state == IDEM_GRANTS_UNKNOWN)
		return;
	if (relid == InvalidOid || !OidIsValid(idem_grants_relid) ||
		relid == idem_grants_relid ||
		(relid == idem_grants_ns_relid && idem_grants_state == IDEM_GRANTS_SOME))
		IdemNsGrantReset();
}

/* Roles or memberships changed: what a user holds may have too */
static void
IdemNsGrantRolesChanged(void)
{
	if (idem_grants_state != IDEM_GRANTS_UNKNOWN)
		IdemNsGrantReset();
}

/* Register the invalidation handlers; called from _PG_init */
void
IdemNsGrantInit(void)
{
	IdemInvalOnRelcache(IdemNsGrantInvalidate);
	IdemInvalOnRoles(IdemNsGrantRolesChanged);
}

/* The privilege bit of its SQL name, or 0 */
static int
IdemNsPrivilegeBit(const char *name)
{
	if (strcmp(name, "claim") == 0)
		return IDEM_NSPRIV_CLAIM;
	if (strcmp(name, "check") == 0)
		return IDEM_NSPRIV_CHECK;
	if (strcmp(name, "release") == 0)
		return IDEM_NSPRIV_RELEASE;
	return 0;
}

/* The privilege bit of its SQL name, or an error */
static int
IdemNsPrivilegeParse(const char *name)
{
	int			bit = IdemNsPrivilegeBit(name);

	if (bit != 0)
		return bit;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unrecognized namespace privilege \"%s\"", name),
			 errhint("The privileges are 'claim', 'check' and 'release'.")));
	return 0;					/* keep compiler quiet */
}

/* The SQL name of one privilege bit */
static const char *
IdemNsPrivilegeName(int priv)
{
	switch (priv)
	{
		case IDEM_NSPRIV_CLAIM:
			return "claim";
		case IDEM_NSPRIV_CHECK:
			return "check";
		default:
			return "release";
	}
}

/* The transient state of IdemNsGrantsLoad */
typedef struct IdemNsGrantFill
{
	HTAB	   *hash;			/* by name */
	HTAB	   *ids;			/* by namespace id */
	MemoryContext cxt;
} IdemNsGrantFill;

/* IdemOwnerRun callback: add one row (namespace, grantee, privilege) */
static void
IdemNsGrantAddRow(HeapTuple tuple, TupleDesc desc, void *arg)
{
	IdemNsGrantFill *fill = (IdemNsGrantFill *) arg;
	bool		isnull[3];
	Datum		name = heap_getattr(tuple, 1, desc, &isnull[0]);
	Datum		role = heap_getattr(tuple, 2, desc, &isnull[1]);
	Datum		priv = heap_getattr(tuple, 3, desc, &isnull[2]);
	char	   *key;
	IdemNsGrantEntry *e;
	bool		found;
	int			bit;
	int			i;

	if (isnull[0] || isnull[1] || isnull[2])
		return;					/* the table's NOT NULLs forbid it */
	key = TextDatumGetCString(name);
	if (strlen(key) > IDEM_MAX_NAMESPACE_BYTES)
		return;					/* no claim can be in such a namespace */

	/*
	 * An unknown privilege (the CHECK forbids it) grants nothing, but still
	 * restricts the namespace: rather that than an error in every claim
	 */
	bit = IdemNsPrivilegeBit(TextDatumGetCString(priv));

	e = hash_search(fill->hash, key, HASH_ENTER, &found);
	if (!found)
	{
		e->ngrants = 0;
		e->maxgrants = 4;
		e->roles = MemoryContextAlloc(fill->cxt, sizeof(Oid) * e->maxgrants);
		e->privs = MemoryContextAlloc(fill->cxt, sizeof(uint8) * e->maxgrants);
		e->memo_user = InvalidOid;
		e->memo_held = 0;
	}
	for (i = 0; i < e->ngrants; i++)
	{
		if (e->roles[i] == DatumGetObjectId(role))
		{
			e->privs[i] |= bit;
			return;
		}
	}
	if (e->ngrants == e->maxgrants)
	{
		e->maxgrants *= 2;
		e->roles = repalloc(e->roles, sizeof(Oid) * e->maxgrants);
		e->privs = repalloc(e->privs, sizeof(uint8) * e->maxgrants);
	}
	e->roles[e->ngrants] = DatumGetObjectId(role);
	e->privs[e->ngrants] = bit;
	e->ngrants++;
}

/*
 * IdemOwnerRun callback: map one stored namespace id to its grants, or to
 * none (NULL) if its name is not restricted
 */
static void
IdemNsGrantAddId(HeapTuple tuple, TupleDesc desc, void *arg)
{
	IdemNsGrantFill *fill = (IdemNsGrantFill *) arg;
	bool		isnull[2];
	Datum		nsid = heap_getattr(tuple, 1, desc, &isnull[0]);
	Datum		name = heap_getattr(tuple, 2, desc, &isnull[1]);
	IdemNsGrantEntry *e;
	IdemNsGrantIdEntry *ie;
	char	   *key;
	int32		id;

	if (isnull[0] || isnull[1])
		return;
	key = TextDatumGetCString(name);
	e = strlen(key) > IDEM_MAX_NAMESPACE_BYTES ? NULL :
		hash_search(fill->hash, key, HASH_FIND, NULL);
	id = DatumGetInt32(nsid);
	ie = hash_search(fill->ids, &id, HASH_ENTER, NULL);
	ie->grants = e;
}

/*
 * Read the grants table into a new generation of the cache.  Reads the
 * latest committed state plus this transaction's changes, as the table's
 * owner; looks again if an invalidation arrived meanwhile.
 */
static void
IdemNsGrantsLoad(void)
{
	for (;;)
	{
		uint64		start = IdemInvalCounter();
		IdemCatalog cat = IdemGetCatalog();
		Oid			relid = IdemNamespaceGrantsRelation();
		IdemNsGrantFill fill;
		MemoryContext tmp;
		MemoryContext oldcxt;
		HASHCTL		ctl;

		if (!OidIsValid(relid))
		{
			/* a database still at 1.0 */
			idem_grants_relid = InvalidOid;
			idem_grants_state = IDEM_GRANTS_NONE;
			if (start == IdemInvalCounter())
				return;
			continue;
		}

		IdemGenCacheRetire(&idem_grants_gen);
		fill.cxt = IdemGenCacheContext(&idem_grants_gen);
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = IDEM_MAX_NAMESPACE_BYTES + 1;
		ctl.entrysize = sizeof(IdemNsGrantEntry);
		ctl.hcxt = fill.cxt;
		fill.hash = hash_create("idempotency namespace grants", 16, &ctl,
								HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(int32);
		ctl.entrysize = sizeof(IdemNsGrantIdEntry);
		ctl.hcxt = fill.cxt;
		fill.ids = hash_create("idempotency namespace grant ids", 16, &ctl,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

		tmp = AllocSetContextCreate(CurrentMemoryContext, "idempotency grants load",
									ALLOCSET_SMALL_SIZES);
		oldcxt = MemoryContextSwitchTo(tmp);
		(void) IdemOwnerRun(relid, IDEM_RUN_READ_ONLY | IDEM_RUN_LATEST,
							"SELECT g.namespace, g.grantee::pg_catalog.oid, g.privilege"
							" FROM idempotency.namespace_grants g",
							0, NULL, NULL, NULL, IdemNsGrantAddRow, &fill);
		/* every stored namespace id, for the row policies */
		if (hash_get_num_entries(fill.hash) > 0)
			(void) IdemOwnerRun(relid, IDEM_RUN_READ_ONLY | IDEM_RUN_LATEST,
								"SELECT n.id, pg_catalog.split_part(n.name, E'\\x1f', 1)"
								" FROM idempotency.namespaces n",
								0, NULL, NULL, NULL, IdemNsGrantAddId, &fill);
		MemoryContextSwitchTo(oldcxt);
		MemoryContextDelete(tmp);

		if (start != IdemInvalCounter())
			continue;			/* changed meanwhile: read again */

		idem_grants_relid = relid;
		idem_grants_ns_relid = cat.namespaces;
		idem_grants = fill.hash;
		idem_grants_ids = fill.ids;
		idem_grants_last = NULL;
		idem_grants_state = hash_get_num_entries(fill.hash) > 0 ?
			IDEM_GRANTS_SOME : IDEM_GRANTS_NONE;

		/*
		 * Read under the query's snapshot in parallel mode: good for this
		 * statement only (IdemNsGrantsRefresh), and never past the
		 * transaction
		 */
		if (IsInParallelMode())
		{
			idem_grants_statement_only = true;
			IdemGenCacheResetAtEnd(&idem_grants_gen, IdemNsGrantReset);
		}
		return;
	}
}

/*
 * Make the grants current: once per statement, accept the invalidations
 * other backends sent (a grant or revoke they committed), then read the
 * table if they made the cache stale
 */
static void
IdemNsGrantsRefresh(void)
{
	TimestampTz stmt = GetCurrentStatementStartTimestamp();

	if (stmt != idem_grants_stmt || IdemMyLxid() != idem_grants_lxid ||
		idem_executor_starts != idem_grants_executor_seen)
	{
		idem_grants_stmt = stmt;
		idem_grants_lxid = IdemMyLxid();
		idem_grants_executor_seen = idem_executor_starts;
		if (idem_grants_statement_only)
			IdemNsGrantReset();
		AcceptInvalidationMessages();
	}
	if (idem_grants_state == IDEM_GRANTS_UNKNOWN)
		IdemNsGrantsLoad();
}

/* An executor starts a statement (init.c's ExecutorStart hook) */
void
IdemNsGrantExecutorStart(void)
{
	idem_executor_starts++;
}

/* The grants of a namespace (a user's name: no shard suffix), or NULL */
static IdemNsGrantEntry *
IdemNsGrantFind(const char *name, int len)
{
	IdemNsGrantEntry *e = idem_grants_last;
	char		key[IDEM_MAX_NAMESPACE_BYTES + 1];

	if (idem_grants_state != IDEM_GRANTS_SOME || len > IDEM_MAX_NAMESPACE_BYTES)
		return NULL;
	/* compare the len bytes before name[len]: see IdemNamespaceGetWithTtl */
	if (e != NULL && memcmp(e->name, name, len) == 0 && e->name[len] == '\0')
		return e;
	memcpy(key, name, len);
	key[len] = '\0';
	e = hash_search(idem_grants, key, HASH_FIND, NULL);
	if (e != NULL)
		idem_grants_last = e;
	return e;
}

/*
 * Does the current user hold priv in namespace name (len bytes, possibly
 * with a shard suffix)?  True in a namespace without grants.
 */
bool
IdemNamespacePrivilegeHeld(const char *name, int len, int priv)
{
	const char *sep = memchr(name, IDEM_SHARD_SEP, len);
	IdemNsGrantEntry *e;

	IdemNsGrantsRefresh();
	if (idem_grants_state != IDEM_GRANTS_SOME)
		return true;
	if (sep != NULL)
		len = sep - name;
	e = IdemNsGrantFind(name, len);
	if (e == NULL)
		return true;
	return IdemNsGrantEntryHeld(e, priv);
}

/* Does the current user hold priv in the restricted namespace e? */
static bool
IdemNsGrantEntryHeld(IdemNsGrantEntry *e, int priv)
{
	Oid			user = GetUserId();
	bool		held = false;
	int			i;

	if (e->memo_user == user && (e->memo_held & priv) == priv)
		return true;

	/*
	 * The lookups below may process invalidations, which retire the entry;
	 * its memory lasts until the end of the transaction, and the answer is
	 * that of the grants as they were when this check began.
	 */
	if (superuser_arg(user))
		held = true;
	for (i = 0; !held && i < e->ngrants; i++)
		if ((e->privs[i] & priv) == priv && has_privs_of_role(user, e->roles[i]))
			held = true;
	if (held)
	{
		if (e->memo_user != user)
		{
			e->memo_user = user;
			e->memo_held = 0;
		}
		e->memo_held |= priv;
	}
	return held;
}

/*
 * Raise "permission denied" unless the current user holds priv in the
 * namespace a user named (already validated)
 */
void
IdemCheckNamespacePrivilege(const text *name, int priv)
{
	const char *data = VARDATA_ANY(name);
	int			len = VARSIZE_ANY_EXHDR(name);

	if (IdemNamespacePrivilegeHeld(data, len, priv))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for namespace \"%s\"", text_to_cstring(name)),
			 errdetail("The namespace is restricted, and role \"%s\" holds no \"%s\" privilege in it.",
					   GetUserNameFromId(GetUserId(), false), IdemNsPrivilegeName(priv)),
			 errhint("An administrator grants it with idem_namespace_grant().")));
}

/* Read and check the arguments of idem_namespace_grant and _revoke */
static void
IdemNsGrantArgs(FunctionCallInfo fcinfo, const char *funcname, text **name,
				Oid *role, text **priv)
{
	*name = DatumGetTextPP(IdemArgNotNull(fcinfo, 0, "namespace"));
	*role = DatumGetObjectId(IdemArgNotNull(fcinfo, 1, "role"));
	*priv = DatumGetTextPP(IdemArgNotNull(fcinfo, 2, "privilege"));

	IdemValidateNamespace(*name);
	(void) IdemNsPrivilegeParse(text_to_cstring(*priv));
	PreventCommandIfReadOnly(funcname);

	/*
	 * Lock the role as GRANT does, so that a concurrent DROP ROLE either
	 * sees this grant or has dropped the role before we look
	 */
	LockSharedObject(AuthIdRelationId, *role, 0, AccessShareLock);
	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(*role)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role with OID %u does not exist", *role)));
}

/*
 * Run a statement on idempotency.namespace_grants as the caller, whose
 * privileges on the table are checked as for any statement, against the
 * latest state (a revoke under REPEATABLE READ finds a newer grant);
 * returns the rows it changed
 */
static uint64
IdemNsGrantRun(const char *sql, text *name, Oid role, text *priv)
{
	Oid			argtypes[3] = {TEXTOID, OIDOID, TEXTOID};
	Datum		values[3];

	values[0] = PointerGetDatum(name);
	values[1] = ObjectIdGetDatum(role);
	values[2] = PointerGetDatum(priv);
	return IdemRunAs(GetUserId(), IDEM_RUN_LATEST, sql, 3, argtypes, values,
					 NULL, NULL, NULL);
}

/*
 * idem_namespace_grant(namespace text, role regrole, privilege text)
 *		returns boolean
 *
 * Let role (and the roles that have its privileges) claim, check or
 * release in namespace, which becomes restricted if it was not.  Returns
 * false if role held the privilege already.  Needs INSERT on
 * idempotency.namespace_grants (administrators; EXECUTE is revoked from
 * PUBLIC).
 */
Datum
idem_namespace_grant(PG_FUNCTION_ARGS)
{
	text	   *name;
	Oid			role;
	text	   *priv;

	IdemNsGrantArgs(fcinfo, "idem_namespace_grant()", &name, &role, &priv);
	PG_RETURN_BOOL(IdemNsGrantRun("INSERT INTO idempotency.namespace_grants"
								  " (namespace, grantee, privilege)"
								  " VALUES ($1, $2::pg_catalog.regrole, $3)"
								  " ON CONFLICT DO NOTHING",
								  name, role, priv) > 0);
}

/*
 * idem_namespace_revoke(namespace text, role regrole, privilege text)
 *		returns boolean
 *
 * Take back a privilege idem_namespace_grant gave; returns false if role
 * did not hold it.  The namespace stays restricted while it has any grant.
 * Needs DELETE (and SELECT) on idempotency.namespace_grants.
 */
Datum
idem_namespace_revoke(PG_FUNCTION_ARGS)
{
	text	   *name;
	Oid			role;
	text	   *priv;

	IdemNsGrantArgs(fcinfo, "idem_namespace_revoke()", &name, &role, &priv);
	PG_RETURN_BOOL(IdemNsGrantRun("DELETE FROM idempotency.namespace_grants g"
								  " WHERE g.namespace OPERATOR(pg_catalog.=) $1"
								  " AND g.grantee OPERATOR(pg_catalog.=) $2::pg_catalog.regrole"
								  " AND g.privilege OPERATOR(pg_catalog.=) $3",
								  name, role, priv) > 0);
}

/*
 * idempotency.idem_namespace_visible(name text) returns boolean
 *
 * May the current user check claims in the namespace stored as name (a
 * shard suffix included)?  The filter of the idem_claims view.
 */
Datum
idem_namespace_visible(PG_FUNCTION_ARGS)
{
	text	   *name = PG_GETARG_TEXT_PP(0);

	PG_RETURN_BOOL(IdemNamespacePrivilegeHeld(VARDATA_ANY(name),
											  VARSIZE_ANY_EXHDR(name),
											  IDEM_NSPRIV_CHECK));
}

/*
 * idempotency.idem_namespace_allows(ns integer, privilege text)
 *		returns boolean
 *
 * Does the current user hold privilege in the namespace with id ns?  The
 * expression of the row-level security policies on idempotency.claims, so
 * that a statement on the table itself honours the namespace grants as the
 * functions do.
 */
Datum
idem_namespace_allows(PG_FUNCTION_ARGS)
{
	int32		nsid = PG_GETARG_INT32(0);
	int			priv = IdemNsPrivilegeParse(text_to_cstring(PG_GETARG_TEXT_PP(1)));
	IdemNsGrantIdEntry *ie;

	IdemNsGrantsRefresh();
	if (idem_grants_state != IDEM_GRANTS_SOME)
		PG_RETURN_BOOL(true);
	ie = hash_search(idem_grants_ids, &nsid, HASH_FIND, NULL);

	/*
	 * An id no namespace has (yet): a claim planted there could belong to
	 * a restricted namespace created later, so only superusers may
	 */
	if (ie == NULL)
		PG_RETURN_BOOL(superuser());
	if (ie->grants == NULL)
		PG_RETURN_BOOL(true);
	PG_RETURN_BOOL(IdemNsGrantEntryHeld(ie->grants, priv));
}

/*
 * Is expr idempotency.idem_namespace_allows(<the ns column>, 'priv')?
 */
static bool
IdemNsGrantIsOurCheck(Expr *expr, AttrNumber att_ns, const char *priv)
{
	FuncExpr   *f;
	Var		   *v;
	Const	   *c;
	char	   *name;

	if (expr == NULL || !IsA(expr, FuncExpr))
		return false;
	f = (FuncExpr *) expr;
	if (list_length(f->args) != 2 || !IsA(linitial(f->args), Var) ||
		!IsA(lsecond(f->args), Const))
		return false;
	v = linitial(f->args);
	c = lsecond(f->args);
	if (v->varattno != att_ns || v->varlevelsup != 0 ||
		c->consttype != TEXTOID || c->constisnull)
		return false;
	name = get_func_name(f->funcid);
	if (name == NULL || strcmp(name, "idem_namespace_allows") != 0 ||
		get_func_namespace(f->funcid) != get_namespace_oid(IDEM_SCHEMA_NAME, true))
		return false;
	return strcmp(TextDatumGetCString(c->constvalue), priv) == 0;
}

/* The extension's own policies on the claims, as the install script makes them */
static const struct
{
	char		polcmd;			/* ACL_*_CHR */
	const char *name;
	const char *qual;			/* the privilege of USING, or NULL: none */
	const char *with_check;		/* the privilege of WITH CHECK, or NULL */
	int			kind;			/* IDEM_POLICY_* */
}			idem_own_policies[] = {
	{ACL_SELECT_CHR, "claims_namespace_check", "check", NULL, IDEM_POLICY_SELECT},
	{ACL_INSERT_CHR, "claims_namespace_claim", NULL, "claim", IDEM_POLICY_INSERT},
	{ACL_DELETE_CHR, "claims_namespace_release", "release", NULL, IDEM_POLICY_DELETE},
	{ACL_UPDATE_CHR, "claims_namespace_update", "claim", "claim", IDEM_POLICY_UPDATE},
};

/* Is expr what an own policy has there: nothing if priv is NULL, else our check */
static bool
IdemNsGrantPolicyExprIs(Expr *expr, AttrNumber att_ns, const char *priv)
{
	if (priv == NULL)
		return expr == NULL;
	return IdemNsGrantIsOurCheck(expr, att_ns, priv);
}

/*
 * Which of the extension's own row-level security policies on the claims
 * is p (IDEM_POLICY_*), or 0 if it is someone else's.  Ours are permissive,
 * for PUBLIC, and call idem_namespace_allows with the privilege their
 * command needs.
 */
int
IdemNsGrantPolicyKind(RowSecurityPolicy *p, AttrNumber att_ns)
{
	size_t		i;

	if (!p->permissive || p->hassublinks || ARR_NDIM(p->roles) != 1 ||
		ARR_DIMS(p->roles)[0] != 1 || ((Oid *) ARR_DATA_PTR(p->roles))[0] != ACL_ID_PUBLIC)
		return 0;
	for (i = 0; i < lengthof(idem_own_policies); i++)
		if (p->polcmd == idem_own_policies[i].polcmd &&
			strcmp(p->policy_name, idem_own_policies[i].name) == 0 &&
			IdemNsGrantPolicyExprIs(p->qual, att_ns, idem_own_policies[i].qual) &&
			IdemNsGrantPolicyExprIs(p->with_check_qual, att_ns, idem_own_policies[i].with_check))
			return idem_own_policies[i].kind;
	return 0;
}

/*
 * The OID of idempotency.namespace_grants if the extension, at 1.1 or
 * later, is installed in this database; else InvalidOid
 */
static Oid
IdemNsGrantsTableIfInstalled(void)
{
	if (!IdemExtensionPresent() || !OidIsValid(get_namespace_oid(IDEM_SCHEMA_NAME, true)))
		return InvalidOid;
	return IdemNamespaceGrantsRelation();
}

/* IdemOwnerRun callback: keep the first column (text) of the only row */
static void
IdemNsGrantKeepText(HeapTuple tuple, TupleDesc desc, void *arg)
{
	bool		isnull;
	Datum		d = heap_getattr(tuple, 1, desc, &isnull);

	*(char **) arg = isnull ? NULL : TextDatumGetCString(d);
}

/*
 * DROP ROLE (object_access_hook, after DROP ROLE's own permission checks):
 * refuse to drop a role that holds namespace privileges in this database,
 * as PostgreSQL refuses one that holds privileges on objects, so that no
 * grant is left to a role that no longer exists.  The role is locked first,
 * as DROP ROLE locks it next, so a concurrent idem_namespace_grant (which
 * locks it too) is either seen here or finds the role gone.  Other
 * databases' grants are not visible here; a grant to a dropped role
 * matches no one.
 */
static void
IdemNsGrantDropRole(Oid role)
{
	Oid			grants = IdemNsGrantsTableIfInstalled();
	Datum		arg = ObjectIdGetDatum(role);
	Oid			argtype = OIDOID;
	char	   *example = NULL;

	if (!OidIsValid(grants))
		return;
	LockSharedObject(AuthIdRelationId, role, 0, AccessExclusiveLock);
	if (IdemOwnerRun(grants, IDEM_RUN_READ_ONLY | IDEM_RUN_LATEST,
					 "SELECT g.namespace FROM idempotency.namespace_grants g"
					 " WHERE g.grantee OPERATOR(pg_catalog.=) $1::pg_catalog.regrole"
					 " ORDER BY g.namespace LIMIT 1",
					 1, &argtype, &arg, NULL, IdemNsGrantKeepText, &example) > 0)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("role \"%s\" cannot be dropped because it holds namespace privileges",
						GetUserNameFromId(role, false)),
				 errdetail("It holds privileges in namespace \"%s\" in the current database.",
						   example ? example : "?"),
				 errhint("Revoke them with idem_namespace_revoke(), or run DROP OWNED BY in this database.")));
}

/* For the object_access_hook (init.c): the drop of a role */
void
IdemNsGrantObjectAccess(ObjectAccessType access, Oid classId, Oid objectId)
{
	if (access == OAT_DROP && classId == AuthIdRelationId)
		IdemNsGrantDropRole(objectId);
}

/*
 * After DROP OWNED BY, which revokes the roles' privileges on this
 * database's objects: revoke their namespace privileges too.  DROP OWNED
 * has checked that the caller has the privileges of each role.
 */
static void
IdemNsGrantAfterDropOwned(DropOwnedStmt *stmt)
{
	Oid			grants = IdemNsGrantsTableIfInstalled();
	List	   *roles;
	ListCell   *lc;

	if (!OidIsValid(grants))
		return;

	/*
	 * A role may DROP OWNED BY itself; that must not open a namespace whose
	 * only grantee it is to everyone.  Only those who may delete grants
	 * revoke them here; for the others they stay, and DROP ROLE says so.
	 */
	if (pg_class_aclcheck(grants, GetUserId(), ACL_DELETE) != ACLCHECK_OK)
	{
		ereport(NOTICE,
				(errmsg("namespace privileges of the roles are kept"),
				 errdetail("Revoking them needs DELETE on idempotency.namespace_grants.")));
		return;
	}
	roles = roleSpecsToIds(stmt->roles);
	foreach(lc, roles)
	{
		Datum		arg = ObjectIdGetDatum(lfirst_oid(lc));
		Oid			argtype = OIDOID;

		(void) IdemOwnerRun(grants, IDEM_RUN_LATEST,
							"DELETE FROM idempotency.namespace_grants g"
							" WHERE g.grantee OPERATOR(pg_catalog.=) $1::pg_catalog.regrole",
							1, &argtype, &arg, NULL, NULL, NULL);
	}
}

/* The utility hook's part (init.c): after the statement ran */
void
IdemNsGrantAfterUtility(Node *parsetree)
{
	if (IsA(parsetree, DropOwnedStmt))
		IdemNsGrantAfterDropOwned((DropOwnedStmt *) parsetree);
}
