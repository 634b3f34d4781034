/*
 * idempotency.c
 *	  Module entry point: the one _PG_init, which initialises every part.
 *
 * Parts that need shared memory or background workers only set those up
 * when loaded through shared_preload_libraries; everything else works when
 * the library is loaded on first use.
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/guc.h"

#include "claimcache.h"
#include "idempotency.h"
#include "spectoken.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* Module load: define GUCs, hooks and callbacks of every part */
void
_PG_init(void)
{
	IdemCatalogInit();
	IdemClaimCacheInit();
	IdemSpecTokenInit();
	IdemNamespaceInit();
	IdemMachineInit();
	IdemBindingInit();
	IdemShmemInit();
	IdemWorkerInit();

#if PG_VERSION_NUM >= 150000
	MarkGUCPrefixReserved("idempotency");
#else
	EmitWarningsOnPlaceholders("idempotency");
#endif
}
