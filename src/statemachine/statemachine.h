/*
 * statemachine.h
 *	  Public interface of the state machines: machines, bindings, compare-and-set, guards.
 *
 * The one header other folders include; the headers it includes are the
 * folder's own.
 */
#ifndef IDEM_STATEMACHINE_H
#define IDEM_STATEMACHINE_H

#include "machine.h"
#include "binding.h"

#endif							/* IDEM_STATEMACHINE_H */
