#!/usr/bin/env bash
# Boots a throw-away Linux guest with a chosen CPU/NUMA topology and runs one command in it.
#
#   tests/vm/vm.sh [options] -- COMMAND [ARGS...]
#
# The guest is Debian's kernel (linux-image-amd64, fetched once with `apt-get download` and
# unpacked with `dpkg -x`, never installed) and an initramfs built here from busybox-static,
# the files given with --add (with the shared libraries `ldd` says they need) and COMMAND.
# The command's stdout, stderr and exit status come back as this script's own; they travel
# on the guest's second, third and fourth serial ports (the first is the kernel console,
# kept in the result directory as console.log).
#
# Topology options (QEMU's terms):
#   --sockets N --cores N --threads N   CPUs = sockets × cores × threads (default 1×2×1)
#   --node CPUS:MEM                     a NUMA node: Linux CPU list and memory (256M, 1G);
#                                       repeat per node, in node order; empty CPUS (":256M")
#                                       makes a memory-only node (default: one node, 512M)
#   --dist SRC,DST,VAL                  NUMA distance (symmetric unless both given)
# Other options:
#   --add PATH[:GUESTPATH]              put a host file in the guest (default /bin/NAME)
#   --timeout SEC                       give up on the guest after SEC seconds (default 300)
#   --cpu-timeout SEC                   give up once QEMU has used SEC seconds of CPU: a limit
#                                       on the work the guest got, so a machine shared with
#                                       other work gives it more wall time (--timeout stays
#                                       the wall-clock cap)
#   --result-dir DIR                    also leave stdout, stderr, status, console.log there
#   --accel kvm|tcg|auto                (default auto: KVM when a probe boot works, else TCG)
#   --print                             print the qemu command line instead of running it
# Environment: AUTOPIN_VM_CACHE (kernel cache, default $CARGO_TARGET_DIR/vm or target/vm in
# the repository), AUTOPIN_VM_KERNEL (use this bzImage instead of Debian's package).
# Exit status: the guest command's; 125 when the guest could not be started or did not
# report a status (the reason is on stderr, lines starting "vm.sh:").
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${AUTOPIN_VM_CACHE:-${CARGO_TARGET_DIR:-$repo/target}/vm}"

die() { echo "vm.sh: $*" >&2; exit 125; }

sockets=1 cores=2 threads=1 timeout=300 cpu_timeout="" accel=auto print=0 result_dir=""
nodes=() dists=() adds=()
while [ $# -gt 0 ]; do
    case "$1" in
        --sockets) sockets="$2"; shift 2 ;;
        --cores) cores="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --node) nodes+=("$2"); shift 2 ;;
        --dist) dists+=("$2"); shift 2 ;;
        --add) adds+=("$2"); shift 2 ;;
        --timeout) timeout="$2"; shift 2 ;;
        --cpu-timeout) cpu_timeout="$2"; shift 2 ;;
        --result-dir) result_dir="$2"; shift 2 ;;
        --accel) accel="$2"; shift 2 ;;
        --print) print=1; shift ;;
        --) shift; break ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
done
[ $# -gt 0 ] || die "no command given (usage: vm.sh [options] -- COMMAND [ARGS...])"
for v in "$sockets" "$cores" "$threads" "$timeout" ${cpu_timeout:+"$cpu_timeout"}; do
    [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "'$v' is not a positive whole number"
done
[ ${#nodes[@]} -gt 0 ] || nodes=("0-$((sockets * cores * threads - 1)):512M")

command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is not installed (scripts/deps.sh installs qemu-system-x86)"
busybox="$(command -v busybox || true)"
[ -n "$busybox" ] && file -L "$busybox" 2>/dev/null | grep -q 'statically linked' \
    || die "a statically linked busybox is needed (apt-get install busybox-static)"

# --- the kernel: Debian's package, unpacked once into the cache ---------------------------
kernel_image() {
    if [ -n "${AUTOPIN_VM_KERNEL:-}" ]; then echo "$AUTOPIN_VM_KERNEL"; return; fi
    local k
    # Tests boot several guests at once: the first one fetches the kernel while the others
    # wait on the lock, so none of them sees a half-unpacked or replaced cache.
    mkdir -p "$cache"
    exec 9>"$cache/kernel.lock"
    flock 9 || die "cannot lock $cache/kernel.lock"
    k="$(ls "$cache"/kernel/boot/vmlinuz-* 2>/dev/null | head -n1 || true)"
    if [ -z "$k" ]; then
        local pkg tmp
        pkg="$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')"
        [ -n "$pkg" ] || die "apt-cache does not know linux-image-amd64 (run apt-get update)"
        tmp="$(mktemp -d "$cache/fetch.XXXXXX")"
        (cd "$tmp" && apt-get download "$pkg" >/dev/null 2>"$tmp/apt.log") \
            || die "apt-get download $pkg failed: $(tail -n 2 "$tmp/apt.log")"
        dpkg -x "$tmp"/*.deb "$tmp/kernel" || die "dpkg -x of $pkg failed"
        rm -rf "$cache/kernel" && mv "$tmp/kernel" "$cache/kernel" && rm -rf "$tmp"
        k="$(ls "$cache"/kernel/boot/vmlinuz-* | head -n1)"
    fi
    exec 9>&-
    echo "$k"
}
kernel="$(kernel_image)"
[ -r "$kernel" ] || die "kernel image $kernel is not readable"

# --- the QEMU machine ---------------------------------------------------------------------
to_mib() {
    case "$1" in
        *[Gg]) echo $(( ${1%[Gg]} * 1024 )) ;;
        *[Mm]) echo $(( ${1%[Mm]} )) ;;
        *) die "memory size '$1' needs a unit, e.g. 256M or 1G" ;;
    esac
}
ncpu=$((sockets * cores * threads))
qargs=(-nodefaults -no-reboot -display none -monitor none
    -smp "$ncpu,sockets=$sockets,cores=$cores,threads=$threads")
total=0 i=0
for n in "${nodes[@]}"; do
    [[ "$n" == *:* ]] || die "--node '$n' must be CPUS:MEM (e.g. 0-3:512M, or :256M for memory only)"
    cpus="${n%%:*}" mem="$(to_mib "${n#*:}")"
    total=$((total + mem))
    qargs+=(-object "memory-backend-ram,id=m$i,size=${mem}M")
    spec="node,nodeid=$i,memdev=m$i"
    if [ -n "$cpus" ]; then
        IFS=, read -ra parts <<<"$cpus"
        for p in "${parts[@]}"; do
            [[ "$p" =~ ^[0-9]+(-[0-9]+)?$ ]] || die "--node '$n': '$p' is not a CPU or CPU range"
            spec+=",cpus=$p"
        done
    fi
    qargs+=(-numa "$spec")
    i=$((i + 1))
done
for d in "${dists[@]}"; do
    [[ "$d" =~ ^[0-9]+,[0-9]+,[0-9]+$ ]] || die "--dist '$d' must be SRC,DST,VAL"
    IFS=, read -r s t v <<<"$d"
    qargs+=(-numa "dist,src=$s,dst=$t,val=$v")
done
qargs+=(-m "${total}M")

# --- the initramfs ------------------------------------------------------------------------
stage="$(mktemp -d "${TMPDIR:-/tmp}/autopin-vm.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
root="$stage/root"
mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,etc,lib,lib64,usr/bin}
cp "$busybox" "$root/bin/busybox"
for app in sh mount poweroff stty cat sync sleep; do ln -s busybox "$root/bin/$app"; done

add_file() { # host path, guest path; then the shared libraries it needs, at their own paths
    local src="$1" dst="$2"
    [ -f "$src" ] || die "--add: $src is not a file"
    mkdir -p "$root$(dirname "$dst")"
    cp -L "$src" "$root$dst"
    chmod u+w "$root$dst"
    if file -L "$src" | grep -q 'ELF.*not stripped'; then
        strip --strip-debug "$root$dst" 2>/dev/null || true
    fi
    if file -L "$src" | grep -q 'dynamically linked'; then
        ldd "$src" 2>/dev/null | awk '/=> \//{print $3} /^\t\//{print $1}' | while read -r lib; do
            [ -e "$root$lib" ] && continue
            mkdir -p "$root$(dirname "$lib")"
            cp -L "$lib" "$root$lib"
        done
    fi
}
for a in "${adds[@]}"; do
    src="${a%%:*}"
    if [[ "$a" == *:* ]]; then dst="${a#*:}"; else dst="/bin/$(basename "$src")"; fi
    add_file "$src" "$dst"
done

# The command, as a script: arguments quoted for the guest shell.
{
    echo 'export PATH=/bin:/sbin:/usr/bin'
    echo 'cd /tmp'
    printf 'exec'
    printf ' %q' "$@"
    echo
} >"$root/command.sh"
# The busybox shell does not know bash's $'..' quoting; a plain script is passed through as is
# when the command is "sh -c SCRIPT" (what the Rust test helper uses).
if [ $# -eq 3 ] && [ "$1" = sh ] && [ "$2" = -c ]; then
    printf 'export PATH=/bin:/sbin:/usr/bin\ncd /tmp\n%s\n' "$3" >"$root/command.sh"
fi
cat >"$root/init" <<'EOF'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
for p in 1 2 3; do stty -F /dev/ttyS$p raw -echo 2>/dev/null; done
/bin/sh /command.sh >/tmp/.out 2>/tmp/.err </dev/null
echo "$?" >/tmp/.status
cat /tmp/.out >/dev/ttyS1
cat /tmp/.err >/dev/ttyS2
echo "status $(cat /tmp/.status) end" >/dev/ttyS3
sync
poweroff -f
EOF
chmod +x "$root/init" "$root/command.sh"
(cd "$root" && find . | "$busybox" cpio -o -H newc 2>/dev/null) >"$stage/initrd.cpio"

out="$stage/out"
mkdir -p "$out"
qemu_cmd() { # accel, timeout; runs in the background, where exec leaves timeout as $!
    local accel_args
    case "$1" in
        kvm) accel_args=(-accel kvm -cpu host) ;;
        tcg) accel_args=(-accel tcg -cpu "${AUTOPIN_VM_CPU:-max,vendor=GenuineIntel}") ;;
    esac
    exec timeout --kill-after=5 "$2" qemu-system-x86_64 "${accel_args[@]}" "${qargs[@]}" \
        -kernel "$kernel" -initrd "$stage/initrd.cpio" \
        -append "console=ttyS0 rdinit=/init quiet loglevel=3 panic=-1 mitigations=off" \
        -serial "file:$out/console.log" -serial "file:$out/stdout" \
        -serial "file:$out/stderr" -serial "file:$out/status"
}

# KVM is exposed on some VMs whose guests then hang in early boot: believe it only after a
# probe boot finishes in time (remembered in the cache).
if [ "$accel" = auto ]; then
    accel=tcg
    if [ -w /dev/kvm ]; then
        probe="$cache/kvm-probe"
        mkdir -p "$cache"
        # One probe boot for all guests started together; the answer lands atomically.
        exec 8>"$cache/kvm-probe.lock"
        flock 8 || die "cannot lock $cache/kvm-probe.lock"
        if [ ! -f "$probe" ]; then
            if AUTOPIN_VM_CACHE="$cache" "$0" --accel kvm --timeout 20 -- true >/dev/null 2>&1; then
                echo kvm >"$probe.tmp"
            else
                echo tcg >"$probe.tmp"
            fi
            mv "$probe.tmp" "$probe"
        fi
        exec 8>&-
        accel="$(cat "$probe")"
    fi
fi
case "$accel" in kvm|tcg) ;; *) die "--accel must be kvm, tcg or auto" ;; esac

if [ "$print" = 1 ]; then
    echo qemu-system-x86_64 "${qargs[@]}" -kernel "$kernel" -initrd "$stage/initrd.cpio"
    exit 0
fi
: >"$out/stdout"; : >"$out/stderr"; : >"$out/status"; : >"$out/console.log"
set +e
qemu_cmd "$accel" "$timeout" 2>"$out/qemu.err" &
tpid=$!
cpu_out=0 started=$SECONDS
if [ -n "$cpu_timeout" ]; then
    # The CPU time QEMU got is the guest's progress: stop it when that, not the wall
    # clock, runs out (a busy machine slows the guest down without making it wrong).
    hz=$(getconf CLK_TCK)
    while kill -0 "$tpid" 2>/dev/null; do
        sleep 1
        q=$(pgrep -P "$tpid" | head -n1)
        [ -n "$q" ] || continue
        used=$(awk -v hz="$hz" '{print int(($14 + $15) / hz)}' "/proc/$q/stat" 2>/dev/null)
        if [ "${used:-0}" -ge "$cpu_timeout" ]; then
            cpu_out=1
            kill -TERM "$q" 2>/dev/null
            break
        fi
    done
fi
wait "$tpid"
qrc=$?
set -e
if [ -n "$result_dir" ]; then
    mkdir -p "$result_dir"
    cp "$out"/* "$result_dir"/
    echo "$accel" >"$result_dir/accel"
fi
status="$(sed -n 's/^status \([0-9]*\) end.*/\1/p' "$out/status" | head -n1)"
cat "$out/stdout"
cat "$out/stderr" >&2
if [ -z "$status" ]; then
    [ "$cpu_out" = 1 ] && echo "vm.sh: the guest did not finish within ${cpu_timeout} s of CPU ($((SECONDS - started)) s of wall time, $accel)" >&2
    [ "$qrc" = 124 ] || [ "$qrc" = 137 ] && echo "vm.sh: the guest did not finish within ${timeout}s ($accel)" >&2
    echo "vm.sh: the guest reported no exit status (qemu exit $qrc, $accel)" >&2
    sed 's/^/vm.sh: qemu: /' "$out/qemu.err" >&2
    tail -n 15 "$out/console.log" | sed 's/^/vm.sh: console: /' >&2
    exit 125
fi
exit "$status"
