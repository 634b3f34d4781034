/*
 * init.c
 *	  Module entry point: the one _PG_init, every hook the extension
 *	  installs, and the sizing of its shared memory.
 *
 * _PG_init defines the settings (guc.c), initialises every part, bottom
 * up, registers the callbacks by which a lower folder reaches a higher one
 * (the store's Citus check, the claims' Citus shard functions, the
 * filters' wake-up of the purge launcher), and installs the hooks.  Parts
 * do not install hooks of their own: each exports what it does at a hook,
 * and the hooks here call them in a fixed order, so that which runs first
 * does not depend on the order of calls in _PG_init.
 *
 * Parts that need shared memory or background workers only set those up
 * when loaded through shared_preload_libraries; everything else works when
 * the library is loaded on first use.
 */
#include "postgres.h"

#include "catalog/objectaccess.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "tcop/utility.h"
#include "utils/guc.h"

#include "base/base.h"
#include "catalog/idem_catalog.h"
#include "store/store.h"
#include "claim/claim.h"
#include "statemachine/statemachine.h"
#include "purge/purge.h"
#include "citus/citus.h"
#include "init.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

#ifdef IDEM_HAVE_SHMEM_REQUEST_HOOK
static shmem_request_hook_type prev_shmem_request_hook = NULL;
#endif
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static ExecutorStart_hook_type prev_executor_start = NULL;
static ProcessUtility_hook_type prev_process_utility = NULL;
static object_access_hook_type prev_object_access = NULL;

/* What a claim asks of a Citus cluster (citus/), for claim/ */
static const IdemClaimCluster idem_citus_for_claims = {
	.check_plain_claim = IdemCitusCheckPlainClaim,
	.shard_enter = IdemCitusShardEnter,
	.shard_namespace = IdemCitusShardNamespace,
};

/* Bytes of shared memory the extension needs */
static Size
IdemShmemSize(void)
{
	Size		size = IdemSharedStateSize();

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
#ifdef IDEM_HAVE_SHMEM_REQUEST_HOOK
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
#endif
	RequestAddinShmemSpace(IdemShmemSize());
	IdemSharedStateRequest();
}

/* Create or attach to the shared state of every part */
static void
IdemShmemStartup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	IdemSharedStateInit();
	IdemStatsShmemInit();
	IdemClaimCacheShmemInit();
	IdemSpecTokenShmemInit();
	IdemGenFilterShmemInit();
	IdemGenStripeShmemInit();
	LWLockRelease(AddinShmemInitLock);
}

/*
 * ExecutorStart: count the statement for the namespace privileges (see
 * IdemNsGrantsRefresh); a hand-made write to the claims announces
 * (generation.c); after a coordinator claim, no write to a distributed
 * table, and a shard move's claims move too (citus.c)
 */
static void
IdemExecutorStart(QueryDesc *queryDesc, int eflags)
{
	IdemNsGrantExecutorStart();
	IdemGenExecutorStart(queryDesc, eflags);
	IdemCitusExecutorStart(queryDesc, eflags);

	if (prev_executor_start)
		prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

/*
 * ProcessUtility: before, a COPY into the claims announces and DROP
 * EXTENSION drops the generations (generation.c), a TRUNCATE forgets the
 * cached lengths (claimcache.c), a COPY into a distributed table after a
 * coordinator claim is refused (citus.c); after, DROP OWNED BY drops the
 * roles' namespace privileges too (nsgrant.c)
 */
static void
IdemProcessUtility(PlannedStmt *pstmt, const char *queryString,
				   bool readOnlyTree, ProcessUtilityContext context,
				   ParamListInfo params, QueryEnvironment *queryEnv,
				   DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	IdemGenProcessUtility(pstmt);
	/* a TRUNCATE may shorten a table in place: see IdemClaimCacheForgetLengths */
	if (IsA(parsetree, TruncateStmt))
		IdemClaimCacheForgetLengths();
	IdemCitusProcessUtility(pstmt);

	if (prev_process_utility)
		prev_process_utility(pstmt, queryString, readOnlyTree, context,
							 params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);

	IdemNsGrantAfterUtility(parsetree);
}

/* object_access_hook: the drop of a role (nsgrant.c) */
static void
IdemObjectAccess(ObjectAccessType access, Oid classId, Oid objectId,
				 int subId, void *arg)
{
	if (prev_object_access)
		prev_object_access(access, classId, objectId, subId, arg);
	IdemNsGrantObjectAccess(access, classId, objectId);
}

/* Module load: define GUCs, initialise every part, install the hooks */
void
_PG_init(void)
{
	IdemDefineGucs();

	/* the parts, bottom up */
	IdemInvalInit();
	IdemCatalogInit();
	IdemClaimRelInit();
	IdemClaimCacheInit();
	IdemSpecTokenInit();
	IdemNamespaceInit();
	IdemNsGrantInit();
	IdemMachineInit();
	IdemBindingInit();
	IdemCitusInit();
	IdemCitusShardInit();
	IdemGenerationInit();
	IdemWorkerInit();

	/* the calls that go up, as callbacks */
	IdemStoreSetClaimCheck(IdemCitusCheckClaim);
	IdemClaimSetCluster(&idem_citus_for_claims);
	IdemGenSetLauncherWake(IdemLauncherWake);

	/* the hooks */
	if (process_shared_preload_libraries_in_progress)
	{
#ifdef IDEM_HAVE_SHMEM_REQUEST_HOOK
		prev_shmem_request_hook = shmem_request_hook;
		shmem_request_hook = IdemShmemRequest;
#else
		IdemShmemRequest();
#endif
		prev_shmem_startup_hook = shmem_startup_hook;
		shmem_startup_hook = IdemShmemStartup;
	}
	prev_object_access = object_access_hook;
	object_access_hook = IdemObjectAccess;
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = IdemExecutorStart;
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = IdemProcessUtility;

	MarkGUCPrefixReserved("idempotency");
}
