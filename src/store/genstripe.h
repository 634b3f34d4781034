/*
 * genstripe.h
 *	  Stripes: the finer filters of a TTL class's sealed generations,
 *	  bit-sliced, so that one test answers for all of them.
 */
#ifndef IDEM_GENSTRIPE_H
#define IDEM_GENSTRIPE_H

#include "postgres.h"

#include "genfilter.h"

/* Stripes in shared memory, for all databases */
#define IDEM_GEN_STRIPES			64

/* Generations one stripe holds, at most: one bit of a 64-bit word each */
#define IDEM_STRIPE_MAX_LANES		64

/* Hashes of a stripe's filters, at most (IdemFilterInit sets 16 at most) */
#define IDEM_STRIPE_MAX_HASHES		16

/* Hashes of the finer filters built for stripes, at most */
#define IDEM_STRIPE_HASHES			8

/* A stripe lane's reference in a slot: stripe * IDEM_STRIPE_MAX_LANES + lane */
#define IDEM_STRIPE_NO_LANE			(-1)
#define IDEM_STRIPE_REF(stripe, lane)	((stripe) * IDEM_STRIPE_MAX_LANES + (lane))
#define IDEM_STRIPE_REF_STRIPE(ref)		((ref) / IDEM_STRIPE_MAX_LANES)
#define IDEM_STRIPE_REF_LANE(ref)		((ref) % IDEM_STRIPE_MAX_LANES)
#define IDEM_STRIPE_REF_VALID(ref) \
	((ref) >= 0 && (ref) < IDEM_GEN_STRIPES * IDEM_STRIPE_MAX_LANES)

/* What one stripe said of a hash: see IdemGenStripeView */
typedef struct IdemStripeView
{
	int			stripe;
	uint64		changes;
	uint64		absent;			/* lanes that definitely do not hold it */
} IdemStripeView;

extern Size IdemGenStripeShmemSize(void);
extern void IdemGenStripeShmemInit(void);

extern void IdemGenStripeGeometry(int32 ttl_class, uint64 nclaims, IdemFilter *filter);
extern int	IdemGenStripePlace(int32 gen_id, int32 ttl_class, const IdemFilter *filter);
extern int	IdemGenStripeTest(int ref, int32 gen_id, uint64 hash);
extern void IdemGenStripePrefetch(int32 ttl_class, uint64 hash);
extern int	IdemGenStripeView(int32 ttl_class, uint64 hash, IdemStripeView *view);
extern bool IdemGenStripeOwner(int ref, int32 gen_id, uint64 *changes);
extern int	IdemGenStripeWidth(int ref, int32 gen_id);
extern void IdemGenStripeFreeLane(int ref, int32 gen_id);
extern bool IdemGenStripeOverlaps(uint64 start, uint64 len);
extern bool IdemGenStripeEnd(int i, uint64 *end);

#endif							/* IDEM_GENSTRIPE_H */
