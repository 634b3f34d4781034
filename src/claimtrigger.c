/*
 * claimtrigger.c
 *	  idem_claim_trigger(): an inbox table whose duplicate rows are skipped.
 *
 *	  CREATE TRIGGER inbox_dedup BEFORE INSERT ON inbox
 *		  FOR EACH ROW EXECUTE FUNCTION idem_claim_trigger('event_id', 'inbox');
 *
 * Arguments: the id column, the namespace (default 'default') and,
 * optionally, a fingerprint column.  Each row claims its id; a row whose id
 * is already claimed is silently skipped, so INSERT INTO inbox becomes
 * idempotent.  The id column may be of any type; its text form is the id.
 */
#include "postgres.h"

#include "catalog/pg_type_d.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "catalog.h"
#include "claimkey.h"
#include "claimstore.h"
#include "idempotency.h"
#include "namespace.h"

PG_FUNCTION_INFO_V1(idem_claim_trigger);

/* Column number of a trigger argument naming a column, or an error */
static int
IdemTriggerColumn(Relation rel, const char *colname)
{
	int			attnum = SPI_fnumber(RelationGetDescr(rel), colname);

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						colname, RelationGetRelationName(rel)),
				 errhint("The arguments of idem_claim_trigger() that name columns must name columns of the table.")));
	return attnum;
}

/* The text form of column attnum of tuple, or NULL */
static text *
IdemTriggerValue(Relation rel, HeapTuple tuple, int attnum)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Oid			typid = TupleDescAttr(desc, attnum - 1)->atttypid;
	bool		isnull;
	Datum		value = heap_getattr(tuple, attnum, desc, &isnull);
	Oid			outfunc;
	bool		isvarlena;

	if (isnull)
		return NULL;
	if (typid == TEXTOID || typid == VARCHAROID || typid == BPCHAROID)
		return DatumGetTextPP(value);
	getTypeOutputInfo(typid, &outfunc, &isvarlena);
	return cstring_to_text(OidOutputFunctionCall(outfunc, value));
}

/*
 * idem_claim_trigger() returns trigger
 *
 * BEFORE INSERT ... FOR EACH ROW: claim the row's id, skip the row if it is
 * a duplicate.
 */
Datum
idem_claim_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Trigger    *trigger;
	Relation	rel;
	HeapTuple	tuple;
	text	   *id;
	text	   *nsname;
	text	   *fingerprint = NULL;
	IdemKey		key;
	IdemNamespace ns;
	IdemStore	store;
	IdemClaimOutcome outcome;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("idem_claim_trigger() must be called as a trigger")));
	if (!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("idem_claim_trigger() must be fired BEFORE INSERT FOR EACH ROW")));

	trigger = trigdata->tg_trigger;
	rel = trigdata->tg_relation;
	tuple = trigdata->tg_trigtuple;
	if (trigger->tgnargs < 1 || trigger->tgnargs > 3)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("idem_claim_trigger() takes one to three arguments"),
				 errdetail("Trigger \"%s\" gives %d.", trigger->tgname, trigger->tgnargs),
				 errhint("The arguments are the event id column, the namespace and an optional fingerprint column.")));

	id = IdemTriggerValue(rel, tuple, IdemTriggerColumn(rel, trigger->tgargs[0]));
	if (id == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("event id must not be null"),
				 errdetail("Column \"%s\" of the new row of \"%s\" is null.",
						   trigger->tgargs[0], RelationGetRelationName(rel))));
	nsname = cstring_to_text(trigger->tgnargs >= 2 ? trigger->tgargs[1] : "default");
	if (trigger->tgnargs == 3)
		fingerprint = IdemTriggerValue(rel, tuple,
									   IdemTriggerColumn(rel, trigger->tgargs[2]));

	IdemEncodeKey(id, &key);
	IdemValidateNamespace(nsname);
	IdemCheckWritable("idem_claim_trigger()");
	IdemCheckClaimsPrivilege(ACL_INSERT);

	(void) IdemNamespaceGet(nsname, true, &ns);
	IdemStoreOpen(&store, RowExclusiveLock, false);
	outcome = IdemStoreClaim(&store, &ns, &key.hdr, fingerprint, false);
	IdemStoreClose(&store);

	if (outcome != IDEM_CLAIM_NEW)
		return PointerGetDatum(NULL);	/* duplicate: skip the row */
	return PointerGetDatum(tuple);
}
