/*
 * store.h
 *	  Public interface of the claim store: claims, their relation, cache, keys, generations and filters.
 *
 * The one header other folders include; the headers it includes are the
 * folder's own.
 */
#ifndef IDEM_STORE_H
#define IDEM_STORE_H

#include "claimstore.h"
#include "claimrel.h"
#include "claimcache.h"
#include "claimkey.h"
#include "generation.h"
#include "genfilter.h"
#include "genscope.h"
#include "genstripe.h"
#include "filter.h"
#include "btprobe.h"

#endif							/* IDEM_STORE_H */
