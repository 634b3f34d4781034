/*
 * genscope.h
 *	  The generations a claim of one namespace must look at, narrowed for
 *	  each claim by its class's stripes.
 */
#ifndef IDEM_GENSCOPE_H
#define IDEM_GENSCOPE_H

#include "postgres.h"

#include "generation.h"
#include "catalog/idem_catalog.h"

/* Namespaces whose scope a backend keeps for one map, at most */
#define IDEM_SCOPE_CACHE	8

extern int	IdemGenScopeSelect(IdemGenMap *map, const IdemNamespace *ns,
							   uint64 fhash, int *sel);
extern void IdemGenScopePrefetch(IdemGenMap *map, const IdemNamespace *ns,
								 uint64 fhash);

#endif							/* IDEM_GENSCOPE_H */
