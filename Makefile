# Makefile for the idempotency extension (PGXS)

EXTENSION = idempotency
MODULE_big = idempotency
OBJS = \
	src/init/init.o \
	src/init/guc.o \
	src/base/args.o \
	src/base/catoids.o \
	src/base/inval.o \
	src/base/ownerspi.o \
	src/base/rowseek.o \
	src/base/rowwrite.o \
	src/base/shmem.o \
	src/base/spectoken.o \
	src/base/subxact.o \
	src/catalog/namespaces.o \
	src/catalog/nsgrant.o \
	src/catalog/stats.o \
	src/store/btprobe.o \
	src/store/claimcache.o \
	src/store/claimkey.o \
	src/store/claimrel.o \
	src/store/claimstore.o \
	src/store/filter.o \
	src/store/generation.o \
	src/store/bloom.o \
	src/store/gendb.o \
	src/store/genfilter.o \
	src/store/genscope.o \
	src/store/genstripe.o \
	src/claim/claim.o \
	src/claim/claimtrigger.o \
	src/statemachine/binding.o \
	src/statemachine/cas.o \
	src/statemachine/guard.o \
	src/statemachine/machine.o \
	src/requests/keylock.o \
	src/requests/request.o \
	src/requests/token.o \
	src/streams/watermark.o \
	src/purge/policy.o \
	src/purge/purge.o \
	src/purge/worker.o \
	src/citus/citus.o \
	src/citus/citusshard.o

DATA = $(wildcard idempotency--*.sql)

# pg_regress suites in sql/ and expected/, one file per feature
REGRESS = $(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))
REGRESS_OPTS = --load-extension=idempotency --no-locale

# isolation specs in test/isolation/specs
ISOLATION = $(patsubst test/isolation/specs/%.spec,%,$(sort $(wildcard test/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test/isolation --load-extension=idempotency --no-locale

# The project builds warning-free with -Wall -Wextra -Werror.  Server headers
# are included as system headers so that their own -Wextra noise (unused
# parameters of inline functions) does not count.  WERROR= turns -Werror off.
WERROR ?= -Werror
PG_CFLAGS = -Wall -Wextra $(WERROR)

PG_CONFIG ?= pg_config
# Includes name a folder: "store/store.h".  Server headers stay system headers.
PG_CPPFLAGS = -I$(srcdir)/src -isystem $(shell $(PG_CONFIG) --includedir-server) -isystem $(shell $(PG_CONFIG) --includedir)
# libpq: a Citus shard move reads the claims of the shard from the node it leaves
SHLIB_LINK_INTERNAL = -L$(shell $(PG_CONFIG) --libdir) -lpq
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS does not track header dependencies; every object depends on them all
$(OBJS): $(wildcard src/*/*.h)
