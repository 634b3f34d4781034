/*
 * guard.c
 *	  idem_state_guard(): the trigger that enforces a state machine on every
 *	  plain UPDATE of a bound status column.
 *
 * idem_machine_bind installs it as AFTER UPDATE FOR EACH ROW WHEN the status
 * changed (and, with check_inserts, AFTER INSERT), so that hand-written SQL
 * and other applications cannot break the machine either.  AFTER, with no
 * column list, because it must judge the row as stored: a BEFORE trigger
 * of the user's that fires later, or an UPDATE that never names the
 * status, could otherwise change the status behind a BEFORE guard's back.  On UPDATE it allows
 * keeping the same status and any declared transition, and refuses
 * anything else with ERRCODE_IDEM_ILLEGAL_TRANSITION.  A NULL status means
 * "no state yet": it may only move to an initial state.  On INSERT it
 * requires an initial state.
 */
#include "postgres.h"

#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/rel.h"

#include "binding.h"
#include "base/base.h"
#include "machine.h"

PG_FUNCTION_INFO_V1(idem_state_guard);

/* The state number of a row's status, -1 for NULL; text in *name */
static int
IdemGuardState(IdemBinding *b, IdemMachine *m, HeapTuple tuple,
			   TupleDesc desc, char **name)
{
	bool		isnull;
	Datum		value = heap_getattr(tuple, b->status_attno, desc, &isnull);

	if (isnull)
	{
		*name = NULL;
		return -1;
	}
	*name = IdemBindingStatusText(b, value);
	return IdemMachineRequireState(m, *name, strlen(*name));
}

/* The names of a machine's initial states, for error details */
static char *
IdemInitialStates(IdemMachine *m)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	for (i = 0; i < m->nstates; i++)
	{
		if (!m->initial[i])
			continue;
		if (buf.len > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfoString(&buf, m->states[i]);
	}
	return buf.len > 0 ? buf.data : "(none)";
}

/*
 * idem_state_guard() returns trigger
 */
Datum
idem_state_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	TupleDesc	desc;
	IdemBinding *b;
	IdemMachine *m;
	char	   *new_name;
	int			new_state;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("idem_state_guard() must be called as a trigger")));
	if (!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!(TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) ||
		  TRIGGER_FIRED_BY_INSERT(trigdata->tg_event)))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("idem_state_guard() must be fired for INSERT or UPDATE FOR EACH ROW")));

	rel = trigdata->tg_relation;
	desc = RelationGetDescr(rel);
	b = IdemBindingGet(RelationGetRelid(rel), false);
	m = IdemMachineGet(b->machine, strlen(b->machine));

	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
	{
		new_state = IdemGuardState(b, m, trigdata->tg_trigtuple, desc, &new_name);
		if (new_state < 0 || !m->initial[new_state])
			ereport(ERROR,
					(errcode(ERRCODE_IDEM_ILLEGAL_TRANSITION),
					 errmsg("new row of \"%s\" must start in an initial state of state machine \"%s\"",
							RelationGetRelationName(rel), m->name),
					 errdetail("Column \"%s\" is %s%s%s; the initial states are %s.",
							   b->status_column,
							   new_name ? "\"" : "", new_name ? new_name : "NULL",
							   new_name ? "\"" : "", IdemInitialStates(m))));
		return PointerGetDatum(trigdata->tg_trigtuple);
	}
	else
	{
		char	   *old_name;
		int			old_state = IdemGuardState(b, m, trigdata->tg_trigtuple, desc, &old_name);

		new_state = IdemGuardState(b, m, trigdata->tg_newtuple, desc, &new_name);
		if (old_state == new_state)
			return PointerGetDatum(trigdata->tg_newtuple);	/* same status */
		if (new_state >= 0 &&
			(old_state < 0 ? m->initial[new_state] :
			 IdemMachineStep(m, old_state, new_state) == IDEM_CAS_APPLIED))
			return PointerGetDatum(trigdata->tg_newtuple);

		ereport(ERROR,
				(errcode(ERRCODE_IDEM_ILLEGAL_TRANSITION),
				 errmsg("illegal state transition for \"%s\"", RelationGetRelationName(rel)),
				 errdetail("State machine \"%s\" has no transition from %s%s%s to %s%s%s.",
						   m->name,
						   old_name ? "\"" : "", old_name ? old_name : "NULL", old_name ? "\"" : "",
						   new_name ? "\"" : "", new_name ? new_name : "NULL", new_name ? "\"" : ""),
				 errtableconstraint(rel, "idem_state_guard")));
	}
	return PointerGetDatum(NULL);	/* not reached */
}
