/*
 * binding.c
 *	  Tables bound to state machines, and the per-backend cache of bindings.
 *
 * idem_machine_bind records in idempotency.machine_bindings that a table's
 * status column follows a machine, and installs the guard trigger
 * (guard.c) on it.  idem_cas_row (cas.c) and the trigger then look the
 * binding up by table OID in a per-backend cache, which also resolves the
 * columns to attribute numbers, finds the single-column primary key and
 * keeps the type I/O functions used to read and write the status as text.
 *
 * The cache drops its entries on a relcache invalidation of the bindings
 * table (any change to it, through its statement trigger) or of a bound
 * table (ALTER TABLE, GRANT, ...).  Entries of an invalidated generation
 * are freed at transaction end, as in machine.c.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "catalog/pg_am_d.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/objectaddress.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type_d.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"

#include "binding.h"
#include "base/base.h"

PG_FUNCTION_INFO_V1(idem_machine_bind);
PG_FUNCTION_INFO_V1(idem_machine_unbind);

static IdemGenCache idem_binding_gen = IDEM_GEN_CACHE_INIT("idempotency bindings");
static HTAB *idem_binding_cache = NULL;
static Oid	idem_binding_relid = InvalidOid;	/* the bindings table */

/* Forget all bindings; their memory goes at transaction end */
static void
IdemBindingCacheReset(void)
{
	IdemGenCacheRetire(&idem_binding_gen);
	idem_binding_cache = NULL;
}

/* The bindings table or a bound table changed */
static void
IdemBindingInvalidate(Oid relid)
{
	if (idem_binding_cache == NULL)
		return;
	if (relid == InvalidOid || relid == idem_binding_relid ||
		hash_search(idem_binding_cache, &relid, HASH_FIND, NULL) != NULL)
		IdemBindingCacheReset();
}

/* Role changes may change what a user may do to a bound table */
static void
IdemBindingRolesChanged(void)
{
	HASH_SEQ_STATUS status;
	IdemBinding *b;

	if (idem_binding_cache == NULL)
		return;
	hash_seq_init(&status, idem_binding_cache);
	while ((b = hash_seq_search(&status)) != NULL)
		b->acl_user = InvalidOid;
}

/* Register the invalidation handlers; called from _PG_init */
void
IdemBindingInit(void)
{
	IdemInvalOnRelcache(IdemBindingInvalidate);
	IdemInvalOnRoles(IdemBindingRolesChanged);
}

/* The attribute number of a bound column, or an error saying to rebind */
static AttrNumber
IdemBindingColumn(Oid relid, const char *column)
{
	AttrNumber	attno = get_attnum(relid, column);

	if (attno == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" bound to a state machine no longer exists in table \"%s\"",
						column, get_rel_name(relid)),
				 errhint("Bind the table again with idem_machine_bind().")));
	return attno;
}

/* A binding row as read from idempotency.machine_bindings */
typedef struct IdemBindingRow
{
	char	   *status_column;
	char	   *machine;
	char	   *version_column;
	bool		check_inserts;
} IdemBindingRow;

/* Copy a binding row into the IdemBindingRow arg */
static void
IdemBindingCopyRow(HeapTuple tuple, TupleDesc desc, void *arg)
{
	IdemBindingRow *row = arg;
	bool		isnull;

	row->status_column = SPI_getvalue(tuple, desc, 1);
	row->machine = SPI_getvalue(tuple, desc, 2);
	row->version_column = SPI_getvalue(tuple, desc, 3);
	row->check_inserts = DatumGetBool(SPI_getbinval(tuple, desc, 4, &isnull));
}

/* Fill in the primary key fields of b, if the table has a usable one */
static void
IdemBindingFindKey(IdemBinding *b)
{
	Relation	rel = table_open(b->relid, AccessShareLock);
	Oid			pk = IdemRelationGetPrimaryKeyIndex(rel);

	if (OidIsValid(pk))
	{
		Relation	index = index_open(pk, AccessShareLock);

		if (IndexRelationGetNumberOfKeyAttributes(index) == 1 &&
			index->rd_index->indkey.values[0] > 0 &&
			index->rd_rel->relam == BTREE_AM_OID)
		{
			Oid			opfamily = index->rd_opfamily[0];
			Oid			opcintype = index->rd_opcintype[0];
			Oid			eqop;

			b->pk_index = pk;
			b->pk_attno = index->rd_index->indkey.values[0];
			b->pk_type = TupleDescAttr(RelationGetDescr(rel), b->pk_attno - 1)->atttypid;
			b->pk_collation = index->rd_indcollation[0];
			b->pk_opfamily = opfamily;
			b->pk_opcintype = opcintype;
			eqop = get_opfamily_member(opfamily, opcintype, opcintype,
									   BTEqualStrategyNumber);
			b->pk_eqproc = get_opcode(eqop);
		}
		index_close(index, NoLock);
	}
	table_close(rel, NoLock);	/* held to commit, as the binding relies on it */
}

/*
 * The binding of table relid.  Returns NULL if it is not bound and
 * missing_ok, else raises an error.  The result stays valid until the end
 * of the current transaction.
 */
IdemBinding *
IdemBindingGet(Oid relid, bool missing_ok)
{
	IdemBinding *b;
	IdemCatalog cat;
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1];
	IdemBindingRow row;
	Oid			func;
	bool		found;

	AcceptInvalidationMessages();	/* bindings changed since, as in machine.c */
	if (idem_binding_cache != NULL)
	{
		b = hash_search(idem_binding_cache, &relid, HASH_FIND, NULL);
		if (b != NULL)
			return b;
	}

	cat = IdemGetCatalog();
	idem_binding_relid = cat.bindings;
	args[0] = ObjectIdGetDatum(relid);
	memset(&row, 0, sizeof(row));
	(void) IdemOwnerRun(cat.bindings, IDEM_RUN_READ_ONLY | IDEM_RUN_LATEST,
						"SELECT status_column, machine, version_column, check_inserts"
						" FROM idempotency.machine_bindings"
						" WHERE rel OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
						1, argtypes, args, NULL, IdemBindingCopyRow, &row);

	if (row.status_column == NULL)
	{
		if (missing_ok)
			return NULL;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table \"%s\" is not bound to a state machine",
						get_rel_name(relid)),
				 errhint("Bind it with idem_machine_bind().")));
	}

	if (idem_binding_cache == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(IdemBinding);
		ctl.hcxt = IdemGenCacheContext(&idem_binding_gen);
		idem_binding_cache = hash_create("idempotency bindings", 16, &ctl,
										 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}

	/* resolve everything before entering the cache, so errors leave no entry */
	{
		IdemBinding fill;
		Oid			typoutput;
		bool		isvarlena;
		Oid			coll;

		memset(&fill, 0, sizeof(fill));
		fill.relid = relid;
		strlcpy(fill.machine, row.machine, sizeof(fill.machine));
		strlcpy(fill.status_column, row.status_column, sizeof(fill.status_column));
		fill.check_inserts = row.check_inserts;
		fill.status_attno = IdemBindingColumn(relid, row.status_column);
		get_atttypetypmodcoll(relid, fill.status_attno, &fill.status_type,
							  &fill.status_typmod, &coll);
		getTypeOutputInfo(fill.status_type, &typoutput, &isvarlena);
		fmgr_info_cxt(typoutput, &fill.status_out, IdemGenCacheContext(&idem_binding_gen));
		getTypeInputInfo(fill.status_type, &func, &fill.status_ioparam);
		fmgr_info_cxt(func, &fill.status_in, IdemGenCacheContext(&idem_binding_gen));
		fill.version_attno = InvalidAttrNumber;
		if (row.version_column != NULL)
		{
			int32		typmod;

			fill.version_attno = IdemBindingColumn(relid, row.version_column);
			get_atttypetypmodcoll(relid, fill.version_attno, &fill.version_type,
								  &typmod, &coll);
		}
		fill.pk_index = InvalidOid;
		IdemBindingFindKey(&fill);
		fill.acl_user = InvalidOid;

		/* lookups above may have processed invalidations */
		if (idem_binding_cache == NULL)
			return IdemBindingGet(relid, missing_ok);
		b = hash_search(idem_binding_cache, &relid, HASH_ENTER, &found);
		*b = fill;
		if (IsInParallelMode())
			IdemGenCacheResetAtEnd(&idem_binding_gen, IdemBindingCacheReset);	/* read under the query's snapshot */
	}
	return b;
}

/* The text form of a status value */
char *
IdemBindingStatusText(IdemBinding *b, Datum value)
{
	return OutputFunctionCall(&b->status_out, value);
}

/* A status value from its text form, checked against the column's type */
Datum
IdemBindingStatusDatum(IdemBinding *b, const char *state)
{
	return InputFunctionCall(&b->status_in, (char *) state, b->status_ioparam,
							 b->status_typmod);
}

/* Open relid for binding: the caller must own it, and it must be a table */
static Relation
IdemBindOpen(Oid relid)
{
	return IdemOpenOwnedTable(relid, ShareRowExclusiveLock,
							  "Only plain tables can be bound to a state machine.");
}

/*
 * Refuse to bind one of the extension's own tables: one in the idempotency
 * schema (the claims, their generations, the catalogs) or a member of the
 * extension.  Claims are written without the executor, so the guard
 * trigger would only make every claim fail; the catalogs are written by
 * the functions alone.  Not a matter of privilege, since a superuser owns
 * them: FEATURE_NOT_SUPPORTED.  Unbinding stays allowed, so that a binding
 * made before this check can still be removed.
 */
static void
IdemBindRefuseOwn(Relation rel)
{
	Oid			relid = RelationGetRelid(rel);
	Oid			ext = get_extension_oid("idempotency", true);

	if (RelationGetNamespace(rel) == IdemGetCatalog().schema ||
		(OidIsValid(ext) && getExtensionOfObject(RelationRelationId, relid) == ext))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot bind %s to a state machine",
						quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												   RelationGetRelationName(rel))),
				 errdetail("It is one of the idempotency extension's own tables, which the extension's functions write directly, bypassing the guard trigger a binding installs.")));
}

/* Run the trigger DDL of a binding as the calling user */
static void
IdemBindTriggers(Relation rel, const char *status_column, bool install,
				 bool check_inserts, Oid func_oid)
{
	char	   *relname = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
													 RelationGetRelationName(rel));
	const char *schema = quote_identifier(get_namespace_name(get_func_namespace(func_oid)));
	char	   *sql;
	IdemOwnerScope scope;

	IdemSpiScopeBegin(&scope, GetUserId(), true);
	/* no NOTICE for the triggers DROP IF EXISTS does not find */
	(void) set_config_option("client_min_messages", "warning",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	sql = psprintf("DROP TRIGGER IF EXISTS idem_state_guard ON %s", relname);
	if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not drop trigger");
	sql = psprintf("DROP TRIGGER IF EXISTS idem_state_guard_insert ON %s", relname);
	if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not drop trigger");
	if (install)
	{
		/*
		 * AFTER, with no column list: the guard sees the row as it is
		 * stored, after every BEFORE trigger, whatever their names and
		 * whichever columns the UPDATE named.  The WHEN clause keeps
		 * updates that leave the status alone from queueing an event.
		 */
		sql = psprintf("CREATE TRIGGER idem_state_guard AFTER UPDATE ON %s"
					   " FOR EACH ROW WHEN (OLD.%s IS DISTINCT FROM NEW.%s)"
					   " EXECUTE FUNCTION %s.idem_state_guard()",
					   relname, quote_identifier(status_column),
					   quote_identifier(status_column), schema);
		if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not create trigger");
		if (check_inserts)
		{
			sql = psprintf("CREATE TRIGGER idem_state_guard_insert AFTER INSERT ON %s"
						   " FOR EACH ROW EXECUTE FUNCTION %s.idem_state_guard()",
						   relname, schema);
			if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
				elog(ERROR, "could not create trigger");
		}
	}
	IdemOwnerScopeEnd(&scope);
}

/*
 * idem_machine_bind(rel regclass, status_column name, machine text,
 *					 version_column name, check_inserts boolean) returns void
 *
 * Binds a table's status column (and optional version column) to a state
 * machine, and installs the guard trigger.  Rebinding replaces the binding.
 * Only the table's owner may bind it.
 */
Datum
idem_machine_bind(PG_FUNCTION_ARGS)
{
	Oid			relid = DatumGetObjectId(IdemArgNotNull(fcinfo, 0, "table"));
	Name		status_column = DatumGetName(IdemArgNotNull(fcinfo, 1, "status column"));
	text	   *machine = DatumGetTextPP(IdemArgNotNull(fcinfo, 2, "machine name"));
	Name		version_column = PG_ARGISNULL(3) ? NULL : PG_GETARG_NAME(3);
	bool		check_inserts = DatumGetBool(IdemArgNotNull(fcinfo, 4, "check_inserts"));
	Relation	rel;
	AttrNumber	attno;
	IdemCatalog cat;
	Oid			argtypes[5] = {OIDOID, NAMEOID, TEXTOID, NAMEOID, BOOLOID};
	Datum		args[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

	PreventCommandIfReadOnly("idem_machine_bind()");
	rel = IdemBindOpen(relid);
	IdemBindRefuseOwn(rel);

	attno = get_attnum(relid, NameStr(*status_column));
	if (attno == InvalidAttrNumber || attno < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						NameStr(*status_column), RelationGetRelationName(rel))));
	if (version_column != NULL)
	{
		AttrNumber	vattno = get_attnum(relid, NameStr(*version_column));
		Oid			vtype;

		if (vattno == InvalidAttrNumber || vattno < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of relation \"%s\" does not exist",
							NameStr(*version_column), RelationGetRelationName(rel))));
		if (vattno == attno)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the version column must differ from the status column")));
		vtype = get_atttype(relid, vattno);
		if (vtype != INT2OID && vtype != INT4OID && vtype != INT8OID)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("version column \"%s\" must be of an integer type",
							NameStr(*version_column)),
					 errdetail("It is of type %s.", format_type_be(vtype))));
	}
	/* the machine must exist */
	(void) IdemMachineGet(VARDATA_ANY(machine), VARSIZE_ANY_EXHDR(machine));

	cat = IdemGetCatalog();
	args[0] = ObjectIdGetDatum(relid);
	args[1] = NameGetDatum(status_column);
	args[2] = PointerGetDatum(machine);
	args[3] = version_column ? NameGetDatum(version_column) : (Datum) 0;
	nulls[3] = version_column ? ' ' : 'n';
	args[4] = BoolGetDatum(check_inserts);
	(void) IdemOwnerRun(cat.bindings, IDEM_RUN_LATEST,
						"INSERT INTO idempotency.machine_bindings"
						" (rel, status_column, machine, version_column, check_inserts)"
						" VALUES ($1::pg_catalog.regclass, $2, $3, $4, $5)"
						" ON CONFLICT (rel) DO UPDATE SET"
						" status_column = EXCLUDED.status_column,"
						" machine = EXCLUDED.machine,"
						" version_column = EXCLUDED.version_column,"
						" check_inserts = EXCLUDED.check_inserts,"
						" bound_at = pg_catalog.now()",
						5, argtypes, args, nulls, NULL, NULL);

	IdemBindTriggers(rel, NameStr(*status_column), true, check_inserts,
					 fcinfo->flinfo->fn_oid);
	table_close(rel, NoLock);
	IdemBindingCacheReset();
	PG_RETURN_VOID();
}

/*
 * idem_machine_unbind(rel regclass) returns boolean
 *
 * Removes a table's binding and its guard trigger; false if it was not
 * bound.  Only the table's owner may unbind it.
 */
Datum
idem_machine_unbind(PG_FUNCTION_ARGS)
{
	Oid			relid = DatumGetObjectId(IdemArgNotNull(fcinfo, 0, "table"));
	Relation	rel;
	IdemCatalog cat;
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1];
	uint64		removed;

	PreventCommandIfReadOnly("idem_machine_unbind()");
	rel = IdemBindOpen(relid);
	cat = IdemGetCatalog();
	args[0] = ObjectIdGetDatum(relid);
	removed = IdemOwnerRun(cat.bindings, IDEM_RUN_LATEST,
						   "DELETE FROM idempotency.machine_bindings"
						   " WHERE rel OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
						   1, argtypes, args, NULL, NULL, NULL);
	IdemBindTriggers(rel, NULL, false, false, fcinfo->flinfo->fn_oid);
	table_close(rel, NoLock);
	IdemBindingCacheReset();
	PG_RETURN_BOOL(removed > 0);
}
