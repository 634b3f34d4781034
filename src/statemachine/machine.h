/*
 * machine.h
 *	  Declared state machines: their definitions and the per-backend cache.
 */
#ifndef IDEM_MACHINE_H
#define IDEM_MACHINE_H

#include "postgres.h"

#include "base/base.h"

/* Bounds on definitions, documented in docs/reference.md */
#define IDEM_MAX_MACHINE_NAME_BYTES	128
#define IDEM_MAX_STATE_BYTES		128
#define IDEM_MAX_STATES				256

/* Outcomes of a compare-and-set, as idem_cas_status returns them */
typedef enum IdemCasOutcome
{
	IDEM_CAS_APPLIED,
	IDEM_CAS_ALREADY,
	IDEM_CAS_REJECTED,
	IDEM_CAS_STALE,
	IDEM_CAS_MISSING
} IdemCasOutcome;

/* A machine as a backend caches it; states are numbered 0..nstates-1 */
typedef struct IdemMachine
{
	char		name[IDEM_MAX_MACHINE_NAME_BYTES + 1];	/* hash key */
	int			nstates;
	char	  **states;			/* state names */
	int		   *state_len;		/* their lengths */
	int			hash_mask;		/* size of the state hash, minus one */
	int16	   *hash;			/* open addressing: state number or -1 */
	uint64	   *edges;			/* nstates rows of (nstates + 63) / 64 words */
	int			words;			/* words per row */
	bool	   *initial;		/* no transition leads into the state */
} IdemMachine;

extern void IdemMachineInit(void);
extern IdemMachine *IdemMachineGet(const char *name, int len);
extern int	IdemMachineState(const IdemMachine *m, const char *state, int len);
extern int	IdemMachineRequireState(const IdemMachine *m, const char *state, int len);
extern IdemCasOutcome IdemMachineStep(const IdemMachine *m, int from, int to);
extern const char *IdemCasOutcomeName(IdemCasOutcome outcome);

extern void IdemMachineInit(void);

#endif							/* IDEM_MACHINE_H */
