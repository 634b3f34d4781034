/*
 * init.c
 *	  Module entry point: the one _PG_init, which initialises every part.
 *
 * Parts that need shared memory or background workers only set those up
 * when loaded through shared_preload_libraries; everything else works when
 * the library is loaded on first use.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "base/base.h"
#include "catalog/idem_catalog.h"
#include "store/store.h"
#include "statemachine/statemachine.h"
#include "purge/purge.h"
#include "citus/citus.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* Module load: define GUCs, hooks and callbacks of every part */
void
_PG_init(void)
{
	IdemInvalInit();
	IdemCatalogInit();
	IdemClaimRelInit();
	IdemClaimCacheInit();
	IdemSpecTokenInit();
	IdemNamespaceInit();
	IdemNsGrantInit();
	IdemMachineInit();
	IdemBindingInit();
	IdemShmemInit();
	IdemCitusInit();
	IdemCitusShardInit();
	IdemPurgeInit();
	IdemGenerationInit();
	IdemWorkerInit();

#if PG_VERSION_NUM >= 150000
	MarkGUCPrefixReserved("idempotency");
#else
	EmitWarningsOnPlaceholders("idempotency");
#endif
}
