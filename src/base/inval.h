/*
 * inval.h
 *	  The extension's one relcache callback and one role callback, and
 *	  generational caches freed at transaction end.
 */
#ifndef IDEM_INVAL_H
#define IDEM_INVAL_H

#include "postgres.h"

#include "nodes/pg_list.h"

/* Most parts that may listen to one kind of invalidation */
#define IDEM_INVAL_MAX_HANDLERS	12

/* A part's reaction to a relcache invalidation; InvalidOid means all */
typedef void (*IdemRelcacheHandler) (Oid relid);

/* A part's reaction to a change of roles, memberships or schemas */
typedef void (*IdemInvalHandler) (void);

/*
 * A cache whose entries live in one memory context per generation.  An
 * invalidation retires the current generation; retired generations are
 * freed at the end of the transaction, since a caller may still hold a
 * pointer into one until then.
 */
typedef struct IdemGenCache
{
	const char *name;			/* of its memory contexts */
	MemoryContext cxt;			/* current generation, or NULL */
	List	   *retired;		/* generations to free at transaction end */
	IdemInvalHandler reset_at_end;	/* the owner's reset, to call at
									 * transaction end, or NULL */
	bool		registered;		/* on the list swept at transaction end */
	struct IdemGenCache *next;
} IdemGenCache;

#define IDEM_GEN_CACHE_INIT(name)	{(name), NULL, NIL, NULL, false, NULL}

extern void IdemInvalInit(void);
extern void IdemInvalOnRelcache(IdemRelcacheHandler handler);
extern void IdemInvalOnRoles(IdemInvalHandler handler);
extern void IdemInvalOnSchemas(IdemInvalHandler handler);
extern uint64 IdemInvalCounter(void);

extern MemoryContext IdemGenCacheContext(IdemGenCache *gc);
extern void IdemGenCacheRetire(IdemGenCache *gc);
extern void IdemGenCacheResetAtEnd(IdemGenCache *gc, IdemInvalHandler reset);

#endif							/* IDEM_INVAL_H */
