/*
 * machine.c
 *	  Declared state machines: their definitions and the per-backend cache.
 *
 * A machine is a map from each state to the states it may move to, such as
 * {"PENDING": ["PAID", "CANCELLED"], "PAID": ["SHIPPED"]}, stored as jsonb in
 * idempotency.machines.  States named only as targets are states too
 * (terminal ones).  A state no transition leads into is an initial state.
 *
 * Every compare-and-set consults a machine, so each backend compiles the
 * machines it uses into a small structure: states numbered in order of
 * first appearance, an open-addressing hash from name to number, and a
 * bitset of edges.  A step is two hash probes and a bit test.
 *
 * The cache follows the table through relcache invalidations of
 * idempotency.machines, sent by its statement trigger.  Compiled machines
 * of an invalidated generation are kept until the end of the transaction,
 * since a caller may still hold a pointer to one.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "machine.h"

PG_FUNCTION_INFO_V1(idem_machine_define);
PG_FUNCTION_INFO_V1(idem_machine_drop);
PG_FUNCTION_INFO_V1(idem_cas_status);

/* Cache entry: a machine name and its compiled form */
typedef struct IdemMachineEntry
{
	char		name[IDEM_MAX_MACHINE_NAME_BYTES + 1];
	IdemMachine *machine;
} IdemMachineEntry;

static IdemGenCache idem_machine_gen = IDEM_GEN_CACHE_INIT("idempotency machines");
static HTAB *idem_machine_cache = NULL;
static IdemMachine *idem_machine_last = NULL;
static Oid	idem_machine_relid = InvalidOid;

static const char *const idem_cas_outcome_names[] = {
	"applied", "already", "rejected", "stale", "missing"
};

/* The text idem_cas_status returns for an outcome */
const char *
IdemCasOutcomeName(IdemCasOutcome outcome)
{
	return idem_cas_outcome_names[outcome];
}

/* Forget the compiled machines; their memory goes at transaction end */
static void
IdemMachineCacheReset(void)
{
	IdemGenCacheRetire(&idem_machine_gen);
	idem_machine_cache = NULL;
	idem_machine_last = NULL;
}

/* idempotency.machines changed: drop the compiled machines */
static void
IdemMachineInvalidate(Oid relid)
{
	if (relid == InvalidOid || relid == idem_machine_relid)
		IdemMachineCacheReset();
}

/* Register the invalidation handler; called from _PG_init */
void
IdemMachineInit(void)
{
	IdemInvalOnRelcache(IdemMachineInvalidate);
}

/* Number of the state called name, or -1 */
int
IdemMachineState(const IdemMachine *m, const char *state, int len)
{
	uint32		h = hash_bytes((const unsigned char *) state, len);
	int			i;

	for (i = h & m->hash_mask;; i = (i + 1) & m->hash_mask)
	{
		int			s = m->hash[i];

		if (s < 0)
			return -1;
		if (m->state_len[s] == len && memcmp(m->states[s], state, len) == 0)
			return s;
	}
}

/* Number of a state, or an error naming the machine */
int
IdemMachineRequireState(const IdemMachine *m, const char *state, int len)
{
	int			s = IdemMachineState(m, state, len);

	if (s < 0)
		ereport(ERROR,
				(errcode(ERRCODE_IDEM_UNKNOWN_STATE),
				 errmsg("\"%.*s\" is not a state of state machine \"%s\"",
						len, state, m->name)));
	return s;
}

/* Add a state while compiling; returns its number */
static int
IdemMachineAddState(IdemMachine *m, const char *state, int len)
{
	uint32		h;
	int			i;
	int			s = IdemMachineState(m, state, len);

	if (s >= 0)
		return s;
	IdemValidateName("state name", state, len, IDEM_MAX_STATE_BYTES);
	if (m->nstates >= IDEM_MAX_STATES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("state machine \"%s\" has too many states", m->name),
				 errdetail("A machine may have at most %d states.", IDEM_MAX_STATES)));
	s = m->nstates++;
	m->states[s] = pnstrdup(state, len);
	m->state_len[s] = len;
	h = hash_bytes((const unsigned char *) state, len);
	for (i = h & m->hash_mask; m->hash[i] >= 0; i = (i + 1) & m->hash_mask)
		;
	m->hash[i] = (int16) s;
	return s;
}

/* Raise the error for a transitions value that is not of the right shape */
static void
IdemBadTransitions(const char *machine, const char *detail_fmt, const char *arg)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid transitions for state machine \"%s\"", machine),
			 arg ? errdetail(detail_fmt, arg) : errdetail("%s", detail_fmt),
			 errhint("Give a JSON object mapping each state to an array of the states it may move to, such as {\"PENDING\": [\"PAID\", \"CANCELLED\"], \"PAID\": [\"SHIPPED\"]}.")));
}

/*
 * Validate transitions and compile them into a machine allocated in the
 * current memory context.  Raises an error for anything that is not a map
 * of state to an array of state names.
 */
static IdemMachine *
IdemMachineCompile(const char *name, Jsonb *transitions)
{
	IdemMachine *m = palloc0(sizeof(IdemMachine));
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			from = -1;
	int			i;
	int			hashsize = 1;
	/* edges as (from, to) pairs until the number of states is known */
	int		   *pairs;
	int			npairs = 0;
	int			maxpairs = 64;

	strlcpy(m->name, name, sizeof(m->name));
	if (!JB_ROOT_IS_OBJECT(transitions) || JB_ROOT_IS_SCALAR(transitions))
		IdemBadTransitions(name, "The value is not a JSON object.", NULL);
	if (JB_ROOT_COUNT(transitions) == 0)
		IdemBadTransitions(name, "The object is empty; a machine needs at least one state.", NULL);

	while (hashsize < 2 * IDEM_MAX_STATES)
		hashsize *= 2;
	m->hash_mask = hashsize - 1;
	m->hash = palloc(sizeof(int16) * hashsize);
	for (i = 0; i < hashsize; i++)
		m->hash[i] = -1;
	m->states = palloc(sizeof(char *) * IDEM_MAX_STATES);
	m->state_len = palloc(sizeof(int) * IDEM_MAX_STATES);
	pairs = palloc(sizeof(int) * 2 * maxpairs);

	it = JsonbIteratorInit(&transitions->root);
	tok = JsonbIteratorNext(&it, &v, false);	/* WJB_BEGIN_OBJECT */
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		switch (tok)
		{
			case WJB_KEY:
				from = IdemMachineAddState(m, v.val.string.val, v.val.string.len);
				tok = JsonbIteratorNext(&it, &v, false);
				if (tok != WJB_BEGIN_ARRAY)
					IdemBadTransitions(name, "The value of state \"%s\" is not an array.",
									   m->states[from]);
				break;
			case WJB_ELEM:
				if (v.type != jbvString)
					IdemBadTransitions(name, "The array of state \"%s\" holds something other than a state name.",
									   m->states[from]);
				if (npairs == maxpairs)
				{
					maxpairs *= 2;
					pairs = repalloc(pairs, sizeof(int) * 2 * maxpairs);
				}
				pairs[2 * npairs] = from;
				pairs[2 * npairs + 1] = IdemMachineAddState(m, v.val.string.val,
															v.val.string.len);
				npairs++;
				break;
			case WJB_BEGIN_ARRAY:
			case WJB_BEGIN_OBJECT:
				IdemBadTransitions(name, "The array of state \"%s\" holds something other than a state name.",
								   m->states[from]);
				break;
			default:
				break;			/* WJB_END_ARRAY, WJB_END_OBJECT */
		}
	}

	m->words = (m->nstates + 63) / 64;
	m->edges = palloc0(sizeof(uint64) * m->words * m->nstates);
	m->initial = palloc(sizeof(bool) * m->nstates);
	for (i = 0; i < m->nstates; i++)
		m->initial[i] = true;
	for (i = 0; i < npairs; i++)
	{
		int			f = pairs[2 * i];
		int			t = pairs[2 * i + 1];

		m->edges[f * m->words + t / 64] |= UINT64CONST(1) << (t % 64);
		if (f != t)
			m->initial[t] = false;
	}
	pfree(pairs);
	return m;
}

/*
 * The outcome of moving from state number from to state number to: already
 * there, an edge, or no edge.
 */
IdemCasOutcome
IdemMachineStep(const IdemMachine *m, int from, int to)
{
	if (from == to)
		return IDEM_CAS_ALREADY;
	if (m->edges[from * m->words + to / 64] & (UINT64CONST(1) << (to % 64)))
		return IDEM_CAS_APPLIED;
	return IDEM_CAS_REJECTED;
}

/* Copy a non-null jsonb of column 1 into *arg */
static void
IdemCopyJsonb(HeapTuple tuple, TupleDesc desc, void *arg)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, 1, &isnull);

	if (!isnull)
		*(Jsonb **) arg = DatumGetJsonbPCopy(d);
}

/* Copy a non-null text value of column 1 into *arg, as a C string */
static void
IdemCopyString(HeapTuple tuple, TupleDesc desc, void *arg)
{
	*(char **) arg = SPI_getvalue(tuple, desc, 1);
}

/* Read a machine's transitions from its table; NULL if there is none */
static Jsonb *
IdemMachineFetch(Oid relid, const char *name)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];
	Jsonb	   *transitions = NULL;

	args[0] = CStringGetTextDatum(name);
	(void) IdemOwnerRun(relid, IDEM_RUN_READ_ONLY | IDEM_RUN_LATEST,
						"SELECT transitions FROM idempotency.machines"
						" WHERE name OPERATOR(pg_catalog.=) $1",
						1, argtypes, args, NULL, IdemCopyJsonb, &transitions);
	return transitions;
}

/*
 * The compiled machine called name, loading it on a miss.  Raises an error
 * if there is no such machine.  The result stays valid until the end of the
 * current transaction.
 */
IdemMachine *
IdemMachineGet(const char *name, int len)
{
	char		key[IDEM_MAX_MACHINE_NAME_BYTES + 1];
	IdemMachineEntry *entry;
	IdemCatalog cat;
	Jsonb	   *transitions;
	MemoryContext oldcxt;
	IdemMachine *m;
	bool		found;

	/*
	 * Take in definitions committed since the last call, so that each
	 * statement of a READ COMMITTED transaction sees the current ones.
	 * Cheap when nothing is pending.
	 */
	AcceptInvalidationMessages();

	if (idem_machine_last != NULL && idem_machine_last->name[len] == '\0' &&
		memcmp(idem_machine_last->name, name, len) == 0)
		return idem_machine_last;

	IdemValidateName("machine name", name, len, IDEM_MAX_MACHINE_NAME_BYTES);
	memcpy(key, name, len);
	key[len] = '\0';

	if (idem_machine_cache != NULL)
	{
		entry = hash_search(idem_machine_cache, key, HASH_FIND, NULL);
		if (entry != NULL)
			return idem_machine_last = entry->machine;
	}

	cat = IdemGetCatalog();
	idem_machine_relid = cat.machines;
	transitions = IdemMachineFetch(cat.machines, key);
	if (transitions == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("state machine \"%s\" does not exist", key),
				 errhint("Define it with idem_machine_define().")));

	if (idem_machine_cache == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = IDEM_MAX_MACHINE_NAME_BYTES + 1;
		ctl.entrysize = sizeof(IdemMachineEntry);
		ctl.hcxt = IdemGenCacheContext(&idem_machine_gen);
		idem_machine_cache = hash_create("idempotency machines", 16, &ctl,
										 HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	oldcxt = MemoryContextSwitchTo(IdemGenCacheContext(&idem_machine_gen));
	m = IdemMachineCompile(key, transitions);
	MemoryContextSwitchTo(oldcxt);
	if (IsInParallelMode())
		IdemGenCacheResetAtEnd(&idem_machine_gen, IdemMachineCacheReset);	/* read under the query's snapshot */

	entry = hash_search(idem_machine_cache, key, HASH_ENTER, &found);
	entry->machine = m;
	return idem_machine_last = m;
}

/*
 * idem_machine_define(machine text, transitions jsonb) returns void
 *
 * Creates a state machine, or replaces the transitions of an existing one.
 */
Datum
idem_machine_define(PG_FUNCTION_ARGS)
{
	text	   *name = DatumGetTextPP(IdemArgNotNull(fcinfo, 0, "machine name"));
	Jsonb	   *transitions;
	char	   *cname;
	IdemCatalog cat;
	Oid			argtypes[2] = {TEXTOID, JSONBOID};
	Datum		args[2];

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("transitions must not be null")));
	transitions = PG_GETARG_JSONB_P(1);
	IdemValidateName("machine name", VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name),
					 IDEM_MAX_MACHINE_NAME_BYTES);
	cname = text_to_cstring(name);
	(void) IdemMachineCompile(cname, transitions);	/* validates */
	PreventCommandIfReadOnly("idem_machine_define()");

	cat = IdemGetCatalog();
	args[0] = PointerGetDatum(name);
	args[1] = JsonbPGetDatum(transitions);
	(void) IdemOwnerRun(cat.machines, IDEM_RUN_LATEST,
						"INSERT INTO idempotency.machines (name, transitions)"
						" VALUES ($1, $2) ON CONFLICT (name) DO UPDATE"
						" SET transitions = EXCLUDED.transitions,"
						" defined_at = pg_catalog.now()",
						2, argtypes, args, NULL, NULL, NULL);
	IdemMachineCacheReset();
	PG_RETURN_VOID();
}

/*
 * idem_machine_drop(machine text) returns void
 *
 * Drops a state machine.  Refused while a table is bound to it.
 */
Datum
idem_machine_drop(PG_FUNCTION_ARGS)
{
	text	   *name = DatumGetTextPP(IdemArgNotNull(fcinfo, 0, "machine name"));
	IdemCatalog cat;
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];
	char	   *bound = NULL;
	uint64		dropped;

	PreventCommandIfReadOnly("idem_machine_drop()");
	cat = IdemGetCatalog();
	args[0] = PointerGetDatum(name);
	/* lock the machine row first, so no binding can appear meanwhile */
	if (IdemOwnerRun(cat.machines, IDEM_RUN_LATEST,
					 "SELECT 1 FROM idempotency.machines"
					 " WHERE name OPERATOR(pg_catalog.=) $1 FOR UPDATE",
					 1, argtypes, args, NULL, NULL, NULL) == 1)
		(void) IdemOwnerRun(cat.machines, IDEM_RUN_LATEST,
							"SELECT pg_catalog.string_agg(rel::pg_catalog.text, ', '"
							" ORDER BY rel::pg_catalog.text)"
							" FROM idempotency.machine_bindings"
							" WHERE machine OPERATOR(pg_catalog.=) $1",
							1, argtypes, args, NULL, IdemCopyString, &bound);
	if (bound != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop state machine \"%s\" because tables are bound to it",
						text_to_cstring(name)),
				 errdetail("Bound tables: %s.", bound),
				 errhint("Unbind them first with idem_machine_unbind().")));
	dropped = IdemOwnerRun(cat.machines, IDEM_RUN_LATEST,
						   "DELETE FROM idempotency.machines"
						   " WHERE name OPERATOR(pg_catalog.=) $1",
						   1, argtypes, args, NULL, NULL, NULL);
	if (dropped == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("state machine \"%s\" does not exist", text_to_cstring(name))));
	IdemMachineCacheReset();
	PG_RETURN_VOID();
}

/*
 * idem_cas_status(machine text, current text, target text) returns text
 *
 * The pure checker: 'applied' if the machine has an edge from current to
 * target, 'already' if they are equal, 'rejected' otherwise.  Touches no
 * table.  The row form is idem_cas_row, in cas.c.
 */
Datum
idem_cas_status(PG_FUNCTION_ARGS)
{
	text	   *name = DatumGetTextPP(IdemArgNotNull(fcinfo, 0, "machine name"));
	text	   *current = DatumGetTextPP(IdemArgNotNull(fcinfo, 1, "current state"));
	text	   *target = DatumGetTextPP(IdemArgNotNull(fcinfo, 2, "target state"));
	IdemMachine *m = IdemMachineGet(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name));
	int			from = IdemMachineRequireState(m, VARDATA_ANY(current),
											   VARSIZE_ANY_EXHDR(current));
	int			to = IdemMachineRequireState(m, VARDATA_ANY(target),
											 VARSIZE_ANY_EXHDR(target));

	PG_RETURN_TEXT_P(cstring_to_text(IdemCasOutcomeName(IdemMachineStep(m, from, to))));
}
