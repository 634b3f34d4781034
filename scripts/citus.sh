# scripts/citus.sh: sourced after scripts/common.sh by test/run (tap suite).
#
# ensure_citus: make sure citus.so is installed for $PG_CONFIG's server.
# Debian 12 has no Citus package, so when it is missing this builds Citus
# from the vendored tarball in ../shared/vendor (see its README.md) in a
# temporary directory, applies the documented build fix and installs it.
# Also installs pg_cron (Debian package); postgresql-contrib ships
# pg_stat_statements and amcheck.  Dies loudly if anything fails.

CITUS_VERSION=${CITUS_VERSION:-13.2.2}
CITUS_VENDOR_DIR=${CITUS_VENDOR_DIR:-$IDEM_ROOT/../shared/vendor}

ensure_citus() {
    ensure_packages postgresql-$PG_MAJOR-cron postgresql-contrib

    local libdir
    libdir=$("$PG_CONFIG" --pkglibdir)
    if [ -f "$libdir/citus.so" ]; then
        say "citus is installed ($libdir/citus.so)"
        return 0
    fi

    local tarball="$CITUS_VENDOR_DIR/citus-$CITUS_VERSION.tar.gz"
    [ -f "$tarball" ] || die "citus is not installed and $tarball is missing"

    say "citus is not installed: building Citus $CITUS_VERSION from $tarball"
    # no flex/bison: the tarball has no grammar files to generate
    ensure_packages postgresql-server-dev-$PG_MAJOR libcurl4-openssl-dev liblz4-dev libzstd-dev \
        libkrb5-dev libssl-dev libselinux1-dev libxslt1-dev libpam0g-dev libreadline-dev \
        make gcc

    local build src log started
    build=$(mktemp -d "${TMPDIR:-/var/tmp}/citus-build.XXXXXX") || die "citus: cannot make a build directory"
    src=$build/citus-$CITUS_VERSION
    log=$build/build.log
    started=$(date +%s)
    echo "citus: extracting into $build"
    tar -xzf "$tarball" -C "$build" || die "citus: cannot extract $tarball"
    [ -f "$src/configure" ] || die "citus: $src/configure not found after extraction"

    # Documented build fix (shared/vendor/README.md): PostgreSQL 15.18 and
    # later export have_createdb_privilege() from commands/dbcommands.h,
    # which clashes with Citus's static inline copy for PG < 16.
    local compat="$src/src/include/pg_version_compat.h"
    local dbcommands
    dbcommands="$("$PG_CONFIG" --includedir-server)/commands/dbcommands.h"
    if grep -q 'have_createdb_privilege' "$dbcommands" 2>/dev/null; then
        echo "citus: $dbcommands declares have_createdb_privilege();" \
             "deleting Citus's static inline copy from pg_version_compat.h"
        perl -0pi -e '
            $n = s/\n[ \t]*static[ \t]+inline[ \t]+bool[ \t]*\n?[ \t]*have_createdb_privilege\(void\)[ \t]*\n\{.*?\n\}[ \t]*\n/\n/s;
            END { exit($n == 1 ? 0 : 3) }' "$compat" \
            || die "citus: could not remove the static inline have_createdb_privilege() from $compat"
        ! grep -q 'have_createdb_privilege(void)' "$compat" \
            || die "citus: have_createdb_privilege(void) is still defined in $compat"
    else
        echo "citus: $dbcommands does not declare have_createdb_privilege(); no build fix needed"
    fi

    echo "citus: configure --without-libcurl PG_CONFIG=$PG_CONFIG (log: $log)"
    (cd "$src" && ./configure --without-libcurl PG_CONFIG="$PG_CONFIG") >"$log" 2>&1 \
        || { tail -n 40 "$log" >&2; die "citus: configure failed (full log: $log)"; }
    echo "citus: make -j2"
    make -C "$src" -j2 >>"$log" 2>&1 \
        || { grep -E -A3 ': error:|\*\*\*' "$log" | tail -n 40 >&2
             die "citus: build failed (full log: $log)"; }
    echo "citus: make install"
    if [ -w "$libdir" ]; then
        make -C "$src" install >>"$log" 2>&1
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo make -C "$src" install >>"$log" 2>&1
    else
        die "citus: cannot install into $libdir: run as root"
    fi || { tail -n 20 "$log" >&2; die "citus: make install failed (full log: $log)"; }
    [ -f "$libdir/citus.so" ] || die "citus: make install did not install $libdir/citus.so (log: $log)"

    echo "citus: installed $libdir/citus.so in $(( $(date +%s) - started ))s"
    rm -rf "$build"
}
