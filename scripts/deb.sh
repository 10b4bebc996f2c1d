#!/usr/bin/env bash
# Packs a built autopin binary into a Debian package with dpkg-deb:
#
#   scripts/deb.sh BINARY OUTDIR      writes OUTDIR/autopin_<version>_<arch>.deb
#
# scripts/release.sh calls it on the binary it built from the release tarball; the tests
# call it on the binary cargo built for them. The package holds
#   /usr/bin/autopin                                   the binary, stripped
#   /usr/share/man/man1/autopin.1.gz                   `autopin man`
#   /usr/share/bash-completion/completions/autopin     `autopin completions bash`
#   /usr/share/zsh/vendor-completions/_autopin         `autopin completions zsh`
#   /usr/share/fish/vendor_completions.d/autopin.fish  `autopin completions fish`
#   /usr/include/autopin.h                             the heartbeat back channel (header only)
#   /usr/share/doc/autopin/                            README.md, docs/, copyright
# The preload library is inside the binary (written to a per-user cache at run time), so
# the package has nothing else to install. Depends: is what dpkg-shlibdeps finds for the
# binary and for that preload library (extracted by running the binary once), so it lists
# the packages of the libraries they really link, at the versions their symbols need.
# Needs dpkg-deb, dpkg-shlibdeps (dpkg-dev), strip (binutils), gzip. Compression:
# AUTOPIN_DEB_COMPRESSION (dpkg-deb -Z: xz by default, gzip is quicker).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: scripts/deb.sh BINARY OUTDIR" >&2; exit 2; }
repo="$(cd "$(dirname "$0")/.." && pwd)"
bin=$(realpath "$1")
mkdir -p "$2"
out=$(realpath "$2")
for tool in dpkg-deb dpkg-shlibdeps strip gzip; do
    command -v "$tool" >/dev/null || { echo "deb.sh: $tool is missing (apt-get install dpkg-dev binutils gzip)" >&2; exit 1; }
done
[ -x "$bin" ] || { echo "deb.sh: $bin is not an executable" >&2; exit 1; }

# The version the binary reports is the one the package carries.
version=$("$bin" --version | awk '{print $2}')
[[ "$version" =~ ^[0-9][0-9A-Za-z.+~-]*$ ]] || { echo "deb.sh: cannot read a version from $bin --version" >&2; exit 1; }
arch=$(dpkg --print-architecture)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/root"
doc="$root/usr/share/doc/autopin"
install -d "$root/DEBIAN" "$root/usr/bin" "$root/usr/share/man/man1" \
    "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
    "$root/usr/share/fish/vendor_completions.d" "$root/usr/include" "$doc/docs"

install -m 0755 "$bin" "$root/usr/bin/autopin"
strip --strip-unneeded "$root/usr/bin/autopin"
# The binary must still be itself after stripping: the page and completions come from it.
installed="$root/usr/bin/autopin"
"$installed" man | gzip -9n >"$root/usr/share/man/man1/autopin.1.gz"
"$installed" completions bash >"$root/usr/share/bash-completion/completions/autopin"
"$installed" completions zsh >"$root/usr/share/zsh/vendor-completions/_autopin"
"$installed" completions fish >"$root/usr/share/fish/vendor_completions.d/autopin.fish"
install -m 0644 "$repo/include/autopin.h" "$root/usr/include/autopin.h"
install -m 0644 "$repo/README.md" "$doc/README.md"
install -m 0644 "$repo"/docs/*.md "$doc/docs/"
cat >"$doc/copyright" <<'EOF'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: autopin
Comment: Built from the autopin source tree by scripts/deb.sh. The binary statically
 includes the Rust crates listed in the source's Cargo.lock (vendored in the release
 tarball), each under its own license, and SQLite (public domain) through rusqlite.

Files: *
Copyright: The autopin developers
License: MIT or Apache-2.0
 autopin may be used under the terms of either the MIT license or the Apache License,
 Version 2.0, at the user's choice. On Debian systems the Apache License 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
EOF
find "$root/usr" -type d -exec chmod 0755 {} +
find "$root/usr" -type f ! -path '*/usr/bin/*' -exec chmod 0644 {} +

# Depends: from what the binary and the embedded preload library link. The preload library
# is written to the per-user cache by `autopin pin`; give it its own cache directory here.
mkdir -m 0700 "$work/runtime"
cpu=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*\([0-9]*\).*/\1/p' /proc/self/status)
XDG_RUNTIME_DIR="$work/runtime" "$installed" pin -c "${cpu:-0}" -- true
preload=$(ls "$work"/runtime/autopin/libautopin_preload-*.so)
mkdir -p "$work/shlibs/debian"
printf 'Source: autopin\n\nPackage: autopin\nArchitecture: any\n' >"$work/shlibs/debian/control"
depends=$(cd "$work/shlibs" && dpkg-shlibdeps -O -e"$installed" -e"$preload" 2>"$work/shlibdeps.err" |
    sed -n 's/^shlibs:Depends=//p') || { cat "$work/shlibdeps.err" >&2; exit 1; }
[ -n "$depends" ] || { echo "deb.sh: dpkg-shlibdeps found no dependencies" >&2; cat "$work/shlibdeps.err" >&2; exit 1; }

size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<EOF
Package: autopin
Version: $version
Architecture: $arch
Maintainer: The autopin developers <autopin@localhost>
Installed-Size: $size
Depends: $depends
Suggests: bzip2, hwloc
Section: utils
Priority: optional
Description: find and apply the best thread-to-core pinning
 autopin starts (or attaches to) a multi-threaded program, pins its threads to one
 candidate set of cores after another, measures a performance rate per candidate
 (hardware counters, a software counter or the program's own heartbeat), keeps the best
 pinning and watches for phase changes. It also shows the machine's topology like hwloc
 and likwid, speaks likwid-pin's pin expressions, measures core-to-core latencies and
 memory, and compares pinning strategies with statistics.
EOF
(cd "$root" && find usr -type f -print0 | sort -z | xargs -0 md5sum >DEBIAN/md5sums)
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"

deb="$out/autopin_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Z"${AUTOPIN_DEB_COMPRESSION:-xz}" --build "$root" "$deb" >/dev/null
echo "$deb"
