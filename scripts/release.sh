#!/usr/bin/env bash
# Makes a release of the committed tree, for sites that build offline and for packagers:
#
#   scripts/release.sh [--out DIR] [--ref REF] [--no-deb | --binary PATH]
#
# into DIR (default target/dist):
#   autopin-<version>.tar.gz   `git archive REF` (default HEAD) plus every crate of Cargo.lock
#                              under vendor/ and a .cargo/config.toml that builds from them:
#                              `cargo build --offline --release` works in the unpacked tree
#                              with no network and no cargo cache
#   autopin_<version>_<arch>.deb  built from that tarball (scripts/deb.sh); --binary PATH
#                              packs an already-built binary instead, --no-deb makes none
#   SHA256SUMS                 of the tarball and the .deb
#   easybuild/autopin-<version>-GCCcore-<v>.eb   contrib/easybuild's easyconfig and
#   spack/packages/autopin/package.py            contrib/spack's recipe, with the tarball's
#                              sha256 in place of @AUTOPIN_SHA256@, in a Spack package
#                              repository (spack/repo.yaml) beside a source mirror that holds
#                              the tarball (spack/mirror/autopin/)
# The tarball is reproducible: the same commit gives the same bytes (names sorted, owners
# and times fixed to the commit's, gzip without a timestamp). Uncommitted changes are not
# in it (a warning says so). The .deb build keeps its cargo output in target/dist-build so
# that a second release of a similar tree rebuilds little.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
export PATH="$HOME/.cargo/bin:$PATH"

out=target/dist
ref=HEAD
deb=build
binary=
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --ref) ref=$2; shift 2 ;;
        --no-deb) deb=none; shift ;;
        --binary) deb=given; binary=$(realpath "$2"); shift 2 ;;
        -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "release.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

commit=$(git rev-parse --verify "$ref^{commit}")
version=$(git show "$commit:Cargo.toml" | sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p')
[ -n "$version" ] || { echo "release.sh: no [workspace.package] version in Cargo.toml at $ref" >&2; exit 1; }
name="autopin-$version"
if [ "$ref" = HEAD ] && [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "release.sh: the work tree has uncommitted changes; the release is of $commit as committed" >&2
fi
mkdir -p "$out"
out=$(realpath "$out")

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
git archive --format=tar --prefix="$name/" "$commit" | tar -x -C "$stage"
src="$stage/$name"
echo "release.sh: vendoring the crates of Cargo.lock" >&2
# --locked: the lock file is the release's, as committed. The crates come from cargo's
# cache, or crates.io for those not fetched yet.
(cd "$src" && cargo vendor --locked --versioned-dirs --quiet vendor >/dev/null)
mkdir -p "$src/.cargo"
cat >>"$src/.cargo/config.toml" <<'EOF'

# Added by scripts/release.sh: build from the crates in vendor/, without a network.
[source.crates-io]
replace-with = "vendored-sources"

[source.vendored-sources]
directory = "vendor"

[net]
offline = true
EOF

epoch=$(git show -s --format=%ct "$commit")
tarball="$out/$name.tar.gz"
tar --sort=name --format=gnu --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
    --mode='u+rw,go-w,go+rX' -C "$stage" -cf - "$name" | gzip -n >"$tarball.tmp"
mv "$tarball.tmp" "$tarball"
sha=$(sha256sum "$tarball" | cut -d' ' -f1)
echo "release.sh: $tarball ($sha)" >&2

# The easyconfig and the Spack recipe with this tarball's checksum.
mkdir -p "$out/easybuild" "$out/spack/packages/autopin"
for ec in "$src"/contrib/easybuild/*.eb; do
    sed "s/@AUTOPIN_SHA256@/$sha/g" "$ec" >"$out/easybuild/$(basename "$ec")"
done
sed "s/@AUTOPIN_SHA256@/$sha/g" "$src/contrib/spack/packages/autopin/package.py" \
    >"$out/spack/packages/autopin/package.py"
cp "$src/contrib/spack/repo.yaml" "$out/spack/repo.yaml"
# A Spack source mirror that holds the tarball (`spack mirror add NAME DIR`).
mkdir -p "$out/spack/mirror/autopin"
ln -f "$tarball" "$out/spack/mirror/autopin/$name.tar.gz" 2>/dev/null ||
    cp "$tarball" "$out/spack/mirror/autopin/$name.tar.gz"

debfile=
case "$deb" in
    build)
        # Built the way a site builds it: from the tarball, offline, into a fixed directory
        # (so that cargo's output under target/dist-build is reused by the next release).
        build="$repo/target/dist-build"
        rm -rf "$build/src"
        mkdir -p "$build/src"
        tar -xzf "$tarball" -C "$build/src"
        echo "release.sh: cargo build --offline --locked --release -p autopin (from the tarball)" >&2
        (cd "$build/src/$name" && CARGO_TARGET_DIR="$build/target" cargo build --offline --locked --release -p autopin --quiet)
        debfile=$(bash "$build/src/$name/scripts/deb.sh" "$build/target/release/autopin" "$out")
        ;;
    given) debfile=$(bash scripts/deb.sh "$binary" "$out") ;;
    none) ;;
esac

(cd "$out" && sha256sum "$name.tar.gz" ${debfile:+"$(basename "$debfile")"} >SHA256SUMS)
echo "release.sh: wrote $out: $name.tar.gz${debfile:+ $(basename "$debfile")} SHA256SUMS easybuild/ spack/" >&2
