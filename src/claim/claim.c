/*
 * claim.c
 *	  The SQL claim functions: idem_claim, idem_try_claim, idem_claim_many,
 *	  idem_claimed, idem_release, idem_claims_import, idem_citus_claim and
 *	  idem_citus_release.
 *
 * These functions validate their arguments, check the caller's privileges
 * and hand the work to claimstore.c.  They are not STRICT, so that a NULL
 * argument gets a clear error rather than a silent NULL result.
 *
 * idem_claim, idem_try_claim, idem_claimed, idem_release and
 * idem_claim_many also take uuid ids (entry points named *_uuid), which
 * drivers pass for their UUID types: a uuid is encoded as its canonical
 * text is (claimkey.c), so both forms name the same claim.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "claim.h"
#include "store/store.h"
#include "catalog/idem_catalog.h"

PG_FUNCTION_INFO_V1(idem_claim);
PG_FUNCTION_INFO_V1(idem_try_claim);
PG_FUNCTION_INFO_V1(idem_claim_many);
PG_FUNCTION_INFO_V1(idem_claimed);
PG_FUNCTION_INFO_V1(idem_release);
PG_FUNCTION_INFO_V1(idem_claims_import);
PG_FUNCTION_INFO_V1(idem_citus_claim);
PG_FUNCTION_INFO_V1(idem_citus_release);
PG_FUNCTION_INFO_V1(idem_claim_uuid);
PG_FUNCTION_INFO_V1(idem_try_claim_uuid);
PG_FUNCTION_INFO_V1(idem_claim_many_uuid);
PG_FUNCTION_INFO_V1(idem_claimed_uuid);
PG_FUNCTION_INFO_V1(idem_release_uuid);

static Datum IdemClaimMany(FunctionCallInfo fcinfo, bool uuid_ids);

/* citus/'s checks, registered at init */
static IdemClaimCluster idem_claim_cluster;

/* Register what a claim asks of a Citus cluster; called from _PG_init */
void
IdemClaimSetCluster(const IdemClaimCluster *cluster)
{
	idem_claim_cluster = *cluster;
}

/* A plain claim of nsname: refused where Citus wants the shard's claim */
void
IdemClaimCheckCluster(const text *nsname)
{
	idem_claim_cluster.check_plain_claim(nsname);
}

/*
 * The namespace privilege an action needs, from the table privilege it
 * needs on the claims: claim (INSERT), check (SELECT) or release (DELETE)
 */
static inline int
IdemNsPrivilegeOfMode(AclMode mode)
{
	if (mode == ACL_SELECT)
		return IDEM_NSPRIV_CHECK;
	if (mode == ACL_DELETE)
		return IDEM_NSPRIV_RELEASE;
	return IDEM_NSPRIV_CLAIM;
}

/*
 * Read the (event_id, namespace) arguments every function here starts
 * with, the id a uuid if uuid_id, validate them, and check that the caller
 * may do what funcname does: write (if funcname is not NULL) with
 * privilege mode on the claims.  Returns false if the namespace does not
 * exist and create is false.
 */
static bool
IdemKeyArgs(FunctionCallInfo fcinfo, bool uuid_id, const char *funcname, AclMode mode,
			bool create, IdemKey *key, IdemNamespace *ns)
{
	Datum		id = IdemArgNotNull(fcinfo, 0, "event id");
	text	   *nsname = DatumGetTextPP(IdemArgNotNull(fcinfo, 1, "namespace"));

	if (uuid_id)
		IdemEncodeUuidKey(DatumGetUUIDP(id), key);
	else
		IdemEncodeKey(DatumGetTextPP(id), key);
	IdemValidateNamespace(nsname);
	if (funcname != NULL)
		IdemCheckWritable(funcname);
	IdemCheckClaimsPrivilege(mode);
	IdemCheckNamespacePrivilege(nsname, IdemNsPrivilegeOfMode(mode));
	return IdemNamespaceGet(nsname, create, ns);
}

/* Claim key in ns, checked already: the store's work of every claim function */
static IdemClaimOutcome
IdemClaimKey(IdemKey *key, IdemNamespace *ns, text *fingerprint, bool nowait)
{
	IdemStore	store;
	IdemClaimOutcome outcome;

	IdemClaimCachePrefetch(ns->id, &key->hdr);
	IdemStoreOpen(&store, IDEM_OP_CLAIM, false);
	outcome = IdemStoreClaim(&store, ns, &key->hdr, fingerprint, nowait);
	IdemStoreClose(&store);
	return outcome;
}

/* Release key in ns, checked already */
static bool
IdemReleaseKey(IdemKey *key, IdemNamespace *ns)
{
	IdemStore	store;
	bool		result;

	IdemStoreOpen(&store, IDEM_OP_RELEASE, false);
	result = IdemStoreRelease(&store, ns, &key->hdr);
	IdemStoreClose(&store);
	return result;
}

/* Shared body of idem_claim and idem_try_claim */
static IdemClaimOutcome
IdemClaimOne(FunctionCallInfo fcinfo, bool uuid_id, bool nowait, const char *funcname)
{
	text	   *fingerprint = NULL;
	IdemKey		key;
	IdemNamespace ns;

	(void) IdemKeyArgs(fcinfo, uuid_id, funcname, ACL_INSERT, true, &key, &ns);
	IdemClaimCheckCluster(PG_GETARG_TEXT_PP(1));
	if (PG_NARGS() > 2 && !PG_ARGISNULL(2))
		fingerprint = PG_GETARG_TEXT_PP(2);
	return IdemClaimKey(&key, &ns, fingerprint, nowait);
}

/* Shared body of the idem_claimed forms */
static bool
IdemClaimedOne(FunctionCallInfo fcinfo, bool uuid_id)
{
	IdemKey		key;
	IdemNamespace ns;
	IdemStore	store;
	bool		result;

	if (!IdemKeyArgs(fcinfo, uuid_id, NULL, ACL_SELECT, false, &key, &ns))
		return false;
	IdemStoreOpen(&store, IDEM_OP_CHECK, false);
	result = IdemStoreIsClaimed(&store, &ns, &key.hdr);
	IdemStoreClose(&store);
	return result;
}

/* Shared body of the idem_release forms */
static bool
IdemReleaseOne(FunctionCallInfo fcinfo, bool uuid_id)
{
	IdemKey		key;
	IdemNamespace ns;

	if (!IdemKeyArgs(fcinfo, uuid_id, "idem_release()", ACL_DELETE, false, &key, &ns))
		return false;
	return IdemReleaseKey(&key, &ns);
}

/*
 * idem_claim(event_id text, namespace text, fingerprint text) returns boolean
 *
 * True if this transaction is the first to claim the id in the namespace;
 * false for a duplicate.  Waits for an in-flight claimer.
 */
Datum
idem_claim(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(IdemClaimOne(fcinfo, false, false, "idem_claim()") == IDEM_CLAIM_NEW);
}

/* idem_claim(event_id uuid, namespace text, fingerprint text) returns boolean */
Datum
idem_claim_uuid(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(IdemClaimOne(fcinfo, true, false, "idem_claim()") == IDEM_CLAIM_NEW);
}

/*
 * idem_try_claim(event_id text, namespace text, fingerprint text)
 * returns boolean
 *
 * As idem_claim, but returns NULL at once instead of waiting.
 */
Datum
idem_try_claim(PG_FUNCTION_ARGS)
{
	IdemClaimOutcome outcome = IdemClaimOne(fcinfo, false, true, "idem_try_claim()");

	if (outcome == IDEM_CLAIM_BUSY)
		PG_RETURN_NULL();
	PG_RETURN_BOOL(outcome == IDEM_CLAIM_NEW);
}

/*
 * idem_try_claim(event_id uuid, namespace text, fingerprint text)
 * returns boolean
 */
Datum
idem_try_claim_uuid(PG_FUNCTION_ARGS)
{
	IdemClaimOutcome outcome = IdemClaimOne(fcinfo, true, true, "idem_try_claim()");

	if (outcome == IDEM_CLAIM_BUSY)
		PG_RETURN_NULL();
	PG_RETURN_BOOL(outcome == IDEM_CLAIM_NEW);
}

/* One id of a batch, with its position in the input array */
typedef struct IdemBatchItem
{
	bytea	   *key;
	int			index;
} IdemBatchItem;

/* qsort order: key bytes, then input position */
static int
IdemBatchItemCompare(const void *a, const void *b)
{
	const IdemBatchItem *ia = (const IdemBatchItem *) a;
	const IdemBatchItem *ib = (const IdemBatchItem *) b;
	int			alen = VARSIZE(ia->key) - VARHDRSZ;
	int			blen = VARSIZE(ib->key) - VARHDRSZ;
	int			cmp;

	cmp = memcmp(VARDATA(ia->key), VARDATA(ib->key), Min(alen, blen));
	if (cmp == 0)
		cmp = (alen > blen) - (alen < blen);
	if (cmp == 0)
		cmp = (ia->index > ib->index) - (ia->index < ib->index);
	return cmp;
}

/*
 * idem_claim_many(event_ids text[], namespace text) returns setof text
 *
 * Claims every id of the array and returns those this call newly claimed,
 * in array order.  Repeats inside the array count once.  Ids are claimed in
 * key order, so two batches that overlap cannot deadlock each other.
 */
Datum
idem_claim_many(PG_FUNCTION_ARGS)
{
	return IdemClaimMany(fcinfo, false);
}

/* idem_claim_many(event_ids uuid[], namespace text) returns setof uuid */
Datum
idem_claim_many_uuid(PG_FUNCTION_ARGS)
{
	return IdemClaimMany(fcinfo, true);
}

/* Shared body of the idem_claim_many forms; uuid_ids: the array is uuid[] */
static Datum
IdemClaimMany(FunctionCallInfo fcinfo, bool uuid_ids)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ArrayType  *ids;
	text	   *nsname;
	Datum	   *elems;
	bool	   *elemnulls;
	int			nelems;
	int			i;
	IdemBatchItem *items;
	bool	   *claimed;
	IdemNamespace ns;
	IdemStore	store;
	MemoryContext workcxt;
	MemoryContext oldcxt;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("event ids must not be null")));
	nsname = DatumGetTextPP(IdemArgNotNull(fcinfo, 1, "namespace"));
	ids = PG_GETARG_ARRAYTYPE_P(0);
	if (ARR_NDIM(ids) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("event ids must be a one-dimensional array")));
	IdemValidateNamespace(nsname);
	IdemCheckWritable("idem_claim_many()");
	IdemCheckClaimsPrivilege(ACL_INSERT);
	IdemCheckNamespacePrivilege(nsname, IDEM_NSPRIV_CLAIM);

	IdemInitMaterializedSRF(fcinfo);

	workcxt = AllocSetContextCreate(CurrentMemoryContext, "idem_claim_many",
									ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(workcxt);

	if (uuid_ids)
		deconstruct_array(ids, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR,
						  &elems, &elemnulls, &nelems);
	else
		deconstruct_array(ids, TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &elemnulls, &nelems);
	items = palloc(sizeof(IdemBatchItem) * Max(nelems, 1));
	claimed = palloc0(sizeof(bool) * Max(nelems, 1));
	for (i = 0; i < nelems; i++)
	{
		IdemKey		key;

		if (elemnulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("event id must not be null"),
					 errdetail("Element %d of the array is null.", i + 1)));
		if (uuid_ids)
			IdemEncodeUuidKey(DatumGetUUIDP(elems[i]), &key);
		else
			IdemEncodeKey(DatumGetTextPP(elems[i]), &key);
		items[i].key = palloc(VARSIZE(&key.hdr));
		memcpy(items[i].key, &key, VARSIZE(&key.hdr));
		items[i].index = i;
	}

	if (nelems > 0)
	{
		qsort(items, nelems, sizeof(IdemBatchItem), IdemBatchItemCompare);

		IdemClaimCheckCluster(nsname);
		(void) IdemNamespaceGet(nsname, true, &ns);
		IdemStoreOpen(&store, IDEM_OP_CLAIM, nelems > 1);
		for (i = 0; i < nelems; i++)
		{
			/* the first of equal keys has the lowest input position */
			if (i > 0 &&
				VARSIZE(items[i].key) == VARSIZE(items[i - 1].key) &&
				memcmp(VARDATA(items[i].key), VARDATA(items[i - 1].key),
					   VARSIZE(items[i].key) - VARHDRSZ) == 0)
				continue;
			if (IdemStoreClaim(&store, &ns, items[i].key, NULL, false) == IDEM_CLAIM_NEW)
				claimed[items[i].index] = true;
		}
		IdemStoreClose(&store);
	}

	MemoryContextSwitchTo(oldcxt);
	for (i = 0; i < nelems; i++)
	{
		Datum		value;
		bool		isnull = false;

		if (!claimed[i])
			continue;
		value = elems[i];
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &isnull);
	}
	MemoryContextDelete(workcxt);
	return (Datum) 0;
}

/*
 * idem_claimed(event_id text, namespace text) returns boolean
 *
 * Read-only check: does a live claim exist?  Works on a standby too.
 */
Datum
idem_claimed(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(IdemClaimedOne(fcinfo, false));
}

/* idem_claimed(event_id uuid, namespace text) returns boolean */
Datum
idem_claimed_uuid(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(IdemClaimedOne(fcinfo, true));
}

/*
 * idem_release(event_id text, namespace text) returns boolean
 *
 * Removes a claim so that the event can be processed again: the path for a
 * temporary failure.  True if a live claim was removed.
 */
Datum
idem_release(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(IdemReleaseOne(fcinfo, false));
}

/* idem_release(event_id uuid, namespace text) returns boolean */
Datum
idem_release_uuid(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(IdemReleaseOne(fcinfo, true));
}

/*
 * idem_claims_import(event_id text, namespace text, claimed_at timestamptz,
 *					  fingerprint_hash bigint) returns boolean
 *
 * Resharding: store a claim exported from another node (the idem_claims
 * view's namespace, event_id, claimed_at and fingerprint_hash), keeping its
 * claimed_at, so that it expires when it would have, and its fingerprint.
 * True if imported; false if a live claim is here already (it wins), or if
 * the claim has expired by this namespace's TTL (nothing to keep).  Waits
 * for an in-flight claimer, as a claim does.  Admin only: it can give a
 * claim any past claimed_at.
 */
Datum
idem_claims_import(PG_FUNCTION_ARGS)
{
	IdemKey		key;
	IdemNamespace ns;
	IdemClaimRow row;

	(void) IdemKeyArgs(fcinfo, false, "idem_claims_import()", ACL_INSERT, true, &key, &ns);
	row.claimed_at = DatumGetTimestampTz(IdemArgNotNull(fcinfo, 2, "claimed_at"));
	row.has_fp = PG_NARGS() > 3 && !PG_ARGISNULL(3);
	row.fp = row.has_fp ? PG_GETARG_INT64(3) : 0;
	if (TIMESTAMP_NOT_FINITE(row.claimed_at) || row.claimed_at > GetCurrentTransactionStartTimestamp())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("claimed_at must be a finite time in the past"),
				 errdetail("An imported claim keeps the time it was first claimed.")));

	PG_RETURN_BOOL(IdemClaimImport(&key.hdr, &ns, &row));
}

/*
 * Store one exported claim (key, claimed_at and fingerprint in row) in
 * namespace ns, unless it has expired here.  True if it was stored.
 */
bool
IdemClaimImport(const bytea *key, IdemNamespace *ns, const IdemClaimRow *row)
{
	IdemStore	store;
	IdemClaimOutcome outcome;

	IdemStoreOpen(&store, IDEM_OP_CLAIM, false);
	if (IdemNamespaceExpiry(ns, row->claimed_at) < store.now)
		outcome = IDEM_CLAIM_DUPLICATE; /* expired here: nothing to import */
	else
		outcome = IdemStoreImport(&store, ns, key, row);
	IdemStoreClose(&store);
	return outcome == IDEM_CLAIM_NEW;
}

/*
 * Read the (event_id, namespace, shard) arguments of idem_citus_claim and
 * idem_citus_release, check them and the caller's privilege, take the
 * shard's lock, and find the shard's namespace
 */
static void
IdemShardKeyArgs(FunctionCallInfo fcinfo, const char *funcname, AclMode mode,
				 IdemKey *key, IdemNamespace *ns)
{
	text	   *id = DatumGetTextPP(IdemArgNotNull(fcinfo, 0, "event id"));
	text	   *parent = DatumGetTextPP(IdemArgNotNull(fcinfo, 1, "namespace"));
	int64		shard = DatumGetInt64(IdemArgNotNull(fcinfo, 2, "shard"));

	IdemEncodeKey(id, key);
	IdemValidateNamespace(parent);
	IdemCheckWritable(funcname);
	IdemCheckClaimsPrivilege(mode);
	IdemCheckNamespacePrivilege(parent, IdemNsPrivilegeOfMode(mode));
	idem_claim_cluster.shard_enter(shard);
	idem_claim_cluster.shard_namespace(parent, shard, ns);
}

/*
 * idem_citus_claim(event_id text, namespace text, shard bigint,
 *					fingerprint text) returns boolean
 *
 * idem_claim for a handler on a Citus worker, given the shard of the row it
 * writes (get_shard_id_for_distribution_column): the claim is kept with
 * that shard, and moves with it (citusshard.c).  Refuses with a
 * serialization failure if the shard is no longer on this node.
 */
Datum
idem_citus_claim(PG_FUNCTION_ARGS)
{
	text	   *fingerprint = NULL;
	IdemKey		key;
	IdemNamespace ns;

	if (PG_NARGS() > 3 && !PG_ARGISNULL(3))
		fingerprint = PG_GETARG_TEXT_PP(3);
	IdemShardKeyArgs(fcinfo, "idem_citus_claim()", ACL_INSERT, &key, &ns);
	PG_RETURN_BOOL(IdemClaimKey(&key, &ns, fingerprint, false) == IDEM_CLAIM_NEW);
}

/*
 * idem_citus_release(event_id text, namespace text, shard bigint)
 * returns boolean
 *
 * idem_release for a claim made with idem_citus_claim: under the shard's
 * lock, on the node that holds the shard, so that a move never copies a
 * claim its source releases.
 */
Datum
idem_citus_release(PG_FUNCTION_ARGS)
{
	IdemKey		key;
	IdemNamespace ns;

	IdemShardKeyArgs(fcinfo, "idem_citus_release()", ACL_DELETE, &key, &ns);
	PG_RETURN_BOOL(IdemReleaseKey(&key, &ns));
}
