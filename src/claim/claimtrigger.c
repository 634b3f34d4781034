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
 * idempotent.  The id is the canonical text of the id column's value (see
 * IdemTriggerValue); types without one are refused.
 */
#include "postgres.h"

#include "catalog/pg_type_d.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "common/shortest_dec.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "base/base.h"
#include "store/store.h"
#include "catalog/idem_catalog.h"
#include "claim.h"

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

/*
 * The canonical text of a timestamp (UTC when with_tz), in ISO form
 * whatever DateStyle and TimeZone say.
 */
static text *
IdemCanonicalTimestamp(Timestamp ts, bool with_tz)
{
	struct pg_tm tm;
	fsec_t		fsec;
	char		buf[MAXDATELEN + 8];

	if (TIMESTAMP_IS_NOBEGIN(ts))
		return cstring_to_text("-infinity");
	if (TIMESTAMP_IS_NOEND(ts))
		return cstring_to_text("infinity");
	if (timestamp2tm(ts, NULL, &tm, &fsec, NULL, NULL) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	EncodeDateTime(&tm, fsec, false, 0, NULL, USE_ISO_DATES, buf);
	if (with_tz)
		strcat(buf, "+00");
	return cstring_to_text(buf);
}

/*
 * The event id of a column value: its text form, made canonical where the
 * output function's answer depends on session settings or on the value's
 * written form, so that one value always gives one id:
 *
 *	 - text, varchar, char: the string itself;
 *	 - integers, oid, uuid, boolean and enums: their output;
 *	 - numeric: without trailing zeros (1.0 and 1.00 are the id "1");
 *	 - real, double precision: the shortest text that reads back exactly;
 *	 - timestamptz: ISO 8601 in UTC ("2026-12-01 09:00:00+00"), whatever
 *	   the TimeZone; timestamp and date: ISO, whatever the DateStyle;
 *	 - bytea: hex digits, whatever bytea_output.
 *
 * Any other type is refused as an id: its text form may vary (intervals,
 * money, json, arrays), and a varying id would let a duplicate through.
 * A fingerprint (is_id false) of such a type uses its output function.
 */
static text *
IdemTriggerValue(Relation rel, HeapTuple tuple, int attnum, bool is_id)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Form_pg_attribute att = TupleDescAttr(desc, attnum - 1);
	Oid			typid = getBaseType(att->atttypid);
	bool		isnull;
	Datum		value = heap_getattr(tuple, attnum, desc, &isnull);
	Oid			outfunc;
	bool		isvarlena;
	char		buf[64];

	if (isnull)
		return NULL;
	switch (typid)
	{
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
			return DatumGetTextPP(value);
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case OIDOID:
		case UUIDOID:
		case BOOLOID:
			break;
		case NUMERICOID:
			return cstring_to_text(numeric_normalize(DatumGetNumeric(value)));
		case FLOAT4OID:
			float_to_shortest_decimal_buf(DatumGetFloat4(value), buf);
			return cstring_to_text(buf);
		case FLOAT8OID:
			double_to_shortest_decimal_buf(DatumGetFloat8(value), buf);
			return cstring_to_text(buf);
		case TIMESTAMPTZOID:
			return IdemCanonicalTimestamp(DatumGetTimestampTz(value), true);
		case TIMESTAMPOID:
			return IdemCanonicalTimestamp(DatumGetTimestamp(value), false);
		case DATEOID:
			{
				DateADT		d = DatumGetDateADT(value);
				struct pg_tm tm;

				if (DATE_IS_NOBEGIN(d))
					return cstring_to_text("-infinity");
				if (DATE_IS_NOEND(d))
					return cstring_to_text("infinity");
				j2date(d + POSTGRES_EPOCH_JDATE, &tm.tm_year, &tm.tm_mon, &tm.tm_mday);
				EncodeDateOnly(&tm, USE_ISO_DATES, buf);
				return cstring_to_text(buf);
			}
		case BYTEAOID:
			{
				bytea	   *b = DatumGetByteaPP(value);
				int			len = VARSIZE_ANY_EXHDR(b);
				char	   *hex = palloc(len * 2 + 1);

				hex[hex_encode(VARDATA_ANY(b), len, hex)] = '\0';
				return cstring_to_text(hex);
			}
		default:
			if (!is_id || type_is_enum(typid))
				break;		/* a fingerprint only needs to be stable */
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" of type %s cannot hold event ids",
							NameStr(att->attname), format_type_be(att->atttypid)),
					 errdetail("The text form of type %s can change with session settings or the way a value was written, so one event could get two ids.",
							   format_type_be(typid)),
					 errhint("Use a text, integer, numeric, uuid, date or timestamp column, or a generated text column.")));
	}
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

	id = IdemTriggerValue(rel, tuple, IdemTriggerColumn(rel, trigger->tgargs[0]), true);
	if (id == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("event id must not be null"),
				 errdetail("Column \"%s\" of the new row of \"%s\" is null.",
						   trigger->tgargs[0], RelationGetRelationName(rel))));
	nsname = cstring_to_text(trigger->tgnargs >= 2 ? trigger->tgargs[1] : "default");
	if (trigger->tgnargs == 3)
		fingerprint = IdemTriggerValue(rel, tuple,
									   IdemTriggerColumn(rel, trigger->tgargs[2]), false);

	IdemEncodeKey(id, &key);
	IdemValidateNamespace(nsname);
	IdemCheckWritable("idem_claim_trigger()");
	IdemCheckClaimsPrivilege(ACL_INSERT);
	IdemCheckNamespacePrivilege(nsname, IDEM_NSPRIV_CLAIM);

	IdemClaimCheckCluster(nsname);
	(void) IdemNamespaceGet(nsname, true, &ns);
	IdemStoreOpen(&store, IDEM_OP_CLAIM, false);
	outcome = IdemStoreClaim(&store, &ns, &key.hdr, fingerprint, false);
	IdemStoreClose(&store);

	if (outcome != IDEM_CLAIM_NEW)
		return PointerGetDatum(NULL);	/* duplicate: skip the row */
	return PointerGetDatum(tuple);
}
