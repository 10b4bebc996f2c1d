#!/usr/bin/env bash
# Installs what autopin needs on a Debian machine, skipping what is already there. Safe to
# run again. Needs root (or sudo) only when something is missing.
#   scripts/deps.sh demo   the build and the demo: a C toolchain with OpenMP, and Rust
#   scripts/deps.sh test   (default) also everything the test suite compares against or
#                          runs: clang/libomp, QEMU, likwid, perf, Slurm, MPICH, Open MPI, ...
set -euo pipefail
need=${1:-test}
case "$need" in
    demo | test) ;;
    *) echo "usage: scripts/deps.sh [demo|test]" >&2; exit 2 ;;
esac

need_pkgs=()
have() { command -v "$1" >/dev/null 2>&1; }
have gcc || need_pkgs+=(gcc libc6-dev)
have g++ || need_pkgs+=(g++)
have make || need_pkgs+=(make)
have curl || need_pkgs+=(curl ca-certificates)
# OpenMP runtime and static libc for the demo workloads and the static-binary tests.
[ -e /usr/lib/gcc/x86_64-linux-gnu/*/libgomp.so ] 2>/dev/null || need_pkgs+=(libgomp1)
ls /usr/lib/gcc/*/*/include/omp.h >/dev/null 2>&1 || need_pkgs+=(gcc)
[ -e /usr/lib/x86_64-linux-gnu/libc.a ] || [ -e /usr/lib/aarch64-linux-gnu/libc.a ] || need_pkgs+=(libc6-dev)
if [ "$need" = test ]; then
    # graphviz checks the dot view; the dump tests unpack hwloc's sysfs archives and compare
    # with lstopo's output; python3 runs helper scripts.
    have dot || need_pkgs+=(graphviz)
    have python3 || need_pkgs+=(python3)
    have tar || need_pkgs+=(tar)
    have bzip2 || need_pkgs+=(bzip2)
    have lstopo-no-graphics || need_pkgs+=(hwloc)
    # The load scripts/test-under-load.sh runs the suite beside.
    have stress-ng || need_pkgs+=(stress-ng)
    # clang with LLVM's OpenMP runtime: the OpenMP progress tests build the workload with
    # both compilers (libgomp and libomp count through different entry points).
    have clang || need_pkgs+=(clang)
    ls /usr/lib/llvm-*/lib/libomp.so >/dev/null 2>&1 || need_pkgs+=(libomp-dev)
    # The multi-socket, multi-node test machine (tests/vm/vm.sh): QEMU, a static busybox for the
    # initramfs, and apt/dpkg to fetch Debian's kernel package (never installed on the host).
    have qemu-system-x86_64 || need_pkgs+=(qemu-system-x86)
    file -L "$(command -v busybox || echo /nonexistent)" 2>/dev/null | grep -q 'statically linked' || need_pkgs+=(busybox-static)
    have file || need_pkgs+=(file)
    # Optional tools the tests compare against when present.
    have likwid-pin || need_pkgs+=(likwid)
    # GROMACS (a real OpenMP code): its energies under `autopin run` with fewer threads are
    # compared with a run without autopin (crates/autopin/tests/memory.rs).
    have gmx || need_pkgs+=(gromacs)
    # rsvg-convert renders every SVG autopin writes for the picture checks (tests/svg_render.rs);
    # man renders the generated man page.
    have rsvg-convert || need_pkgs+=(librsvg2-bin)
    have man || need_pkgs+=(man-db)
    have perf || need_pkgs+=(linux-perf)
    # The cluster tests: a local Slurm (scripts/slurm-local.sh) and both MPI implementations.
    # MPICH and Open MPI both register mpicc/mpirun alternatives; the tests call the explicit
    # mpirun.mpich / mpirun.openmpi.
    have slurmctld || need_pkgs+=(slurmctld)
    have slurmd || need_pkgs+=(slurmd)
    have srun || need_pkgs+=(slurm-client)
    have munged || need_pkgs+=(munge)
    [ -e /usr/include/slurm/spank.h ] || need_pkgs+=(libslurm-dev)
    have mpirun.mpich || need_pkgs+=(mpich libmpich-dev)
    have mpirun.openmpi || need_pkgs+=(openmpi-bin libopenmpi-dev)
    # The packaging tests (crates/autopin/tests/packaging.rs): dpkg-shlibdeps for the .deb's
    # Depends, Lmod for EasyBuild's modules, and a Python venv to install EasyBuild into.
    have dpkg-shlibdeps || need_pkgs+=(dpkg-dev)
    have objdump || need_pkgs+=(binutils)
    [ -x /usr/share/lmod/lmod/libexec/lmod ] || need_pkgs+=(lmod)
    python3 -c 'import ensurepip' >/dev/null 2>&1 || need_pkgs+=(python3-venv)
fi

if [ ${#need_pkgs[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "deps: installing ${need_pkgs[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    # Optional packages may be missing on some releases: install one by one, tolerating those.
    for p in $(printf '%s\n' "${need_pkgs[@]}" | sort -u); do
        case "$p" in
            likwid|linux-perf|librsvg2-bin|man-db|lmod|gromacs) $SUDO apt-get install -y -qq "$p" >/dev/null || echo "deps: optional $p not installed" >&2 ;;
            *) $SUDO apt-get install -y -qq "$p" >/dev/null ;;
        esac
    done
fi

if ! have cargo; then
    [ -x "$HOME/.cargo/bin/cargo" ] || {
        echo "deps: installing the Rust toolchain (rustup)" >&2
        curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c clippy,rustfmt
    }
fi

# EasyBuild (PyPI) for the easyconfig tests, in its own venv (tests/tools/easybuild_check.sh
# finds it there); the version is pinned so that its Cargo easyblock is the one tested.
eb_venv="$HOME/.local/share/autopin/easybuild"
if [ "$need" = test ] && [ ! -x "$eb_venv/bin/eb" ]; then
    echo "deps: installing EasyBuild into $eb_venv" >&2
    { python3 -m venv "$eb_venv" &&
        "$eb_venv/bin/pip" install -q easybuild-framework==5.4.1 easybuild-easyblocks==5.4.1; } ||
        echo "deps: EasyBuild not installed (the easyconfig tests skip)" >&2
fi

# The unused-dependency check of scripts/test.sh (crates.io, built once into ~/.cargo/bin).
export PATH="$HOME/.cargo/bin:$PATH"
if [ "$need" = test ] && ! have cargo-machete; then
    echo "deps: installing cargo-machete" >&2
    cargo install cargo-machete --locked --quiet
fi
