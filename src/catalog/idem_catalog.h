/*
 * idem_catalog.h
 *	  Public interface of the catalog layer: namespaces, their privileges, statistics.
 *
 * The one header other folders include; the headers it includes are the
 * folder's own.
 */
#ifndef IDEM_CATALOG_PUBLIC_H
#define IDEM_CATALOG_PUBLIC_H

#include "namespaces.h"
#include "nsgrant.h"
#include "stats.h"

#endif							/* IDEM_CATALOG_PUBLIC_H */
