/*
 * claim.h
 *	  The SQL claim functions; what other parts call of them.
 */
#ifndef IDEM_CLAIM_H
#define IDEM_CLAIM_H

#include "postgres.h"

#include "store/store.h"
#include "catalog/idem_catalog.h"

extern bool IdemClaimImport(const bytea *key, IdemNamespace *ns,
							const IdemClaimRow *row);

#endif							/* IDEM_CLAIM_H */
