#!/bin/sh
# The Python client's tests (clients/python) against a running cluster.
#
# Environment (test/run's clients suite sets it): PGHOST (the socket
# directory), PGPORT, PGUSER (a superuser), IDEM_PGBOUNCER_PORT (pgbouncer
# on 127.0.0.1, pool_mode = transaction, in front of the same cluster),
# IDEM_WORK (scratch), IDEM_ROOT (the repository).  Creates database
# idem_py with the extension and an application role made by
# idem_grant_app, then runs pytest with Debian's python3 and its packages.
set -eu
: "${PGHOST:?}" "${PGPORT:?}" "${PGUSER:?}" "${IDEM_PGBOUNCER_PORT:?}" "${IDEM_WORK:?}" "${IDEM_ROOT:?}"
PY=/usr/bin/python3
PKGS="python3-psycopg python3-psycopg-pool python3-flask python3-starlette python3-fastapi python3-httpx python3-pytest python3-anyio"
if ! $PY -c 'import psycopg, psycopg_pool, flask, starlette, fastapi, httpx, pytest' 2>/dev/null; then
    if [ "$(id -u)" = 0 ]; then
        # one apt at a time on the host (scripts/common.sh, apt_host)
        flock -w 1800 "${IDEM_APT_LOCK:?}" env DEBIAN_FRONTEND=noninteractive \
            apt-get -o DPkg::Lock::Timeout=600 install -y -q $PKGS >/dev/null
    else
        echo "SKIPPED: the Python client's tests need: $PKGS"
        exit 1
    fi
fi
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c 'DROP DATABASE IF EXISTS idem_py WITH (FORCE)' -c 'CREATE DATABASE idem_py'
psql -X -q -v ON_ERROR_STOP=1 -d idem_py -c 'CREATE EXTENSION idempotency' \
    -c "DO \$\$BEGIN CREATE ROLE idem_py_app LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END\$\$" \
    -c "SELECT idem_grant_app('idem_py_app')" \
    -c "SELECT idem_namespace_define('payments', '1 day')"
export IDEM_TEST_DSN="host=$PGHOST port=$PGPORT dbname=idem_py user=idem_py_app"
export IDEM_TEST_BOUNCER_DSN="host=127.0.0.1 port=$IDEM_PGBOUNCER_PORT dbname=idem_py user=idem_py_app"
export IDEM_TEST_ADMIN_DSN="host=$PGHOST port=$PGPORT dbname=idem_py user=$PGUSER"
export PYTHONPATH="$IDEM_ROOT/clients/python" PYTHONDONTWRITEBYTECODE=1
cd "$IDEM_ROOT/clients/python"
exec $PY -m pytest -q -p no:cacheprovider -o junit_family=xunit2 tests "$@"
