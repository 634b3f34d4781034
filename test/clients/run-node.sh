#!/bin/sh
# The Node client's tests (clients/node) against a running cluster.
#
# Environment (test/run's clients suite sets it): PGHOST (the socket
# directory), PGPORT, PGUSER (a superuser), IDEM_PGBOUNCER_PORT (pgbouncer
# on 127.0.0.1, pool_mode = transaction, in front of the same cluster),
# IDEM_WORK (scratch), IDEM_ROOT (the repository).  Creates database
# idem_node with the extension and an application role made by
# idem_grant_app, installs pg@8 and express@4 from the npm registry into
# $IDEM_WORK/node, then runs node --test.
set -eu
: "${PGHOST:?}" "${PGPORT:?}" "${PGUSER:?}" "${IDEM_PGBOUNCER_PORT:?}" "${IDEM_WORK:?}" "${IDEM_ROOT:?}"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "SKIPPED: the Node client's tests need node (20 or later) and npm"
    exit 1
fi
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c 'DROP DATABASE IF EXISTS idem_node WITH (FORCE)' -c 'CREATE DATABASE idem_node'
psql -X -q -o /dev/null -v ON_ERROR_STOP=1 -d idem_node -c 'CREATE EXTENSION idempotency' \
    -c "DO \$\$BEGIN CREATE ROLE idem_node_app LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END\$\$" \
    -c "SELECT idem_grant_app('idem_node_app')" \
    -c "SELECT idem_namespace_define('payments', '1 day')"
mkdir -p "$IDEM_WORK/node"
if ! [ -d "$IDEM_WORK/node/node_modules/pg" ] || ! [ -d "$IDEM_WORK/node/node_modules/express" ]; then
    [ -f "$IDEM_WORK/node/package.json" ] || echo '{"private": true}' >"$IDEM_WORK/node/package.json"
    npm install --prefix "$IDEM_WORK/node" --no-audit --no-fund --loglevel=error pg@8 express@4 >/dev/null
fi
export NODE_PATH="$IDEM_WORK/node/node_modules"
export IDEM_TEST_DSN="postgres://idem_node_app@/idem_node?host=$PGHOST&port=$PGPORT"
export IDEM_TEST_BOUNCER_DSN="postgres://idem_node_app@127.0.0.1:$IDEM_PGBOUNCER_PORT/idem_node"
export IDEM_TEST_ADMIN_DSN="postgres://$PGUSER@/idem_node?host=$PGHOST&port=$PGPORT"
cd "$IDEM_ROOT"
exec node --test clients/node/test/ "$@"
