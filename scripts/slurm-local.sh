#!/usr/bin/env bash
# A real Slurm on this one host, for autopin's cluster tests and benchmarks: slurmctld plus two
# slurmd daemons acting as emulated nodes (node1, node2: same host, own ports and spool
# directories), munge for authentication, task/affinity + proctrack/linuxproc +
# select/cons_tres. Uses Debian's slurm-wlm packages (scripts/deps.sh installs them).
#
#   scripts/slurm-local.sh up     start it (idempotent: a running cluster is left alone)
#   scripts/slurm-local.sh down   stop every daemon this script started and remove its state
#   scripts/slurm-local.sh env    print what a shell needs: eval "$(scripts/slurm-local.sh env)"
#   scripts/slurm-local.sh status say whether it runs
#
# AUTOPIN_SPANK="/path/autopin_spank.so autopin=/path/autopin" at 'up' installs the SPANK
# plugin (srun --autopin) in the cluster's plugstack.conf.
#
# State lives in $AUTOPIN_SLURM_DIR (default /tmp/autopin-slurm). The daemons run in the
# foreground (-D) under setsid, so no init system is needed; munged runs as its own user.
set -euo pipefail

DIR="${AUTOPIN_SLURM_DIR:-/tmp/autopin-slurm}"
CONF="$DIR/etc/slurm.conf"
CTLD_PORT="${AUTOPIN_SLURM_PORT:-16817}"
NODES=(node1 node2)
CPUS="$(nproc)"

say() { echo "slurm-local: $*" >&2; }

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

write_conf() {
    mkdir -p "$DIR/etc" "$DIR/state" "$DIR/log" "$DIR/run"
    local first=$((CTLD_PORT + 1))
    {
        echo "# Written by scripts/slurm-local.sh; removed by 'down'."
        echo "ClusterName=autopin"
        echo "SlurmctldHost=localhost"
        echo "SlurmctldPort=$CTLD_PORT"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "AuthType=auth/munge"
        echo "CredType=cred/munge"
        echo "StateSaveLocation=$DIR/state"
        echo "SlurmdSpoolDir=$DIR/spool/%n"
        echo "SlurmctldPidFile=$DIR/run/slurmctld.pid"
        echo "SlurmdPidFile=$DIR/run/slurmd-%n.pid"
        echo "SlurmctldLogFile=$DIR/log/slurmctld.log"
        echo "SlurmdLogFile=$DIR/log/slurmd-%n.log"
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/affinity"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_CPU"
        echo "MpiDefault=none"
        echo "SwitchType=switch/none"
        echo "JobCompType=jobcomp/none"
        echo "AccountingStorageType=accounting_storage/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "ReturnToService=2"
        echo "SlurmdTimeout=30"
        echo "InactiveLimit=0"
        echo "KillWait=5"
        echo "MinJobAge=30"
        echo "PlugStackConfig=$DIR/etc/plugstack.conf"
        local i=0
        for n in "${NODES[@]}"; do
            echo "NodeName=$n NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((first + i)) CPUs=$CPUS State=UNKNOWN"
            i=$((i + 1))
        done
        echo "PartitionName=debug Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
    } >"$CONF.tmp"
    mv "$CONF.tmp" "$CONF"
    : >"$DIR/etc/plugstack.conf"
    write_plugstack
    for n in "${NODES[@]}"; do mkdir -p "$DIR/spool/$n"; done
}

# The autopin SPANK plugin (contrib/slurm) is listed in plugstack.conf when AUTOPIN_SPANK is
# set at 'up': "PLUGIN.so [ARGS]", e.g. "/path/autopin_spank.so autopin=/path/autopin".
# srun and slurmstepd read plugstack.conf at every step, so this also works on a running
# cluster. Written atomically.
write_plugstack() {
    [ -n "${AUTOPIN_SPANK:-}" ] || return 0
    local so="${AUTOPIN_SPANK%% *}"
    [ -f "$so" ] || { say "AUTOPIN_SPANK: no plugin at $so (make -C contrib/slurm builds it)"; return 1; }
    echo "optional $AUTOPIN_SPANK" >"$DIR/etc/plugstack.conf.tmp"
    mv "$DIR/etc/plugstack.conf.tmp" "$DIR/etc/plugstack.conf"
}

start_munge() {
    if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
        return 0
    fi
    [ -s /etc/munge/munge.key ] || {
        say "creating /etc/munge/munge.key"
        mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null ||
            dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
        chown munge:munge /etc/munge/munge.key
        chmod 400 /etc/munge/munge.key
    }
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    chmod 755 /run/munge
    runuser -u munge -- /usr/sbin/munged --force
    for _ in $(seq 50); do
        munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    say "munged did not start"
    return 1
}

start_daemon() { # pidfile log command...
    local pidfile="$1" log="$2"
    shift 2
    setsid "$@" >>"$log" 2>&1 </dev/null &
    echo $! >"$pidfile"
}

wait_idle() {
    export SLURM_CONF="$CONF"
    for _ in $(seq 150); do
        local idle
        idle="$(sinfo -h -N -o '%N %t' 2>/dev/null | grep -c -E ' (idle|mix|alloc)' || true)"
        [ "$idle" -ge "${#NODES[@]}" ] && return 0
        sleep 0.2
    done
    say "nodes did not become idle; sinfo says:"
    sinfo -N 2>&1 | sed 's/^/  /' >&2 || true
    say "logs are in $DIR/log"
    return 1
}

up() {
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null || {
        say "Slurm or munge is not installed (apt-get install slurmctld slurmd slurm-client munge)"
        exit 1
    }
    if alive "$DIR/run/ctld.daemon" && for n in "${NODES[@]}"; do alive "$DIR/run/$n.daemon" || exit 1; done; then
        say "already up ($CONF)"
        write_plugstack
        wait_idle
        return 0
    fi
    down quiet
    write_conf
    start_munge
    start_daemon "$DIR/run/ctld.daemon" "$DIR/log/slurmctld.out" slurmctld -D -c -i -f "$CONF"
    for _ in $(seq 100); do
        SLURM_CONF="$CONF" scontrol ping 2>/dev/null | grep -q UP && break
        sleep 0.1
    done
    for n in "${NODES[@]}"; do
        start_daemon "$DIR/run/$n.daemon" "$DIR/log/slurmd-$n.out" slurmd -D -N "$n" -f "$CONF"
    done
    wait_idle
    say "up: ${NODES[*]} with $CPUS CPUs each (SLURM_CONF=$CONF)"
}

stop_pid() { # pidfile
    local f="$1"
    [ -f "$f" ] || return 0
    local pid
    pid="$(cat "$f")"
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
}

down() {
    [ -d "$DIR" ] || { [ "${1:-}" = quiet ] || say "not running"; return 0; }
    if [ -f "$CONF" ] && alive "$DIR/run/ctld.daemon"; then
        SLURM_CONF="$CONF" scancel --full --quiet -u "$(id -un)" 2>/dev/null || true
    fi
    for n in "${NODES[@]}"; do stop_pid "$DIR/run/$n.daemon"; done
    stop_pid "$DIR/run/ctld.daemon"
    rm -rf "$DIR"
    [ "${1:-}" = quiet ] || say "down"
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    status)
        if alive "$DIR/run/ctld.daemon"; then
            SLURM_CONF="$CONF" sinfo -N
        else
            echo "down"
            exit 1
        fi
        ;;
    *)
        echo "usage: $0 up|down|env|status" >&2
        exit 2
        ;;
esac
