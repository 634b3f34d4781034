/*
 * subxact.c
 *	  Ending an internal subtransaction (BeginInternalSubTransaction) the
 *	  way PL/pgSQL's exception blocks do: the caller's memory context and
 *	  resource owner current again, which releasing or rolling back does
 *	  not restore by itself.
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/memutils.h"

#include "subxact.h"

/* Release (commit) or roll back the current internal subtransaction */
void
IdemSubxactEnd(bool commit, MemoryContext cxt, ResourceOwner owner)
{
	if (commit)
		ReleaseCurrentSubTransaction();
	else
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
}

/*
 * In the PG_CATCH of an internal subtransaction: the error copied into
 * cxt (nothing of it stays in ErrorContext, which FlushErrorState resets),
 * the subtransaction rolled back; cxt is current on return
 */
ErrorData *
IdemSubxactCaught(MemoryContext cxt, ResourceOwner owner)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	IdemSubxactEnd(false, cxt, owner);
	return edata;
}
