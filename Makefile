# Makefile for the idempotency extension (PGXS)

EXTENSION = idempotency
MODULE_big = idempotency
OBJS = \
	src/idempotency.o \
	src/binding.o \
	src/btprobe.o \
	src/cas.o \
	src/citus.o \
	src/citusshard.o \
	src/catalog.o \
	src/claim.o \
	src/claimcache.o \
	src/claimrel.o \
	src/claimkey.o \
	src/claimstore.o \
	src/claimtrigger.o \
	src/generation.o \
	src/genfilter.o \
	src/genscope.o \
	src/genstripe.o \
	src/guard.o \
	src/inval.o \
	src/keylock.o \
	src/machine.o \
	src/namespace.o \
	src/nsgrant.o \
	src/ownerspi.o \
	src/policy.o \
	src/purge.o \
	src/request.o \
	src/rowseek.o \
	src/rowwrite.o \
	src/shmem.o \
	src/spectoken.o \
	src/stats.o \
	src/token.o \
	src/watermark.o \
	src/worker.o

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
PG_CPPFLAGS = -isystem $(shell $(PG_CONFIG) --includedir-server) -isystem $(shell $(PG_CONFIG) --includedir)
# libpq: a Citus shard move reads the claims of the shard from the node it leaves
SHLIB_LINK_INTERNAL = -L$(shell $(PG_CONFIG) --libdir) -lpq
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS does not track header dependencies; every object depends on them all
$(OBJS): $(wildcard src/*.h)
