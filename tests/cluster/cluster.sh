#!/bin/bash
# cluster.sh: a private one-node Slurm cluster for the tests, in a folder of its
# own: munged with its own key and socket, slurmctld and slurmd with a
# generated slurm.conf (this machine's cores and memory, one partition, free
# ports, state, spool and logs in the folder). Nothing outside the folder is
# read or written, so it coexists with a real Slurm or munge on the machine.
#
#   cluster.sh up DIR [WATCH_PID]  start it (DIR new or empty), wait for the node
#                                  to be idle, write DIR/env (SLURM_CONF=...)
#   cluster.sh down DIR            stop it: jobs, slurmd, slurmctld, munged, and
#                                  any process of a job of ours still alive
#   cluster.sh ours DIR            list the processes of ours still running
#   cluster.sh run CMD [ARG]...    up in a temporary folder, CMD with the
#                                  cluster's environment (SLURM_CONF, and
#                                  TQ_CLUSTER_DIR: the folder), down on exit
#
# "up" also leaves a guard that runs "down" when WATCH_PID (default: the
# caller) ends, so no daemon outlives a test run that was killed before its
# teardown. Exit status: 0, 77 when the cluster cannot run here (not root,
# packages missing, a daemon that does not start: the reason, from the
# daemons' logs, on standard error), 1 when "down" left a process behind.
set -u
me=cluster.sh
# this script is no client of a cluster: were it started with the variables
# that mark one, the subshells it forks would carry them in
# /proc/PID/environ (unset changes only bash's copy) and be taken for ours
if [ -n "${SLURM_CONF:-}${TQ_CLUSTER:-}" ]; then
    exec env -u SLURM_CONF -u TQ_CLUSTER "$BASH" "${BASH_SOURCE[0]}" "$@"
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die_skip() { echo "$me: cannot run a Slurm cluster here: $*" >&2; exit 77; }

# alive PID: it runs (a zombie does not: PID 1 of a container may be slow to
# reap the daemons it inherits)
alive() {
    local line st
    # builtins only: this runs for every candidate, on a busy machine
    [ -n "$1" ] && read -r line 2>/dev/null < "/proc/$1/stat" || return 1
    st=${line##*) } st=${st%% *}
    [ -n "$st" ] && [ "$st" != Z ]
}

# the processes of the cluster of DIR: its daemons (by pid file, by the
# marker in their environment, by a log or spool file of DIR they hold open:
# slurmstepd), the processes of its
# jobs and the clients talking to it (SLURM_CONF names our slurm.conf: an
# srun left waiting for a controller that is gone), less this shell and its
# ancestors (the test that asks, and the Bats process that tears down)
ours() {
    local dir=$1 skip=" " q=$$ p f
    while [ "$q" -gt 1 ]; do
        skip+="$q "
        local k v p=
        while read -r k v; do
            [ "$k" = PPid: ] && { p=$v; break; }
        done 2>/dev/null < "/proc/$q/status"
        [ -n "$p" ] || break
        q=$p
    done
    # environ is NUL-separated: grep -z reads one variable a line;
    # slurmstepd writes its title over its environment, but holds the log of
    # slurmd open (the guard's own log does not count: what it starts has it)
    for f in $( { find /proc/[0-9]*/fd -maxdepth 1 \( -lname "$dir/log/slurm*" -o -lname "$dir/spool/*" \) |
                      sed 's,/fd/.*,/environ,'
                  grep -lzxF -e "TQ_CLUSTER=$dir" -e "SLURM_CONF=$dir/slurm.conf" /proc/[0-9]*/environ
                } 2>/dev/null | sort -u); do
        p=${f#/proc/} p=${p%/environ}
        case "$skip" in *" $p "*) continue ;; esac
        alive "$p" && echo "$p"
    done
    for f in "$dir"/run/*.pid; do
        [ -e "$f" ] || continue
        read -r p 2>/dev/null < "$f" || continue
        [ -n "$p" ] && alive "$p" && case "$skip" in *" $p "*) ;; *) echo "$p" ;; esac
    done
    return 0
}

down() {
    local dir=$1 left
    # a guard still watching has nothing more to do
    local guard
    guard=$(cat "$dir/run/guard.pid" 2>/dev/null)
    [ -n "$guard" ] && [ "$guard" != $$ ] && kill "$guard" 2>/dev/null
    rm -f "$dir/run/guard.pid"
    if [ -f "$dir/slurm.conf" ] && alive "$(cat "$dir/run/slurmctld.pid" 2>/dev/null)"; then
        # every job of every user (the cluster is ours alone), and a moment
        # for slurmd to end them while slurmctld and munged still answer
        SLURM_CONF=$dir/slurm.conf timeout 5 scancel --quiet --partition=tq 2>/dev/null
        for _ in $(seq 30); do
            [ -z "$(SLURM_CONF=$dir/slurm.conf timeout 2 squeue -h -t R,CG -o %i 2>/dev/null)" ] && break
            sleep 0.1
        done
    fi
    # in order: slurmd reports to slurmctld, both need munged
    local d p
    for d in slurmd slurmctld munged; do
        p=$(cat "$dir/run/$d.pid" 2>/dev/null) || continue
        kill -TERM "$p" 2>/dev/null || continue
        for _ in $(seq 20); do
            alive "$p" || break
            sleep 0.1
        done
        alive "$p" && kill -KILL "$p" 2>/dev/null
    done
    # what is left (a step or job process whose daemon died first) is killed
    left=$(ours "$dir")
    [ -n "$left" ] && kill -KILL $left 2>/dev/null
    for _ in $(seq 20); do
        left=$(ours "$dir")
        [ -z "$left" ] && break
        sleep 0.1
    done
    rm -f "$dir"/run/*.pid
    if [ -n "$left" ]; then
        echo "$me: still running after teardown: $(ps -o pid=,args= -p "$(echo $left | tr " " ,)" | tr "\n" " ")" >&2
        return 1
    fi
    return 0
}

free_port() {
    # a port nobody listens on, nor one we took already
    local p used
    used=" $(ss -Htan 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }' | tr '\n' ' ') $taken "
    while :; do
        p=$((20000 + RANDOM % 30000))
        case "$used" in *" $p "*) continue ;; esac
        taken+="$p "
        echo "$p"
        return
    done
}

# why LOG...: the last lines of a daemon's logs that say why it stopped (its
# errors, else its last words)
why() {
    local said
    said=$(cat "$@" 2>/dev/null | grep -E 'error|fatal|Error|Fatal' | tail -3)
    [ -n "$said" ] || said=$(cat "$@" 2>/dev/null | tail -2)
    [ -n "$said" ] || said="it wrote nothing (logs: $*)"
    echo "$said" | tr '\n' ' ' | sed 's/ *$//'
}

up() {
    local dir=$1 watch=${2:-$PPID}
    [ "$(id -u)" -eq 0 ] || die_skip "not root (slurmd must run as root to start jobs as their user)"
    local c missing=
    for c in munged munge slurmctld slurmd sbatch squeue scontrol sinfo scancel srun ss; do
        command -v "$c" >/dev/null 2>&1 || missing+=" $c"
    done
    [ -z "$missing" ] || die_skip "missing:$missing (make deps-test installs munge, slurm-wlm)"
    mkdir -p "$dir" || die_skip "$dir: cannot create it"
    dir=$(cd "$dir" && pwd)
    [ ! -e "$dir/slurm.conf" ] || { echo "$me: $dir already holds a cluster" >&2; exit 2; }
    mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log" "$dir/run"
    # the key and the state are no one else's business
    chmod 700 "$dir/munge" "$dir/state" "$dir/spool"
    chmod 755 "$dir" "$dir/log" "$dir/run"
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$dir/munge/munge.key"

    local host cpus mem taken=""
    host=$(hostname -s)
    cpus=$(nproc --all)
    # what slurmd will find: a node that claims more is drained at once
    mem=$(slurmd -C 2>/dev/null | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
    [ -n "$mem" ] || mem=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
    local ctl_port slurmd_port
    ctl_port=$(free_port) slurmd_port=$(free_port)
    cat > "$dir/slurm.conf" <<EOF
# generated by tests/cluster/cluster.sh: a private test cluster
ClusterName=tq
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctl_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# no systemd, maybe no cgroups: processes tracked by parentage, no binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
# no slurmdbd (sacct needs one): each finished job's state and exit code go
# to a text file instead
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
# quick: a finished job leaves the queue after 4 s (and sbatch --wait then
# polls every 2 s instead of backing off to 32 s), a cancelled one is killed
# 1 s after its SIGTERM, the scheduler passes every second
MinJobAge=4
KillWait=1
SchedulerParameters=sched_interval=1,sched_min_interval=100000
MailProg=/bin/true
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=tq Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    cat > "$dir/env" <<EOF
export SLURM_CONF=$dir/slurm.conf
EOF

    # a guard: when the watched process ends without a teardown, it tears down
    # (a zombie is dead: its parent may be slow to reap it)
    setsid bash -c 'while grep -qs "^State:[[:space:]]*[^Z[:space:]]" "/proc/$1/status"; do sleep 0.5; done
                    exec "$3" down "$2"' guard "$watch" "$dir" "$here/$me" \
        </dev/null >>"$dir/log/guard.log" 2>&1 3>&- &
    echo $! > "$dir/run/guard.pid"
    # from here on, a failure tears down what started
    trap 'down "$dir" >/dev/null 2>&1' EXIT

    # munged -F stays in the foreground: we hold its pid. --force: munged
    # refuses a socket that other users cannot reach (a folder of mode 700,
    # as mktemp makes them, on the way); our jobs all run as root
    TQ_CLUSTER=$dir setsid munged -F --force --socket="$dir/munge/munge.socket" \
        --key-file="$dir/munge/munge.key" --pid-file="$dir/run/munged.pid.own" \
        --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" \
        </dev/null >>"$dir/log/munged.out" 2>&1 3>&- &
    echo $! > "$dir/run/munged.pid"
    for _ in $(seq 50); do
        [ -S "$dir/munge/munge.socket" ] && break
        kill -0 "$(cat "$dir/run/munged.pid")" 2>/dev/null || break
        sleep 0.1
    done
    [ -S "$dir/munge/munge.socket" ] ||
        die_skip "munged did not start: $(why "$dir/log/munged.log" "$dir/log/munged.out")"
    munge -n --socket="$dir/munge/munge.socket" | unmunge --socket="$dir/munge/munge.socket" >/dev/null 2>&1 ||
        die_skip "munged does not answer on $dir/munge/munge.socket"

    export SLURM_CONF=$dir/slurm.conf
    TQ_CLUSTER=$dir setsid slurmctld -D -i </dev/null >>"$dir/log/slurmctld.out" 2>&1 3>&- &
    echo $! > "$dir/run/slurmctld.pid"
    TQ_CLUSTER=$dir setsid slurmd -D -N "$host" </dev/null >>"$dir/log/slurmd.out" 2>&1 3>&- &
    echo $! > "$dir/run/slurmd.pid"

    local state=
    for _ in $(seq 150); do
        state=$(sinfo -h -n "$host" -o %T 2>/dev/null)
        [ "$state" = idle ] && break
        for c in slurmctld slurmd; do
            kill -0 "$(cat "$dir/run/$c.pid")" 2>/dev/null ||
                die_skip "$c stopped at start: $(why "$dir/log/$c.log" "$dir/log/$c.out")"
        done
        sleep 0.1
    done
    [ "$state" = idle ] ||
        die_skip "the node is \"${state:-unknown}\", not idle, after 15 s: $(scontrol show node "$host" 2>&1 | grep -o 'Reason=.*') $(why "$dir/log/slurmd.log")"
    trap - EXIT
    return 0
}

case "${1:-}" in
up)   [ $# -ge 2 ] || { echo "usage: $me up DIR [WATCH_PID]" >&2; exit 2; }
      up "$2" "${3:-$PPID}" ;;
down) [ $# -eq 2 ] || { echo "usage: $me down DIR" >&2; exit 2; }
      down "$(cd "$2" 2>/dev/null && pwd || echo "$2")" ;;
ours) [ $# -eq 2 ] || { echo "usage: $me ours DIR" >&2; exit 2; }
      ours "$(cd "$2" 2>/dev/null && pwd || echo "$2")" ;;
run)  shift
      [ $# -ge 1 ] || { echo "usage: $me run CMD [ARG]..." >&2; exit 2; }
      d=$(mktemp -d "${TMPDIR:-/tmp}/tq-cluster.XXXXXX") || exit 73
      trap 'down "$d"; rm -rf "$d"' EXIT
      trap 'exit 130' INT TERM
      ( up "$d" $$ ) || exit $?
      SLURM_CONF=$d/slurm.conf TQ_CLUSTER_DIR=$d "$@"
      ;;
*)    echo "usage: $me up DIR [WATCH_PID] | down DIR | ours DIR | run CMD [ARG]..." >&2; exit 2 ;;
esac
