/*
 * subxact.h
 *	  Ending an internal subtransaction back in the caller's memory
 *	  context and resource owner.
 */
#ifndef IDEM_SUBXACT_H
#define IDEM_SUBXACT_H

#include "postgres.h"

#include "utils/resowner.h"

extern void IdemSubxactEnd(bool commit, MemoryContext cxt, ResourceOwner owner);
extern ErrorData *IdemSubxactCaught(MemoryContext cxt, ResourceOwner owner);

#endif							/* IDEM_SUBXACT_H */
