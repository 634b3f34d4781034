/*
 * inval.c
 *	  The extension's cache invalidation: one relcache callback and one
 *	  role callback, dispatching to the parts that cache something, and
 *	  generational caches freed at transaction end.
 *
 * PostgreSQL gives each backend room for only ten relcache callbacks
 * (MAX_RELCACHE_CALLBACKS), shared by every loaded library; Citus alone
 * takes five.  So the extension registers exactly one, and each part that
 * caches something derived from a relation (catalog OIDs, namespaces,
 * machines, bindings, the claims table's layout) registers a handler here
 * instead.  Likewise one syscache callback per catalog: pg_authid and
 * pg_auth_members for privileges already checked, pg_namespace for the
 * schema of the internal tables.
 *
 * Handlers only mark things stale or retire a generation; they never free
 * memory a caller might be using, and never do catalog access, since they
 * run wherever invalidation messages are processed.
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "inval.h"

static IdemRelcacheHandler idem_relcache_handlers[IDEM_INVAL_MAX_HANDLERS];
static int	idem_relcache_nhandlers = 0;
static IdemInvalHandler idem_role_handlers[IDEM_INVAL_MAX_HANDLERS];
static int	idem_role_nhandlers = 0;
static IdemInvalHandler idem_schema_handlers[IDEM_INVAL_MAX_HANDLERS];
static int	idem_schema_nhandlers = 0;

/* Bumped by every invalidation we see, to detect one during a lookup */
static uint64 idem_inval_counter = 0;

/* Generational caches with something to free at transaction end */
static IdemGenCache *idem_gen_caches = NULL;

/* The relcache callback: tell every part */
static void
IdemInvalRelcacheCallback(Datum arg pg_attribute_unused(), Oid relid)
{
	int			i;

	idem_inval_counter++;
	for (i = 0; i < idem_relcache_nhandlers; i++)
		idem_relcache_handlers[i] (relid);
}

/* A role, a membership or a schema changed: arg says which handlers */
static void
IdemInvalSyscacheCallback(Datum arg, int cacheid pg_attribute_unused(),
						  uint32 hashvalue pg_attribute_unused())
{
	bool		schemas = DatumGetBool(arg);
	IdemInvalHandler *handlers = schemas ? idem_schema_handlers : idem_role_handlers;
	int			n = schemas ? idem_schema_nhandlers : idem_role_nhandlers;
	int			i;

	idem_inval_counter++;
	for (i = 0; i < n; i++)
		handlers[i] ();
}

/* Free retired generations once no caller can hold a pointer into them */
static void
IdemInvalXactCallback(XactEvent event, void *arg pg_attribute_unused())
{
	IdemGenCache *gc;

	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT &&
		event != XACT_EVENT_PREPARE &&
		event != XACT_EVENT_PARALLEL_COMMIT &&
		event != XACT_EVENT_PARALLEL_ABORT)
		return;
	for (gc = idem_gen_caches; gc != NULL; gc = gc->next)
	{
		ListCell   *lc;

		if (gc->reset_at_end != NULL)
		{
			IdemInvalHandler reset = gc->reset_at_end;

			gc->reset_at_end = NULL;
			reset();			/* forgets its pointers, retires the generation */
		}

		foreach(lc, gc->retired)
			MemoryContextDelete((MemoryContext) lfirst(lc));
		list_free(gc->retired);
		gc->retired = NIL;
	}
}

/* Register the callbacks; called once from _PG_init, before the parts */
void
IdemInvalInit(void)
{
	CacheRegisterRelcacheCallback(IdemInvalRelcacheCallback, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHOID, IdemInvalSyscacheCallback, BoolGetDatum(false));
	CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, IdemInvalSyscacheCallback, BoolGetDatum(false));
	CacheRegisterSyscacheCallback(NAMESPACEOID, IdemInvalSyscacheCallback, BoolGetDatum(true));
	RegisterXactCallback(IdemInvalXactCallback, NULL);
}

/* Add a handler to a table of them */
static void
IdemInvalAdd(void **table, int *n, void *handler)
{
	if (*n >= IDEM_INVAL_MAX_HANDLERS)
		elog(FATAL, "too many idempotency invalidation handlers");
	table[(*n)++] = handler;
}

/* Call handler on every relcache invalidation */
void
IdemInvalOnRelcache(IdemRelcacheHandler handler)
{
	IdemInvalAdd((void **) idem_relcache_handlers, &idem_relcache_nhandlers,
				 (void *) handler);
}

/* Call handler whenever roles or role memberships change */
void
IdemInvalOnRoles(IdemInvalHandler handler)
{
	IdemInvalAdd((void **) idem_role_handlers, &idem_role_nhandlers,
				 (void *) handler);
}

/* Call handler whenever a schema changes */
void
IdemInvalOnSchemas(IdemInvalHandler handler)
{
	IdemInvalAdd((void **) idem_schema_handlers, &idem_schema_nhandlers,
				 (void *) handler);
}

/*
 * A number that changes whenever an invalidation arrives.  A part that
 * builds a cache entry from lookups which may themselves process
 * invalidations compares it before and after, and builds again if it moved.
 */
uint64
IdemInvalCounter(void)
{
	return idem_inval_counter;
}

/* The memory context of the current generation, created on first use */
MemoryContext
IdemGenCacheContext(IdemGenCache *gc)
{
	if (gc->cxt == NULL)
	{
		gc->cxt = AllocSetContextCreate(CacheMemoryContext, "idempotency cache",
										ALLOCSET_SMALL_SIZES);
		MemoryContextSetIdentifier(gc->cxt, gc->name);
	}
	return gc->cxt;
}

/* Put gc on the list the transaction-end callback sweeps */
static void
IdemGenCacheRegister(IdemGenCache *gc)
{
	if (!gc->registered)
	{
		gc->next = idem_gen_caches;
		idem_gen_caches = gc;
		gc->registered = true;
	}
}

/*
 * Have the cache's owner reset it (drop its pointers into the current
 * generation and retire it) at the end of this transaction: for entries
 * read in parallel mode, under the transaction's snapshot rather than the
 * latest state, which must not outlive the transaction.
 */
void
IdemGenCacheResetAtEnd(IdemGenCache *gc, IdemInvalHandler reset)
{
	IdemGenCacheRegister(gc);
	gc->reset_at_end = reset;
}

/* Retire the current generation; it is freed at transaction end */
void
IdemGenCacheRetire(IdemGenCache *gc)
{
	MemoryContext oldcxt;

	if (gc->cxt == NULL)
		return;
	IdemGenCacheRegister(gc);
	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	gc->retired = lappend(gc->retired, gc->cxt);
	MemoryContextSwitchTo(oldcxt);
	gc->cxt = NULL;
}
