/*
 * requests.h
 *	  Public interface of requests: leases, tokens, keyed locks.
 *
 * The one header other folders include; the headers it includes are the
 * folder's own.
 */
#ifndef IDEM_REQUESTS_H
#define IDEM_REQUESTS_H

#include "request.h"

#endif							/* IDEM_REQUESTS_H */
