/*
 * ownerspi.h
 *	  Running SQL on the extension's internal tables as their owner.
 */
#ifndef IDEM_OWNERSPI_H
#define IDEM_OWNERSPI_H

#include "postgres.h"

#include "access/htup.h"
#include "access/tupdesc.h"

/* Flags of IdemOwnerRun */
#define IDEM_RUN_READ_ONLY	0x01	/* a read: no command counter increment */
#define IDEM_RUN_LATEST		0x02	/* read the latest committed state */

/* State saved while running SPI as another role */
typedef struct IdemOwnerScope
{
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;
} IdemOwnerScope;

/*
 * Called for each row a statement of IdemOwnerRun returns, in the caller's
 * memory context: copy out what must outlive the statement.
 */
typedef void (*IdemRowCallback) (HeapTuple tuple, TupleDesc desc, void *arg);

extern uint64 IdemOwnerRun(Oid relid, int flags, const char *sql, int nargs,
						   Oid *argtypes, Datum *values, const char *nulls,
						   IdemRowCallback each, void *arg);
extern uint64 IdemRunAs(Oid roleid, int flags, const char *sql, int nargs,
						Oid *argtypes, Datum *values, const char *nulls,
						IdemRowCallback each, void *arg);
extern void IdemOwnerScopeBegin(IdemOwnerScope *scope, Oid relid);
extern void IdemSpiScopeBegin(IdemOwnerScope *scope, Oid roleid,
							  bool pin_search_path);
extern void IdemOwnerScopeEnd(IdemOwnerScope *scope);

#endif							/* IDEM_OWNERSPI_H */
