/*
 * shmem.c
 *	  The extension's shared memory, available with shared_preload_libraries.
 *
 * Shared memory can only be reserved while the postmaster loads
 * shared_preload_libraries.  When the library is loaded later, on first use
 * in a backend, idem_shared stays NULL: claims work the same, only the
 * shared statistics are missing, and idem_stats says so.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"

#include "store/store.h"
#include "base.h"
#include "spectoken.h"
#include "shmem.h"
#include "catalog/idem_catalog.h"

IdemSharedState *idem_shared = NULL;

#if PG_VERSION_NUM >= 150000
static shmem_request_hook_type prev_shmem_request_hook = NULL;
#endif
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* Bytes of shared memory the extension needs */
static Size
IdemShmemSize(void)
{
	Size		size = MAXALIGN(sizeof(IdemSharedState));

	size = add_size(size, IdemStatsShmemSize());
	size = add_size(size, IdemClaimCacheShmemSize());
	size = add_size(size, IdemSpecTokenShmemSize());
	size = add_size(size, IdemGenFilterShmemSize());
	size = add_size(size, IdemGenStripeShmemSize());
	return size;
}

/* Reserve shared memory and our LWLock */
static void
IdemShmemRequest(void)
{
#if PG_VERSION_NUM >= 150000
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
#endif
	RequestAddinShmemSpace(IdemShmemSize());
	RequestNamedLWLockTranche("idempotency", 1);
}

/* Create or attach to the shared state */
static void
IdemShmemStartup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	idem_shared = ShmemInitStruct("idempotency", sizeof(IdemSharedState),
								  &found);
	if (!found)
	{
		idem_shared->lock = &(GetNamedLWLockTranche("idempotency"))->lock;
		idem_shared->launcher_latch = NULL;
	}
	IdemStatsShmemInit();
	IdemClaimCacheShmemInit();
	IdemSpecTokenShmemInit();
	IdemGenFilterShmemInit();
	IdemGenStripeShmemInit();
	LWLockRelease(AddinShmemInitLock);
}

/* Install the hooks; a no-op unless loaded by shared_preload_libraries */
void
IdemShmemInit(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;

	IdemStatsDefineGucs();
	IdemClaimCacheDefineGucs();
	IdemGenFilterDefineGucs();

#if PG_VERSION_NUM >= 150000
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = IdemShmemRequest;
#else
	IdemShmemRequest();
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = IdemShmemStartup;
}

/* Is the shared state there? */
bool
IdemShmemReady(void)
{
	return idem_shared != NULL;
}
