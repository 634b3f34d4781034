/*
 * request.h
 *	  API-style requests: leases, stored results and replay.
 */
#ifndef IDEM_REQUEST_H
#define IDEM_REQUEST_H

/*
 * SQL for "this request record may go": its namespace's TTL, counted from
 * completion (from creation while unfinished), has passed, and it is not a
 * live lease.  r is the table alias with its dot ("" for none) and ttl the
 * expression of the TTL.  idem_begin restarts such a record; the purge
 * deletes it.
 */
#define IDEM_REQUEST_EXPIRED_SQL(r, ttl) \
	"idempotency.idem_expires_at(coalesce(" r "completed_at, " r "created_at), " ttl ")" \
	" < now()" \
	" AND NOT (" r "status = 'in_progress' AND " r "lease_expires_at > clock_timestamp())"

#endif							/* IDEM_REQUEST_H */
