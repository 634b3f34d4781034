/*
 * shmem.c
 *	  The extension's shared state, available with shared_preload_libraries.
 *
 * Shared memory can only be reserved while the postmaster loads
 * shared_preload_libraries.  When the library is loaded later, on first use
 * in a backend, idem_shared stays NULL: claims work the same, only the
 * shared statistics are missing, and idem_stats says so.
 *
 * This file holds the one structure every part shares (its lock, the
 * launcher's latch).  What each part needs besides is sized and created
 * by init.c's shared-memory hooks, which call the parts in turn.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"

#include "shmem.h"

IdemSharedState *idem_shared = NULL;

/* Bytes of the shared state itself */
Size
IdemSharedStateSize(void)
{
	return MAXALIGN(sizeof(IdemSharedState));
}

/* Reserve the lock of the shared state; from shmem_request_hook */
void
IdemSharedStateRequest(void)
{
	RequestNamedLWLockTranche("idempotency", 1);
}

/* Create or attach to the shared state; caller holds AddinShmemInitLock */
void
IdemSharedStateInit(void)
{
	bool		found;

	idem_shared = ShmemInitStruct("idempotency", sizeof(IdemSharedState),
								  &found);
	if (!found)
	{
		idem_shared->lock = &(GetNamedLWLockTranche("idempotency"))->lock;
		idem_shared->launcher_latch = NULL;
	}
}

/* Is the shared state there? */
bool
IdemShmemReady(void)
{
	return idem_shared != NULL;
}
