# scripts/pg-chroot.sh: sourced after scripts/common.sh.
#
# Debian chroots that carry the PostgreSQL majors the host does not have:
#   17: trixie, postgresql-17 and postgresql-server-dev-17
#   18: sid, postgresql-18 and postgresql-server-dev-18
#   19: sid, postgresql-19 and postgresql-server-dev-19 from experimental
# (18 and 19 share the sid chroot).  Each is made with debootstrap
# --variant=minbase from the mirror apt already uses (its URI is read from
# /etc/apt/sources.list.d/debian.sources or sources.list at run time) and
# kept under /var/cache/idempotency, keyed by the suite and the package
# list, so that only the first run on a machine pays for it (about 3
# minutes for debootstrap and 4 for the packages).  The host's packages
# are never touched: another suite's binaries would pull in a newer libc.
#
# pg_chroot_ensure major: build the chroot for major if missing; sets
#   PG_CHROOT (its root directory).
# pg_chroot_run major cmd...: run cmd as root inside it, in a private mount
#   namespace (unshare --mount) with /proc, /dev, /dev/pts and /dev/shm
#   mounted and the working tree bind-mounted on /src, so that nothing
#   leaks onto the host.

PG_CHROOT_CACHE=${PG_CHROOT_CACHE:-/var/cache/idempotency}
PG_CHROOT_MAJORS="17 18 19"

# The suite a major comes from, and the apt target release (if any)
pg_chroot_suite() {
    case "$1" in
        17) echo trixie ;;
        18|19) echo sid ;;
        *) die "no chroot for PostgreSQL $1 (known: $PG_CHROOT_MAJORS)" ;;
    esac
}

# The packages inside a suite's chroot: the servers, the headers, the TAP
# modules (PostgreSQL::Test::Cluster ships in postgresql-client-NN, which
# the server depends on), the build tools and the package's build
# dependencies (debian/control)
pg_chroot_packages() {
    local base="build-essential make gcc libc6-dev perl libipc-run-perl python3 debhelper dpkg-dev fakeroot postgresql-server-dev-all libpq-dev"
    case "$1" in
        trixie) echo "$base postgresql-17 postgresql-server-dev-17" ;;
        sid) echo "$base postgresql-18 postgresql-server-dev-18" ;;
    esac
}
pg_chroot_experimental() {
    case "$1" in
        sid) echo "postgresql-19 postgresql-server-dev-19" ;;
    esac
}

# The first http(s) URI of the host's Debian archive (not its security one)
pg_chroot_mirror() {
    local f uri
    for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
        [ -f "$f" ] || continue
        if [[ $f == *.sources ]]; then
            uri=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' "$f")
        else
            uri=$(awk '$1 == "deb" && $2 !~ /security/ {print $2; exit}' "$f")
        fi
        [ -n "$uri" ] && { echo "$uri"; return 0; }
    done
    return 1
}

pg_chroot_dir() {
    local suite key
    suite=$(pg_chroot_suite "$1")
    key=$( { pg_chroot_packages "$suite"; pg_chroot_experimental "$suite"; } | md5sum | cut -c1-8)
    echo "$PG_CHROOT_CACHE/chroot-$suite-$key"
}

# pg_chroot_exec root cmd...: cmd inside root, its mounts private to it
pg_chroot_exec() {
    local root=$1; shift
    unshare --mount --propagation private -- /bin/sh -ec '
        root=$1; src=$2; shift 2
        mount -t proc proc "$root/proc"
        mount --rbind /dev "$root/dev"
        mount -t tmpfs -o mode=1777 shm "$root/dev/shm"
        mkdir -p "$root/src"
        [ -n "$src" ] && mount --bind "$src" "$root/src"
        exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
            LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"' sh "$root" "${PG_CHROOT_SRC:-}" "$@"
}

pg_chroot_ensure() {
    [ "$(id -u)" -eq 0 ] || die "the chroots need root (debootstrap, chroot, unshare)"
    local major=$1 suite root mirror log started
    suite=$(pg_chroot_suite "$major")
    root=$(pg_chroot_dir "$major")
    PG_CHROOT=$root
    if [ -f "$root/.complete" ]; then
        return 0
    fi
    ensure_packages debootstrap
    mirror=$(pg_chroot_mirror) || die "no Debian mirror found in /etc/apt"
    say "building the $suite chroot for PostgreSQL $major into $root (about 7 minutes)"
    started=$(date +%s)
    mkdir -p "$PG_CHROOT_CACHE"
    rm -rf "$root"
    log=$root.log
    unshare --mount --propagation private -- debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$log" 2>&1 \
        || { tail -20 "$log"; die "debootstrap $suite failed (log: $log)"; }
    {
        echo "deb $mirror $suite main"
        [ -n "$(pg_chroot_experimental "$suite")" ] && echo "deb $mirror experimental main"
    } > "$root/etc/apt/sources.list"
    cat > "$root/etc/apt/apt.conf.d/90idempotency" <<'CONF'
Acquire::Check-Valid-Until "false";
APT::Install-Recommends "false";
CONF
    # no service starts inside (postgresql-common would start a cluster)
    printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
    chmod 755 "$root/usr/sbin/policy-rc.d"
    # the default cluster of postgresql-common is not wanted
    mkdir -p "$root/etc/postgresql-common"
    echo "create_main_cluster = false" > "$root/etc/postgresql-common/createcluster.conf"
    PG_CHROOT_SRC='' pg_chroot_exec "$root" apt-get -q update >>"$log" 2>&1 \
        || { tail -20 "$log"; die "apt-get update in the $suite chroot failed (log: $log)"; }
    # shellcheck disable=SC2046
    PG_CHROOT_SRC='' pg_chroot_exec "$root" apt-get -q -y install $(pg_chroot_packages "$suite") >>"$log" 2>&1 \
        || { tail -20 "$log"; die "installing the packages in the $suite chroot failed (log: $log)"; }
    if [ -n "$(pg_chroot_experimental "$suite")" ]; then
        # shellcheck disable=SC2046
        PG_CHROOT_SRC='' pg_chroot_exec "$root" apt-get -q -y -t experimental install \
            $(pg_chroot_experimental "$suite") >>"$log" 2>&1 \
            || { tail -20 "$log"; die "installing from experimental in the $suite chroot failed (log: $log)"; }
    fi
    PG_CHROOT_SRC='' pg_chroot_exec "$root" apt-get clean >>"$log" 2>&1
    touch "$root/.complete"
    say "the $suite chroot is ready in $(( $(date +%s) - started ))s"
}

# pg_chroot_run major cmd...
pg_chroot_run() {
    local major=$1; shift
    pg_chroot_ensure "$major"
    PG_CHROOT_SRC=${PG_CHROOT_SRC-$IDEM_ROOT} pg_chroot_exec "$PG_CHROOT" "$@"
}

# pg_chroot_script major script [arg...]: run one of the tree's scripts
# (test/run, bench/run) on PostgreSQL major in its chroot: the tracked and
# new files of the tree are copied into the chroot's /tmp (removed after),
# so that runs for several majors never share build products; returns the
# script's status.
pg_chroot_script() {
    local major=$1 script=$2 copy rc=0
    shift 2
    pg_chroot_ensure "$major"
    copy=$(mktemp -d "$PG_CHROOT/tmp/idempotency-src.XXXXXX")
    copy_tree "$copy"
    chmod 755 "$copy"
    PG_CHROOT_SRC='' pg_chroot_exec "$PG_CHROOT" PG_MAJOR="$major" IDEM_CHROOT="$major" \
        KEEP_WORK="${KEEP_WORK:-}" IDEM_TAP="${IDEM_TAP:-}" CLAIMS_N="${CLAIMS_N:-}" \
        CLAIMS_ROUNDS="${CLAIMS_ROUNDS:-}" \
        "/tmp/$(basename "$copy")/$script" "$@" || rc=$?
    [ "$rc" -eq 0 ] || echo "(work directories inside the chroot: under $PG_CHROOT/tmp)"
    rm -rf "$copy"
    return "$rc"
}
