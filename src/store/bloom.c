/*
 * bloom.c
 *	  The mathematics of the generations' filters: blocked Bloom filters,
 *	  one 64-byte block per claim's hash, nhashes bits set in it (see
 *	  genfilter.c for where they live, genfilter.h for the bit layout).
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "genfilter.h"

/* The hash of a claim's identity that filters are built on */
uint64
IdemFilterHash(int32 nsid, const bytea *key)
{
	return hash_bytes_extended((const unsigned char *) VARDATA_ANY(key),
							   VARSIZE_ANY_EXHDR(key),
							   (uint64) (uint32) nsid * UINT64CONST(0x9E3779B97F4A7C15) + 1);
}

/* Size a filter for nclaims claims at bits_per_claim bits each */
void
IdemFilterInit(IdemFilter *filter, uint64 nclaims, int bits_per_claim)
{
	uint64		bits = Max(nclaims, 1) * (uint64) bits_per_claim;
	uint64		nblocks = (bits + IDEM_FILTER_BLOCK_BYTES * 8 - 1) / (IDEM_FILTER_BLOCK_BYTES * 8);

	/* ln 2 * bits per claim hashes minimise false positives */
	filter->nhashes = Max(1, Min(16, (int) (bits_per_claim * 0.69 + 0.5)));
	if (!idem_debug_legacy_filters)
		filter->nhashes |= IDEM_FILTER_MIXED;
	filter->nblocks = (uint32) Min(nblocks, (uint64) (MaxAllocHugeSize / IDEM_FILTER_BLOCK_BYTES));
	filter->bits = palloc_extended((Size) filter->nblocks * IDEM_FILTER_BLOCK_BYTES,
								   MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
}

/* Add a claim's hash to a filter */
void
IdemFilterAdd(IdemFilter *filter, uint64 hash)
{
	uint64	   *block = filter->bits + (Size) IdemFilterBlock(hash, filter->nblocks) * 8;
	bool		mixed = (filter->nhashes & IDEM_FILTER_MIXED) != 0;
	int			k = filter->nhashes & IDEM_FILTER_HASHES_MASK;
	uint64		w = IdemFilterMix(hash);
	int			i;

	for (i = 0; i < k; i++)
	{
		uint32		bit = IdemFilterBit(hash, &w, i, mixed);

		block[bit >> 6] |= UINT64CONST(1) << (bit & 63);
	}
}

/* May the filter contain hash?  false means definitely not */
bool
IdemFilterMayContain(const uint64 *bits, uint32 nblocks, int nhashes, uint64 hash)
{
	const uint64 *block = bits + (Size) IdemFilterBlock(hash, nblocks) * 8;
	bool		mixed = (nhashes & IDEM_FILTER_MIXED) != 0;
	int			k = nhashes & IDEM_FILTER_HASHES_MASK;
	uint64		w = IdemFilterMix(hash);
	int			i;

	for (i = 0; i < k; i++)
	{
		uint32		bit = IdemFilterBit(hash, &w, i, mixed);

		if ((block[bit >> 6] & (UINT64CONST(1) << (bit & 63))) == 0)
			return false;
	}
	return true;
}

