/*
 * nsgrant.h
 *	  Per-namespace privileges: restricted namespaces and their grantees.
 */
#ifndef IDEM_NSGRANT_H
#define IDEM_NSGRANT_H

#include "postgres.h"

#include "nodes/nodes.h"

/* The privileges idem_namespace_grant gives, as bits */
#define IDEM_NSPRIV_CLAIM	0x01	/* claim: the claim, try, batch, trigger forms */
#define IDEM_NSPRIV_CHECK	0x02	/* check: idem_claimed, rows of idem_claims */
#define IDEM_NSPRIV_RELEASE	0x04	/* release: idem_release */

extern void IdemNsGrantInit(void);
extern void IdemCheckNamespacePrivilege(const text *name, int priv);
extern bool IdemNamespacePrivilegeHeld(const char *name, int len, int priv);
extern void IdemNsGrantBeforeUtility(Node *parsetree);
extern void IdemNsGrantAfterUtility(Node *parsetree);

#endif							/* IDEM_NSGRANT_H */
