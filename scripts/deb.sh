# scripts/deb.sh: build the Debian package, sourced by test/run and
# scripts/build-deb.
#
# build_deb outdir: build postgresql-$PG_MAJOR-idempotency from a copy of the
# working tree (its tracked and new files, nothing ignored) with
# dpkg-buildpackage -us -uc -b, so that the tree itself stays clean; the
# .deb and the build's .buildinfo and .changes land in outdir, and the
# copied source is kept in outdir/src for make installcheck.  Prints the
# path of the .deb.
build_deb() {
    local out=$1 src=$1/src
    ensure_packages debhelper dpkg-dev postgresql-server-dev-all libpq-dev >&2   # stdout is the .deb's path
    rm -rf "$out"; mkdir -p "$src"
    if command -v git >/dev/null && git -C "$IDEM_ROOT" rev-parse --git-dir >/dev/null 2>&1; then
        (cd "$IDEM_ROOT" && git ls-files -z --cached --others --exclude-standard \
            | xargs -0 -I{} cp --parents -- {} "$src/")
    else
        # a copy of the tree (test/run --pg N in a chroot without git)
        cp -a "$IDEM_ROOT/." "$src/"
        make -s -C "$src" clean >/dev/null 2>&1 || true
    fi
    # debian/control for this machine's majors among debian/pgversions
    (cd "$src" && pg_buildext updatecontrol >"$out/build.log" 2>&1) \
        || { cat "$out/build.log" >&2; die "pg_buildext updatecontrol failed"; }
    (cd "$src" && dpkg-buildpackage -us -uc -b >>"$out/build.log" 2>&1) \
        || { tail -n 40 "$out/build.log" >&2; die "dpkg-buildpackage failed (log: $out/build.log)"; }
    ls "$out"/postgresql-"$PG_MAJOR"-idempotency_*.deb
}
