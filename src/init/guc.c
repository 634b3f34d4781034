/*
 * guc.c
 *	  Every setting of the extension, defined in one place.
 *
 * The variables stay with the parts that read them (declared in their
 * folders' headers); only their definitions are here, so that the list of
 * settings, their defaults, bounds and contexts, reads in one file.  The
 * settings of shared memory are defined only when the library is preloaded,
 * as nothing reads them otherwise.
 */
#include "postgres.h"

#include <limits.h>

#include "miscadmin.h"
#include "utils/guc.h"

#include "base/base.h"
#include "catalog/idem_catalog.h"
#include "store/store.h"
#include "purge/purge.h"
#include "init.h"

/* Define the GUCs; called first from _PG_init */
void
IdemDefineGucs(void)
{
	/* namespaces (catalog/namespaces.c) */
	DefineCustomIntVariable("idempotency.default_ttl",
							"TTL of a namespace created on first use.",
							"Claims expire this long after they are made, unless their namespace was given another TTL with idem_namespace_define.",
							&idem_default_ttl,
							7 * SECS_PER_DAY,
							1,
							INT_MAX,
							PGC_SUSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	/* shared memory: statistics, claim cache, filters; preloaded only */
	if (process_shared_preload_libraries_in_progress)
	{
		/* statistics (catalog/stats.c) */
		DefineCustomIntVariable("idempotency.stats_max_namespaces",
								"Number of namespaces whose statistics are kept in shared memory.",
								"A hard limit: namespaces beyond it are not counted in idem_stats, and a warning says so.",
								&idem_stats_max,
								1000,
								16,
								1000000,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);
		/* the claim cache (store/claimcache.c) */
		DefineCustomIntVariable("idempotency.claim_cache_size",
								"Number of recent claims whose location is cached in shared memory.",
								"Each entry takes 8 bytes; 0 disables the cache.  Duplicates found in the cache skip the index descent.",
								&idem_claim_cache_size,
								1048576,
								0,
								INT_MAX / 2,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);
		/* the filters of sealed generations (store/genfilter.c) */
		DefineCustomIntVariable("idempotency.filter_memory",
								"Shared memory for the filters of sealed claim generations.",
								"A claim takes idempotency.filter_memory_bits_per_claim bits (filter_bits_per_claim after a restart, until its finer filter is rebuilt); a generation whose filter does not fit is probed through its index instead. Its pages are taken as filters fill them, unless the server uses huge pages.",
								&idem_filter_memory_kb,
								262144, 0, INT_MAX / 2,
								PGC_POSTMASTER, GUC_UNIT_KB,
								NULL, NULL, NULL);
		DefineCustomIntVariable("idempotency.filter_bits_per_claim",
								"Bits per claim of the filter built when a generation is sealed.",
								"10 bits give about 1% false positives, 12 about 0.4%, 16 about 0.1%; a false positive costs one index probe of that generation.",
								&idem_filter_bits_per_claim,
								12, 2, 64,
								PGC_SIGHUP, 0,
								NULL, NULL, NULL);
		DefineCustomIntVariable("idempotency.filter_memory_bits_per_claim",
								"Bits per claim of the filter a seal leaves in shared memory.",
								"When above idempotency.filter_bits_per_claim, the seal also builds this finer filter and loads it when its transaction commits; after a restart the purge worker rebuilds it, a few generations a round, and a standby keeps the stored filter. With the 8 hashes stripes use, 20 bits give about 0.03% false positives, 28 about 0.005%.",
								&idem_filter_memory_bits_per_claim,
								28, 0, 64,
								PGC_SIGHUP, 0,
								NULL, NULL, NULL);
		DefineCustomBoolVariable("idempotency.debug_legacy_filters",
								 "Seals generations with filters as version 1.0 built them.",
								 "Double-hashed bit positions and no finer filter: for tests of what a cluster upgraded from 1.0 holds.",
								 &idem_debug_legacy_filters,
								 false,
								 PGC_SUSET, GUC_NOT_IN_SAMPLE,
								 NULL, NULL, NULL);
	}

	/* a purge round (purge/purge.c) */
	DefineCustomBoolVariable("idempotency.purge_enabled",
							 "Whether the background worker purges expired rows.",
							 "Set per database (ALTER DATABASE ... SET) to pause the worker's rounds there alone.",
							 &idem_purge_enabled, true,
							 PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("idempotency.purge_batch_size",
							"Rows deleted per purge batch, each batch in its own transaction.",
							"After a lock timeout the purge halves its batch, down to 100 rows, and grows it back afterwards.",
							&idem_purge_batch_size, 10000, IDEM_PURGE_MIN_BATCH, 1000000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("idempotency.purge_max_runtime",
							"Longest time one purge round may run in a database.",
							"Every statement of a round, its VACUUM included, is cancelled when the time is up.",
							&idem_purge_max_runtime, 30000, 100, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("idempotency.purge_history",
							"Purge runs kept in idempotency.purge_runs, per database.",
							NULL, &idem_purge_history, 1000, 1, 1000000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("idempotency.log_purge",
							 "Log every purged table, not just one line per round.",
							 NULL, &idem_log_purge, false,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);

	/* generations (store/generation.c) */
	DefineCustomIntVariable("idempotency.generation_min_ttl",
							"Shortest TTL whose claims live in generations.",
							"Claims of namespaces with shorter TTLs stay in idempotency.claims and are purged by deletion.",
							&idem_generation_min_ttl,
							10, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("idempotency.generations_per_ttl",
							"Generations a TTL class opens per TTL.",
							"More generations keep the store closer to its live claims, at the cost of more tables to look through.",
							&idem_generations_per_ttl,
							4, 1, 64,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("idempotency.generation_max_claims",
							"Claims after which a class's open generation is switched, whatever its age.",
							"Bounds the open generation's index, which every new claim inserts into; 0 switches by age alone.",
							&idem_generation_max_claims,
							250000, 0, INT_MAX,
							PGC_SUSET, 0,
							IdemGenMaxClaimsCheck, NULL, NULL);

	/* the purge launcher (purge/worker.c) */
	DefineCustomIntVariable("idempotency.purge_interval",
							"Time between purge rounds in each database.",
							NULL, &idem_purge_interval, 60, 1, 86400,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
}
