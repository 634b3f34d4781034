/*
 * claimrel.c
 *	  The claims table as the direct claim path sees it: its columns, its
 *	  indexes, and whatever the path must honour or refuse.
 *
 * claimstore.c writes idempotency.claims without the executor, for speed.
 * That is only sound while the table is what the path expects, and a DBA
 * may change it: add an index (maintained through ExecInsertIndexTuples,
 * like any INSERT does), rebuild one concurrently, add a column, a trigger,
 * a constraint, or enable row-level security.  Everything the path must
 * know is worked out here once, from the relcache, into a layout that is
 * rebuilt whenever the relcache says the table or one of its indexes
 * changed:
 *
 *	 - Columns are found by name and type, so dropped columns are fine.  A
 *	   column the extension did not create, or one of another type, is
 *	   refused: the path cannot evaluate defaults or generated columns.
 *	 - Every index ready for inserts is maintained, through the executor's
 *	   own ExecInsertIndexTuples, so partial and expression indexes, and
 *	   the second index of a REINDEX CONCURRENTLY, get their entries.
 *	 - Uniqueness is arbitrated by every unique index, as for INSERT ... ON
 *	   CONFLICT DO NOTHING with no conflict target, so unique indexes must
 *	   be on exactly (key, ns); probes read one of them that is valid.  A
 *	   unique index on anything else, an exclusion constraint or a
 *	   deferrable one is refused, since a conflict on it would silently
 *	   turn a new event into a "duplicate".
 *	 - CHECK constraints, and NOT NULL on the fingerprint, are honoured
 *	   with ExecConstraints.
 *	 - Triggers and rules are refused for writes: the path fires none.
 *	 - Row-level security is refused for every role it applies to (reads
 *	   included), rather than bypassed; except the extension's own
 *	   policies (namespace privileges, nsgrant.c), which every claim
 *	   function applies itself, when they are all there is and those the
 *	   operation's statement would need are present.
 *
 * A refusal is an error that says what to remove.  The layout lives in a
 * generation of its own (inval.h), so one replaced mid-transaction stays
 * valid for whoever still holds it until the transaction ends.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_index.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type_d.h"
#include "commands/defrem.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "catalog/index.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"

#include "base/base.h"
#include "claimrel.h"
#include "catalog/idem_catalog.h"

/*
 * Layouts of the claims table and of its generations (generation.c), all
 * in one generation of memory: an invalidation of any of them drops all.
 * They are found through a hash of the table's OID and its indexes' (an
 * OID names one or the other), so that an old duplicate, which may lie in
 * any of a thousand generations, finds its layout without a rebuild; and
 * there are at most IDEM_CLAIMREL_MAX of them, some 2 kB each, since only
 * the layout of a relation that takes insertions gets executor state.
 */
#define IDEM_CLAIMREL_MAX	4096

typedef struct IdemClaimRelEntry
{
	Oid			oid;			/* the hash key */
	IdemClaimRel *cr;
} IdemClaimRelEntry;

static IdemGenCache idem_claimrel_gen = IDEM_GEN_CACHE_INIT("idempotency claims layout");
static HTAB *idem_claimrel_hash = NULL; /* in the generation's memory */
static int	idem_nclaimrels = 0;

/* Drop every layout */
static void
IdemClaimRelDropAll(void)
{
	idem_claimrel_hash = NULL;
	idem_nclaimrels = 0;
	IdemGenCacheRetire(&idem_claimrel_gen);
}

/* Drop the layouts if the invalidated relation is a table or an index */
static void
IdemClaimRelInvalidate(Oid relid)
{
	if (idem_claimrel_hash == NULL)
		return;
	if (relid == InvalidOid ||
		hash_search(idem_claimrel_hash, &relid, HASH_FIND, NULL) != NULL)
		IdemClaimRelDropAll();
}

/* Enter a layout under its table's OID and its indexes' */
static void
IdemClaimRelEnter(IdemClaimRel *cr)
{
	int			i;

	if (idem_claimrel_hash == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(IdemClaimRelEntry);
		ctl.hcxt = IdemGenCacheContext(&idem_claimrel_gen);
		idem_claimrel_hash = hash_create("idempotency claims layouts", 256, &ctl,
										 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	for (i = -1; i < cr->nindexes; i++)
	{
		Oid			oid = i < 0 ? cr->relid : cr->index_oids[i];
		IdemClaimRelEntry *e = hash_search(idem_claimrel_hash, &oid, HASH_ENTER, NULL);

		e->cr = cr;
	}
	idem_nclaimrels++;
}

/* Register the invalidation handler; called from _PG_init */
void
IdemClaimRelInit(void)
{
	IdemInvalOnRelcache(IdemClaimRelInvalidate);
}

/* Record a refusal, in the layout's memory, unless one is recorded */
static void
IdemRefusalSet(IdemRefusal **slot, int code, char *message, char *detail,
			   char *hint)
{
	IdemRefusal *r;

	if (*slot != NULL)
		return;
	r = palloc0(sizeof(IdemRefusal));
	r->sqlerrcode = code;
	r->message = message;
	r->detail = detail;
	r->hint = hint;
	*slot = r;
}

/* Raise a recorded refusal */
static void
IdemRefusalRaise(const IdemRefusal *r)
{
	ereport(ERROR,
			(errcode(r->sqlerrcode),
			 errmsg_internal("%s", r->message),
			 r->detail ? errdetail_internal("%s", r->detail) : 0,
			 r->hint ? errhint("%s", r->hint) : 0));
}

/*
 * The name a refusal gives the table heap: idempotency.claims or one of its
 * generations, schema-qualified, so that the fix it hints at is run on the
 * table that was changed
 */
static char *
IdemClaimRelName(Relation heap)
{
	return quote_qualified_identifier(get_namespace_name(RelationGetNamespace(heap)),
									  RelationGetRelationName(heap));
}

/* The columns the extension created, with their types */
static const struct
{
	const char *name;
	Oid			type;
	const char *typname;
} idem_claim_columns[] = {
	{"claimed_at", TIMESTAMPTZOID, "timestamp with time zone"},
	{"ns", INT4OID, "integer"},
	{"key", BYTEAOID, "bytea"},
	{"fingerprint", INT8OID, "bigint"},
};

#define IDEM_CLAIM_NCOLUMNS lengthof(idem_claim_columns)

/*
 * Find the columns by name; refuse missing, retyped or extra ones.  An extra
 * column of a generation is dropped where it was added: on the generation
 * (the refusal names it), on idempotency.claims if inherited from it, or on
 * both if it was added to each.
 */
static void
IdemClaimRelColumns(IdemClaimRel *cr, Relation heap, const char *rel)
{
	TupleDesc	desc = RelationGetDescr(heap);
	AttrNumber	found[IDEM_CLAIM_NCOLUMNS] = {0};
	int			i;
	int			c;

	cr->natts = desc->natts;
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		const char *name = NameStr(att->attname);

		if (att->attisdropped)
			continue;
		for (c = 0; c < (int) IDEM_CLAIM_NCOLUMNS; c++)
			if (strcmp(name, idem_claim_columns[c].name) == 0)
				break;
		if (c == (int) IDEM_CLAIM_NCOLUMNS)
		{
			const char *parent = IDEM_SCHEMA_NAME ".claims";
			const char *col = quote_identifier(name);
			char	   *hint;

			if (att->attinhcount == 0)
				hint = psprintf("Drop it with ALTER TABLE %s DROP COLUMN %s.", rel, col);
			else if (!att->attislocal)
				hint = psprintf("Drop it with ALTER TABLE %s DROP COLUMN %s.", parent, col);
			else
				hint = psprintf("Drop it with ALTER TABLE %s DROP COLUMN %s, then ALTER TABLE %s DROP COLUMN %s.",
								parent, col, rel, col);
			IdemRefusalSet(&cr->refuse_claims, ERRCODE_FEATURE_NOT_SUPPORTED,
						   psprintf("cannot claim: %s has an unexpected column \"%s\"",
									att->attinhcount > 0 && !att->attislocal ? parent : rel,
									name),
						   pstrdup("Claims are written directly, without the executor, so a column the extension did not create would get no value."),
						   hint);
			continue;
		}
		if (att->atttypid != idem_claim_columns[c].type)
			IdemRefusalSet(&cr->refuse_all, ERRCODE_FEATURE_NOT_SUPPORTED,
						   psprintf("column \"%s\" of idempotency.claims has type %s, not %s",
									name, format_type_be(att->atttypid),
									idem_claim_columns[c].typname),
						   NULL,
						   pstrdup("Re-create the extension, or change the column back."));
		found[c] = att->attnum;
		if (c == 3 && att->attnotnull)
			cr->constraints = true;
	}
	for (c = 0; c < (int) IDEM_CLAIM_NCOLUMNS; c++)
		if (found[c] == InvalidAttrNumber)
			IdemRefusalSet(&cr->refuse_all, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
						   psprintf("column \"%s\" of idempotency.claims is missing",
									idem_claim_columns[c].name),
						   NULL,
						   pstrdup("Re-create the extension with DROP EXTENSION idempotency; CREATE EXTENSION idempotency."));
	cr->att_claimed_at = found[0];
	cr->att_ns = found[1];
	cr->att_key = found[2];
	cr->att_fingerprint = found[3];
	if (desc->constr != NULL && desc->constr->num_check > 0)
		cr->constraints = true;
}

/* Refuse writes if a trigger or a rule of heap would fire for them */
static void
IdemClaimRelTriggers(IdemClaimRel *cr, Relation heap, const char *rel)
{
	TriggerDesc *td = heap->trigdesc;
	int			i;

	for (i = 0; td != NULL && i < td->numtriggers; i++)
	{
		Trigger    *t = &td->triggers[i];

		if (t->tgenabled == TRIGGER_DISABLED)
			continue;
		if (!TRIGGER_FOR_INSERT(t->tgtype) && !TRIGGER_FOR_UPDATE(t->tgtype) &&
			!TRIGGER_FOR_DELETE(t->tgtype))
			continue;
		IdemRefusalSet(&cr->refuse_writes, ERRCODE_FEATURE_NOT_SUPPORTED,
					   psprintf("%s has trigger \"%s\"", rel, t->tgname),
					   pstrdup("Claims are written directly, without the executor, so a trigger on the claims would never fire."),
					   psprintf("Drop it with DROP TRIGGER %s ON %s, or disable it with ALTER TABLE %s DISABLE TRIGGER %s.",
								quote_identifier(t->tgname), rel, rel,
								quote_identifier(t->tgname)));
	}
	if (heap->rd_rules != NULL)
		IdemRefusalSet(&cr->refuse_writes, ERRCODE_FEATURE_NOT_SUPPORTED,
					   psprintf("%s has rewrite rules", rel),
					   pstrdup("Claims are written directly, without the rewriter, so a rule on the claims would never apply."),
					   psprintf("Drop the rules on %s.", rel));
}

/*
 * Is index a unique btree on exactly (key, ns) with the default operator
 * classes, so that a probe for (key, ns) equality finds every conflict?
 * Sets *keycol to the index column holding the key.
 */
static bool
IdemIndexOnClaimKey(IdemClaimRel *cr, Relation index, IndexInfo *info,
					AttrNumber *keycol)
{
	Form_pg_index form = index->rd_index;
	int			c;

	if (index->rd_rel->relam != BTREE_AM_OID ||
		IndexRelationGetNumberOfKeyAttributes(index) != 2 ||
		info->ii_Expressions != NIL || info->ii_Predicate != NIL)
		return false;
	for (c = 0; c < 2; c++)
	{
		AttrNumber	att = form->indkey.values[c];
		Oid			type = att == cr->att_key ? BYTEAOID :
			att == cr->att_ns ? INT4OID : InvalidOid;

		if (!OidIsValid(type) ||
			index->rd_opfamily[c] != get_opclass_family(GetDefaultOpClass(type, BTREE_AM_OID)))
			return false;
		if (att == cr->att_key)
			*keycol = c + 1;
	}
	return form->indkey.values[0] != form->indkey.values[1];
}

/*
 * Read the indexes of heap: which to maintain, which to probe, which to
 * refuse.  Without a valid unique index on (key, ns), the hint rebuilds the
 * one there is, or adds the primary key the table was created with (a
 * generation's is named after it, as generation.c names it).
 */
static void
IdemClaimRelIndexes(IdemClaimRel *cr, Relation heap, const char *rel)
{
	List	   *oids = RelationGetIndexList(heap);
	ListCell   *lc;
	int			i = 0;
	bool		unusable = false;	/* a unique index on (key, ns), not valid */

	cr->nindexes = list_length(oids);
	cr->index_oids = palloc0(sizeof(Oid) * Max(cr->nindexes, 1));
	cr->rri->ri_NumIndices = cr->nindexes;
	cr->rri->ri_IndexRelationDescs = palloc0(sizeof(Relation) * Max(cr->nindexes, 1));
	cr->rri->ri_IndexRelationInfo = palloc0(sizeof(IndexInfo *) * Max(cr->nindexes, 1));
	cr->probe = -1;

	foreach(lc, oids)
	{
		Oid			oid = lfirst_oid(lc);
		Relation	index = index_open(oid, AccessShareLock);
		IndexInfo  *info = BuildIndexInfo(index);
		const char *name = RelationGetRelationName(index);
		AttrNumber	keycol = 0;

		cr->index_oids[i] = oid;
		cr->rri->ri_IndexRelationInfo[i] = info;
		if (info->ii_ExclusionOps != NULL)
			IdemRefusalSet(&cr->refuse_claims, ERRCODE_FEATURE_NOT_SUPPORTED,
						   psprintf("cannot claim: %s has exclusion constraint index \"%s\"", rel, name),
						   pstrdup("A conflict on it would make a new event look like a duplicate."),
						   pstrdup("Drop the constraint."));
		else if (info->ii_Unique)
		{
			if (!IdemIndexOnClaimKey(cr, index, info, &keycol))
				IdemRefusalSet(&cr->refuse_claims, ERRCODE_FEATURE_NOT_SUPPORTED,
							   psprintf("cannot claim: unique index \"%s\" of %s is not on (key, ns)", name, rel),
							   pstrdup("A conflict on it would make a new event look like a duplicate."),
							   psprintf("Drop the index, or make it non-unique: DROP INDEX %s.",
										quote_qualified_identifier(get_namespace_name(RelationGetNamespace(index)),
																   name)));
			else if (!index->rd_index->indimmediate)
				IdemRefusalSet(&cr->refuse_claims, ERRCODE_FEATURE_NOT_SUPPORTED,
							   psprintf("cannot claim: unique index \"%s\" of %s is deferrable", name, rel),
							   pstrdup("Claims arbitrate uniqueness at once, as INSERT ... ON CONFLICT does, which a deferrable constraint cannot do."),
							   NULL);
			else if (cr->probe < 0 && index->rd_index->indisvalid &&
					 index->rd_index->indisready && index->rd_index->indislive)
			{
				cr->probe = i;
				cr->probe_key_col = keycol;
			}
			else
				unusable = true;
		}
		index_close(index, NoLock);
		i++;
	}
	list_free(oids);

	if (cr->probe < 0)
		IdemRefusalSet(&cr->refuse_all, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
					   psprintf("%s has no valid unique index on (key, ns)", rel),
					   pstrdup("Claims are found and kept unique through that index."),
					   unusable ?
					   psprintf("Rebuild it with REINDEX TABLE %s.", rel) :
					   psprintf("Re-create it with ALTER TABLE %s ADD CONSTRAINT %s PRIMARY KEY (key, ns).",
								rel,
								quote_identifier(psprintf("%s_pkey", RelationGetRelationName(heap)))));
}

/*
 * Sort the table's row-level security policies into the extension's own
 * (namespace privileges, which every claim function checks itself) and
 * anyone else's, which the direct path cannot apply
 */
static void
IdemClaimRelPolicies(IdemClaimRel *cr, Relation heap)
{
	ListCell   *lc;

	cr->foreign_policies = false;
	cr->own_policies = 0;
	if (heap->rd_rsdesc == NULL)
		return;
	foreach(lc, heap->rd_rsdesc->policies)
	{
		int			kind = IdemNsGrantPolicyKind(lfirst(lc), cr->att_ns);

		if (kind == 0)
			cr->foreign_policies = true;
		cr->own_policies |= kind;
	}
}

/*
 * Would the table's policies, for a role they apply to, allow what op does
 * exactly as the namespace check of the claim functions does?  Only if
 * every policy is the extension's own and those op's statement would need
 * are there: reads need the SELECT policy, claims the INSERT one too,
 * releases the DELETE one.  (The purge runs as the owner.)
 */
static bool
IdemClaimRelPoliciesOurs(const IdemClaimRel *cr, IdemClaimOp op)
{
	int			need = IDEM_POLICY_SELECT;

	if (cr->foreign_policies)
		return false;
	if (op == IDEM_OP_CLAIM)
		need |= IDEM_POLICY_INSERT;
	else if (op != IDEM_OP_CHECK)
		need |= IDEM_POLICY_DELETE;
	return (cr->own_policies & need) == need;
}

/* Build the layout of the claims table heap, in a new generation */
static IdemClaimRel *
IdemClaimRelBuild(Relation heap)
{
	MemoryContext oldcxt;
	IdemClaimRel *cr;
	char	   *rel;

	oldcxt = MemoryContextSwitchTo(IdemGenCacheContext(&idem_claimrel_gen));
	rel = IdemClaimRelName(heap);
	cr = palloc0(sizeof(IdemClaimRel));
	cr->relid = RelationGetRelid(heap);
	cr->cxt = CurrentMemoryContext;
	cr->rri = makeNode(ResultRelInfo);
	cr->rri->ri_RelationDesc = heap;

	IdemClaimRelColumns(cr, heap, rel);
	IdemClaimRelTriggers(cr, heap, rel);
	cr->row_security = heap->rd_rel->relrowsecurity;
	IdemClaimRelPolicies(cr, heap);
	if (heap->rd_rel->relkind != RELKIND_RELATION ||
		heap->rd_rel->relam != HEAP_TABLE_AM_OID)
		IdemRefusalSet(&cr->refuse_all, ERRCODE_FEATURE_NOT_SUPPORTED,
					   psprintf("%s must be a plain heap table", rel),
					   NULL,
					   psprintf("Re-create the extension, or set the access method back with ALTER TABLE %s SET ACCESS METHOD heap.",
								rel));
	IdemClaimRelIndexes(cr, heap, rel);
	MemoryContextSwitchTo(oldcxt);
	return cr;
}

/*
 * The executor state of a layout, for an insertion: built on first use, in
 * the layout's memory, since most layouts are only ever probed
 */
void
IdemClaimRelForInsert(IdemClaimRel *cr, Relation heap)
{
	MemoryContext oldcxt;

	if (cr->slot != NULL)
		return;
	oldcxt = MemoryContextSwitchTo(cr->cxt);
	cr->estate = CreateExecutorState();
	cr->slot = MakeSingleTupleTableSlot(CreateTupleDescCopy(RelationGetDescr(heap)),
										&TTSOpsVirtual);
	cr->slot->tts_tableOid = cr->relid;
	MemoryContextSwitchTo(oldcxt);
}

/*
 * The layout of the claims table heap (open and locked by the caller),
 * after checking that the direct path may do op on it as the current
 * user; raises the error that says what stands in the way otherwise.
 */
IdemClaimRel *
IdemClaimRelGet(Relation heap, IdemClaimOp op)
{
	IdemClaimRel *cr = NULL;
	Oid			relid = RelationGetRelid(heap);

	if (idem_claimrel_hash != NULL)
	{
		IdemClaimRelEntry *e = hash_search(idem_claimrel_hash, &relid, HASH_FIND, NULL);

		if (e != NULL && e->cr->relid == relid)
			cr = e->cr;
	}
	while (cr == NULL)
	{
		uint64		start = IdemInvalCounter();

		if (idem_nclaimrels >= IDEM_CLAIMREL_MAX)
			IdemClaimRelDropAll();
		cr = IdemClaimRelBuild(heap);
		if (IdemInvalCounter() == start)
			IdemClaimRelEnter(cr);
		else
		{
			/* an invalidation arrived while we read the relcache */
			IdemClaimRelDropAll();
			cr = NULL;
		}
	}

	if (cr->refuse_all != NULL)
		IdemRefusalRaise(cr->refuse_all);
	if (op != IDEM_OP_CHECK && cr->refuse_writes != NULL)
		IdemRefusalRaise(cr->refuse_writes);
	if (op == IDEM_OP_CLAIM && cr->refuse_claims != NULL)
		IdemRefusalRaise(cr->refuse_claims);
	if (cr->row_security && !IdemClaimRelPoliciesOurs(cr, op) &&
		check_enable_rls(cr->relid, InvalidOid, false) == RLS_ENABLED)
	{
		char	   *rel = IdemClaimRelName(heap);

		/*
		 * With the namespace grants (1.1) every generation has the
		 * extension's own policies too (generation.c): what is not ours
		 * goes, as on the claims table; without them, RLS itself goes
		 */
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("row-level security on %s is not supported", rel),
				 errdetail("Claims are read and written directly, without the executor, so policies cannot be applied; the functions refuse rather than bypass them."),
				 relid == IdemGetCatalog().claims || OidIsValid(IdemNamespaceGrantsRelation()) ?
				 errhint("Drop the policies on %s that are not the extension's own (claims_namespace_*), or call the functions as a role that bypasses them.", rel) :
				 errhint("Disable it with ALTER TABLE %s DISABLE ROW LEVEL SECURITY, or call the functions as a role that bypasses it.", rel)));
	}
	cr->rri->ri_RelationDesc = heap;
	return cr;
}
