# scripts/pg-assert.sh: sourced after scripts/common.sh.
#
# ensure_pg_assert: an assert-enabled PostgreSQL $PG_MAJOR, built from
# Debian's own source package (the same release the host runs), installed
# under /var/cache/idempotency and kept there, keyed by the source
# version, so that only the first run on a machine pays for the build
# (about 10 minutes on 2 cores).  Sets PG_ASSERT_CONFIG to its pg_config.
#
# The source is unpacked without Debian's patches: one of them sets
# pkglibdir to the host's /usr/lib/postgresql/NN/lib, so that the build's
# contrib modules (and every extension built against it) would be
# installed over the host package's files.  Upstream's layout keeps
# everything under the prefix.  The contrib modules the suites load are
# PG_ASSERT_CONTRIB; the prefix is keyed by the source version and a hash
# of this recipe (the configure flags and that list).
#
# The source comes through the mirror apt already uses: its URI is read
# from /etc/apt/sources.list.d/debian.sources (or sources.list), and a
# private apt state with a deb-src line fetches it, so that the host's apt
# configuration is left as it is.  Needs root (build dependencies).

PG_ASSERT_CACHE=${PG_ASSERT_CACHE:-/var/cache/idempotency}
PG_ASSERT_CONFIGURE="--enable-cassert --enable-debug --enable-tap-tests --with-openssl --with-libxml"
# amcheck and the page inspectors for the load tests, test_decoding for
# TAP 016's logical slot, pg_stat_statements for the regress suite
PG_ASSERT_CONTRIB="amcheck pageinspect pgstattuple pg_prewarm pg_stat_statements test_decoding"

# The first http(s) URI of the host's Debian archive, and its suite
pg_assert_mirror() {
    local f uri suite
    for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
        [ -f "$f" ] || continue
        if [[ $f == *.sources ]]; then
            uri=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' "$f")
            suite=$(awk '/^Suites:/ {print $2; exit}' "$f")
        else
            read -r uri suite < <(awk '$1 == "deb" && $2 !~ /security/ {print $2, $3; exit}' "$f")
        fi
        [ -n "$uri" ] && { echo "$uri $suite"; return 0; }
    done
    return 1
}

ensure_pg_assert() {
    [ "$(id -u)" -eq 0 ] || die "the assert-enabled build needs root (build dependencies, $PG_ASSERT_CACHE)"
    ensure_packages dpkg-dev bison flex libreadline-dev zlib1g-dev libssl-dev libxml2-dev \
        libipc-run-perl make gcc
    local mirror uri suite state src version prefix log started key
    mirror=$(pg_assert_mirror) || die "no Debian mirror found in /etc/apt"
    read -r uri suite <<<"$mirror"
    state=$PG_ASSERT_CACHE/apt-src
    mkdir -p "$state/lists/partial" "$state/archives/partial" "$PG_ASSERT_CACHE/src"
    printf 'deb-src %s %s main\ndeb-src %s %s-updates main\n' "$uri" "$suite" "$uri" "$suite" \
        > "$state/sources.list"
    local apt=(apt-get -q -o Dir::State="$state" -o Dir::State::Lists="$state/lists"
        -o Dir::Cache="$state" -o Dir::Etc::SourceList="$state/sources.list"
        -o Dir::Etc::SourceParts=/nonexistent -o APT::Sandbox::User=root)
    "${apt[@]}" update >/dev/null 2>&1 || die "apt-get update of the deb-src lines failed"
    version=$("${apt[@]}" source --print-uris "postgresql-$PG_MAJOR" 2>/dev/null \
        | awk -F"'" '/\.dsc/ {print $2}' | sed 's|.*_\(.*\)\.dsc|\1|; s|%2[bB]|+|g; s|%3[aA]|:|g' | head -1)
    [ -n "$version" ] || die "no source package postgresql-$PG_MAJOR on $uri"
    key=$(echo "$PG_ASSERT_CONFIGURE $PG_ASSERT_CONTRIB" | md5sum | cut -c1-8)
    prefix=$PG_ASSERT_CACHE/pg$PG_MAJOR-assert-$version-$key
    PG_ASSERT_CONFIG=$prefix/bin/pg_config
    if [ -x "$PG_ASSERT_CONFIG" ] && [ -f "$prefix/.complete" ]; then
        say "assert-enabled PostgreSQL $version is built ($prefix)"
        return 0
    fi
    say "building an assert-enabled PostgreSQL $version into $prefix (about 10 minutes)"
    started=$(date +%s)
    # the builds of other recipes or releases are stale
    rm -rf "$prefix" "$PG_ASSERT_CACHE/src/$version" "$PG_ASSERT_CACHE"/pg"$PG_MAJOR"-assert-*
    mkdir -p "$PG_ASSERT_CACHE/src/$version"
    log=$PG_ASSERT_CACHE/src/$version/build.log
    (cd "$PG_ASSERT_CACHE/src/$version" && "${apt[@]}" source --download-only "postgresql-$PG_MAJOR" >"$log" 2>&1 \
        && dpkg-source -x --no-check --skip-patches ./*.dsc pg >>"$log" 2>&1) \
        || { tail -20 "$log"; die "could not fetch or unpack postgresql-$PG_MAJOR's source"; }
    src=$PG_ASSERT_CACHE/src/$version/pg
    # shellcheck disable=SC2086
    (cd "$src" && ./configure --prefix="$prefix" $PG_ASSERT_CONFIGURE >>"$log" 2>&1 \
        && make -j2 >>"$log" 2>&1 && make install >>"$log" 2>&1 \
        && for c in $PG_ASSERT_CONTRIB; do
               make -C "contrib/$c" install >>"$log" 2>&1 || exit 1
           done \
        && make -C src/test/isolation install >>"$log" 2>&1 \
        && make -C src/test/regress install >>"$log" 2>&1) \
        || { grep -E ': error:|\*\*\*' "$log" | tail -20; die "the assert-enabled build failed (log: $log)"; }
    # pg_regress and pg_isolation_regress where PGXS looks for them
    local pgxs_test
    pgxs_test=$(dirname "$("$PG_ASSERT_CONFIG" --pgxs)")/../test
    mkdir -p "$pgxs_test/regress" "$pgxs_test/isolation"
    cp "$src/src/test/regress/pg_regress" "$pgxs_test/regress/"
    cp "$src/src/test/isolation/pg_isolation_regress" "$src/src/test/isolation/isolationtester" "$pgxs_test/isolation/"
    rm -rf "$src"
    # everything under the prefix, nothing in the host's directories
    [ "$("$PG_ASSERT_CONFIG" --pkglibdir)" = "$prefix/lib/postgresql" ] \
        || die "the assert-enabled build's pkglibdir is $("$PG_ASSERT_CONFIG" --pkglibdir), not under $prefix"
    touch "$prefix/.complete"
    say "assert-enabled PostgreSQL $version built in $(( $(date +%s) - started ))s"
}
