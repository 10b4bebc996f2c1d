#!/usr/bin/env bash
# Runs EasyBuild on autopin's easyconfig the way a site does, in a scratch directory:
#
#   tests/tools/easybuild_check.sh dry-run EASYCONFIG SOURCEDIR WORKDIR
#   tests/tools/easybuild_check.sh install EASYCONFIG SOURCEDIR WORKDIR
#
# SOURCEDIR holds the release tarball (scripts/release.sh). Both modes parse the easyconfig
# and resolve its toolchain and build dependencies; dry-run then runs `eb --dry-run` and
# `eb --extended-dry-run` (each step traced, nothing built); install runs `eb` for real
# (the whole cargo build: minutes), then `module load autopin` in a fresh shell and runs
# the binary, the man page and a completion from the module.
#
# A site has GCCcore, binutils and Rust modules that EasyBuild built. Building those here
# (GCC and Rust from source) would take hours and download what the machine cannot reach, so
# WORKDIR/toolchain-modules holds three small Lmod modules of the same names that put this
# machine's gcc, binutils and rustup's Rust on the PATH, each saying so in its whatis.
# Everything else (the easyblock, the module autopin gets, the sanity checks) is EasyBuild's.
#
# Needs eb (EasyBuild 5: `$AUTOPIN_EB`, eb on the PATH, or the venv scripts/deps.sh makes
# in ~/.local/share/autopin/easybuild) and Lmod (Debian's lmod). Exit 3: one is missing.
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 dry-run|install EASYCONFIG SOURCEDIR WORKDIR" >&2; exit 2; }
mode=$1
ec=$(realpath "$2")
srcdir=$(realpath "$3")
mkdir -p "$4"
work=$(realpath "$4")

eb=${AUTOPIN_EB:-}
[ -n "$eb" ] || eb=$(command -v eb || true)
[ -n "$eb" ] || [ ! -x "$HOME/.local/share/autopin/easybuild/bin/eb" ] || eb="$HOME/.local/share/autopin/easybuild/bin/eb"
[ -n "$eb" ] || { echo "MISSING: eb (EasyBuild) is not installed: scripts/deps.sh installs it from PyPI into ~/.local/share/autopin/easybuild"; exit 3; }
# eb is a shell script that looks for python on the PATH: its own venv's python first.
export PATH="$(dirname "$eb"):$PATH"
lmod_root=${LMOD_PKG:-/usr/share/lmod/lmod}
[ -x "$lmod_root/libexec/lmod" ] || { echo "MISSING: Lmod is not installed ($lmod_root/libexec/lmod): apt-get install lmod"; exit 3; }

# The site's toolchain modules, standing in for EasyBuild-built ones (see above).
mods="$work/toolchain-modules"
gcc_version=$(gcc -dumpfullversion)
rust_version=$(rustc --version | awk '{print $2}')
cargo_bin=$(dirname "$(command -v cargo)")
mkdir -p "$mods/GCCcore" "$mods/binutils" "$mods/Rust"
cat >"$mods/GCCcore/14.3.0.lua" <<EOF
whatis("GCCcore 14.3.0 for this test: the machine's gcc $gcc_version from /usr/bin")
setenv("EBROOTGCCCORE", "/usr")
setenv("EBVERSIONGCCCORE", "14.3.0")
EOF
cat >"$mods/binutils/2.44-GCCcore-14.3.0.lua" <<EOF
whatis("binutils 2.44 for this test: the machine's binutils from /usr/bin")
setenv("EBROOTBINUTILS", "/usr")
setenv("EBVERSIONBINUTILS", "2.44")
EOF
cat >"$mods/Rust/1.88.0-GCCcore-14.3.0.lua" <<EOF
whatis("Rust 1.88.0 for this test: rustup's Rust $rust_version from $cargo_bin")
prepend_path("PATH", "$cargo_bin")
setenv("RUSTUP_HOME", "${RUSTUP_HOME:-$HOME/.rustup}")
setenv("EBROOTRUST", "$(dirname "$cargo_bin")")
setenv("EBVERSIONRUST", "1.88.0")
EOF

export LMOD_CMD="$lmod_root/libexec/lmod"
export LMOD_ALLOW_ROOT_USE=yes
export MODULEPATH="$mods:$work/install/modules/all"
export EASYBUILD_PREFIX="$work/eb"
export EASYBUILD_INSTALLPATH="$work/install"
export EASYBUILD_BUILDPATH="$work/build"
export EASYBUILD_SOURCEPATH="$srcdir"
export EASYBUILD_TMPDIR="$work/tmp"
export EASYBUILD_REPOSITORYPATH="$work/ebfiles_repo"
export EASYBUILD_MODULES_TOOL=Lmod
export EASYBUILD_MODULE_SYNTAX=Lua
export EASYBUILD_ROBOT_PATHS="$(dirname "$ec")"
# Nothing leaves the machine: the sources are in SOURCEDIR, the crates in the tarball.
export EASYBUILD_DISABLE_CHECK_EB_DEPS=1
# EasyBuild refuses root unless told; CI and this project's machines run as root.
[ "$(id -u)" -ne 0 ] || export EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES=1
mkdir -p "$work/tmp"
cd "$work"

echo "== eb --show-config" >&2
"$eb" --show-config >&2
case "$mode" in
    dry-run)
        echo "== eb --dry-run" >&2
        "$eb" --dry-run "$ec"
        echo "== eb --extended-dry-run" >&2
        "$eb" --extended-dry-run "$ec"
        ;;
    install)
        echo "== eb (install)" >&2
        "$eb" "$ec"
        echo "== module load autopin" >&2
        # A fresh login-like shell with Lmod's own init, as a user on the cluster has.
        # The module depends on the toolchain's module (GCCcore), which a site's tree has.
        env -i HOME="$HOME" PATH=/usr/bin:/bin MODULEPATH="$work/install/modules/all:$mods" \
            LMOD_ALLOW_ROOT_USE=yes TERM=dumb bash --norc --noprofile -c '
            set -euo pipefail
            source "'"$lmod_root"'/init/bash"
            module load autopin
            module list 2>&1
            command -v autopin
            autopin --version
            man -w autopin
            autopin topology --format json >/dev/null
            echo "XDG_DATA_DIRS=$XDG_DATA_DIRS"
            for d in ${XDG_DATA_DIRS//:/ }; do
                [ -f "$d/bash-completion/completions/autopin" ] && echo "bash completion: $d/bash-completion/completions/autopin"
            done
            true'
        ;;
    *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
