/*
 * catalog.h
 *	  Finding the extension's internal relations.
 */
#ifndef IDEM_CATALOG_H
#define IDEM_CATALOG_H

#include "postgres.h"

#include "nodes/execnodes.h"
#include "nodes/parsenodes.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"

/* OIDs of the internal relations */
typedef struct IdemCatalog
{
	Oid			schema;			/* the "idempotency" schema */
	Oid			claims;			/* idempotency.claims */
	Oid			namespaces;		/* idempotency.namespaces */
	Oid			namespaces_name;	/* its index on name */
	Oid			namespace_seq;	/* the sequence of namespace ids */
	Oid			machines;		/* idempotency.machines */
	Oid			bindings;		/* idempotency.machine_bindings */
	Oid			requests;		/* idempotency.requests */
	Oid			tokens;			/* idempotency.tokens */
} IdemCatalog;

/* State saved while running SPI as the owner of an internal table */
typedef struct IdemOwnerScope
{
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;
} IdemOwnerScope;

extern IdemCatalog IdemGetCatalog(void);
extern Oid	IdemRelationOwner(Oid relid);
extern Relation IdemOpenRelationArg(Oid relid, LOCKMODE lockmode);
extern Relation IdemOpenOwnedTable(Oid relid, LOCKMODE lockmode,
								   const char *detail);
extern void IdemOwnerScopeBegin(IdemOwnerScope *scope, Oid relid);
extern void IdemSpiScopeBegin(IdemOwnerScope *scope, Oid roleid,
							  bool pin_search_path);
extern void IdemOwnerScopeEnd(IdemOwnerScope *scope);
extern int	IdemSpiExecute(const char *sql, int nargs, Oid *argtypes, Datum *values,
						   const char *nulls, bool read_only, long tcount);
extern bool IdemExtensionPresent(void);
extern void IdemCheckClaimsPrivilege(AclMode mode);
extern void IdemCheckTablePrivilege(Oid relid, const char *table, AclMode mode,
									const char *action);

#endif							/* IDEM_CATALOG_H */
