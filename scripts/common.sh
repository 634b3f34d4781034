# scripts/common.sh: shared by test/run, bench/run and demo/run.
#
# Functions to install what is missing, build and install the extension,
# and run a throwaway PostgreSQL cluster.  As root, PostgreSQL runs as the
# unprivileged "postgres" user, since initdb refuses to run as root.

PG_MAJOR=${PG_MAJOR:-15}
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/$PG_MAJOR/bin/pg_config}
IDEM_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

say() { printf '\n=== %s\n' "$*"; }
die() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }

# ensure_packages pkg...: install the Debian packages that are missing
# The host's apt, one at a time: the background lanes (assert, versions)
# install beside the host's suites, and a second apt-get would fail on
# dpkg's lock (where errexit is off, a missing debootstrap showed only
# later).  Also waits for any other apt (DPkg::Lock::Timeout).
export IDEM_APT_LOCK=/var/lock/idempotency-apt.lock
apt_host() {
    flock -w 1800 "$IDEM_APT_LOCK" env DEBIAN_FRONTEND=noninteractive \
        apt-get -o DPkg::Lock::Timeout=600 "$@"
}

packages_missing() {
    local p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || printf '%s ' "$p"
    done
}

ensure_packages() {
    local missing
    missing=$(packages_missing "$@")
    [ -z "$missing" ] && return 0
    [ "$(id -u)" -eq 0 ] || die "missing packages: $missing(run as root to install them)"
    say "installing $missing"
    # shellcheck disable=SC2086
    { apt_host update -qq >/dev/null && apt_host install -y -qq --no-install-recommends $missing >/dev/null; } \
        || die "apt-get could not install: $missing"
    missing=$(packages_missing "$@")
    [ -z "$missing" ] || die "not installed after apt-get install: $missing"
}

# copy_tree dir: the tracked and new files of the tree (no build products)
# into dir, for a run that builds on its own beside this one
copy_tree() {
    (cd "$IDEM_ROOT" && git ls-files -z --cached --others --exclude-standard \
        | xargs -0 -I{} cp --parents -- {} "$1/")
}

# build_and_install: compile warning-free with -Werror, then install
build_and_install() {
    say "building with -Wall -Wextra -Werror"
    make -s -C "$IDEM_ROOT" PG_CONFIG="$PG_CONFIG" clean >/dev/null
    make -s -C "$IDEM_ROOT" PG_CONFIG="$PG_CONFIG" WERROR=-Werror 2>&1 | { grep -v '^$' || true; }
    [ -f "$IDEM_ROOT/idempotency.so" ] || die "build failed"
    if [ -w "$("$PG_CONFIG" --pkglibdir)" ]; then
        make -s -C "$IDEM_ROOT" PG_CONFIG="$PG_CONFIG" install >/dev/null
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo make -s -C "$IDEM_ROOT" PG_CONFIG="$PG_CONFIG" install >/dev/null
    else
        die "cannot install into $("$PG_CONFIG" --pkglibdir): run as root"
    fi
}

# cluster_init name: make a work directory and a fresh cluster in it;
# sets WORK, PGDATA_DIR, PORT, PGHOST, PGPORT, PGUSER, PATH
cluster_init() {
    PGBIN=$("$PG_CONFIG" --bindir)
    PGXS_DIR=$(dirname "$("$PG_CONFIG" --pgxs)")/..
    export PATH="$PGBIN:$PATH"
    WORK=$(mktemp -d "/tmp/idempotency-$1.XXXXXX")
    RUNAS=()
    if [ "$(id -u)" -eq 0 ]; then
        id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql postgres
        chown postgres "$WORK"
        RUNAS=(runuser -u postgres --)
    fi
    chmod 755 "$WORK"
    PORT=$(free_port)
    PGDATA_DIR=$WORK/data
    export PGHOST=$WORK PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
    as_pg initdb -D "$PGDATA_DIR" -U postgres -A trust --no-sync >/dev/null
    cat >> "$PGDATA_DIR/postgresql.conf" <<CONF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$WORK'
shared_preload_libraries = 'idempotency'
CONF
}

# as_pg cmd...: run a command as the cluster's OS user
as_pg() { "${RUNAS[@]}" env PATH="$PATH" PGHOST="$PGHOST" PGPORT="$PGPORT" PGUSER="$PGUSER" "$@"; }

# mkdir_pg dir: a directory the cluster's OS user can write
mkdir_pg() { mkdir -p "$1"; chown --reference="$WORK" "$1"; }

free_port() {
    local p
    for p in $(seq 54320 54520); do
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && [ ! -e "/tmp/.s.PGSQL.$p" ] \
           && ! ls /tmp/idempotency-*/.s.PGSQL.$p /tmp/idempotency-*/*/.s.PGSQL.$p >/dev/null 2>&1; then
            echo "$p"; return
        fi
    done
    die "no free port"
}

cluster_conf() { printf '%s\n' "$@" >> "$PGDATA_DIR/postgresql.conf"; }
cluster_start() { as_pg pg_ctl -D "$PGDATA_DIR" -l "$WORK/postgres.log" -w start >/dev/null; }
cluster_stop() { as_pg pg_ctl -D "$PGDATA_DIR" -m "${1:-fast}" -w stop >/dev/null 2>&1 || true; }
cluster_restart() { cluster_stop; cluster_start; }

# cluster_cleanup rc: stop the cluster; remove the work directory unless the
# run failed or KEEP_WORK is set
cluster_cleanup() {
    local rc=$1
    [ -n "${WORK:-}" ] || return 0
    cluster_stop immediate
    if [ "$rc" -eq 0 ] && [ -z "${KEEP_WORK:-}" ]; then
        rm -rf "$WORK"
    else
        echo "$(basename "$0"): work directory kept in $WORK"
    fi
}

# psql_q sql: run SQL quietly, unaligned, stop on error
psql_q() { as_pg psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }
