#!/usr/bin/env bash
# Barrier latency and broadcast throughput (64-byte messages) over simulated
# hosts: gossamer::objects (the objects_bench example, one process of one
# worker thread per host, UCX over TCP between hosts) beside Open MPI's
# MPI_Barrier and MPI_Ibcast (scripts/mpi/objects.c, one rank per host,
# TCP between ranks), run in turn within each repetition. Open MPI is
# started by mpirun inside host 0, which reaches the other hosts through an
# rsh agent that enters their namespaces, and is held to its TCP transport
# (`--mca btl tcp,self`): separate hosts share no memory. Prints
#
#   hosts,mpi_barrier_us,gsm_barrier_us,barrier_ratio,mpi_bcast_msgs_s,gsm_bcast_msgs_s,bcast_ratio
#
# with medians over the repetitions of each program's own median
# (barrier_ratio = gossamer / MPI time: above 1 is slower; bcast_ratio =
# gossamer / MPI throughput: above 1 is faster). Needs root, iproute2, UCX
# (libucx0), and Open MPI (openmpi-bin, libopenmpi-dev).
set -euo pipefail

prog=${0##*/}
root=$(cd "$(dirname "$0")/.." && pwd)
netns="$root/scripts/rack-netns.sh"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/gossamer/mpi-objects"

hosts_list="2 4"
rounds=500
messages=5000
inner_reps=3
reps=3
limit=300

usage() {
    cat <<EOF
usage: $prog [-H "H1 H2 ..."] [-b ROUNDS] [-m MESSAGES] [-r REPS] [-T SECONDS]

  -H LIST     host counts (default: "$hosts_list")
  -b ROUNDS   barriers per timed repetition (default: $rounds)
  -m MESSAGES broadcast messages per timed repetition (default: $messages)
  -r REPS     runs of each program per host count (default: $reps)
  -T SECONDS  time limit of one run (default: $limit)

Every namespace, process and shared-memory segment it makes is removed
when it exits, however it exits.
EOF
}

# shellcheck source-path=SCRIPTDIR source=lib/sim-hosts.sh
. "$root/scripts/lib/sim-hosts.sh"

while getopts "H:b:m:r:T:h" o; do
    case $o in
    H) hosts_list=$OPTARG ;;
    b) rounds=$OPTARG ;;
    m) messages=$OPTARG ;;
    r) reps=$OPTARG ;;
    T) limit=$OPTARG ;;
    h)
        usage
        exit 0
        ;;
    *)
        usage >&2
        exit 2
        ;;
    esac
done
for v in "$rounds" "$messages" "$reps" "$limit"; do
    is_uint "$v" || die "bad number '$v' (see $prog -h)"
done
read -r -a hosts_arr <<<"$hosts_list"
[ ${#hosts_arr[@]} -gt 0 ] || die "no host counts given"
max_hosts=2
for h in "${hosts_arr[@]}"; do
    { is_uint "$h" && [ "$h" -ge 2 ] && [ "$h" -le 254 ]; } || die "bad host count '$h' (2..254)"
    [ "$h" -le "$max_hosts" ] || max_hosts=$h
done
sim_hosts_check
command -v mpicc >/dev/null || die "mpicc is missing (apt-get install -y libopenmpi-dev)"
command -v mpirun >/dev/null || die "mpirun is missing (apt-get install -y openmpi-bin)"

sim_hosts_setup objects

# ---- build --------------------------------------------------------------------

mkdir -p "$cache"
mpicc -O2 -o "$cache/objects" "$root/scripts/mpi/objects.c"
echo "$prog: building the objects_bench example (release)" >&2
(cd "$root" && cargo build --release -q -p gossamer --example objects_bench >&2)
gsm="${CARGO_TARGET_DIR:-$root/target}/release/examples/objects_bench"
[[ $gsm == /* ]] || gsm="$root/$gsm"
[ -x "$gsm" ] || die "no executable at $gsm after the build"

# The rsh agent mpirun calls as "AGENT HOST COMMAND...": runs COMMAND in the
# simulated host whose address is HOST (host I has address 10.231.X.(I+1)).
agent="$work/netns-agent"
cat >"$agent" <<EOF
#!/bin/sh
host=\$1
shift
exec "$netns" exec "$tag" \$((\${host##*.} - 1)) sh -c "\$*"
EOF
chmod +x "$agent"

rack_up=1
"$netns" up "$tag" "$max_hosts" >"$work/rack"
addr() { awk -v h="h$1" '$1 == h { print $3 }' "$work/rack"; }
port=41000

# The program's secret: every rank proves it knows it at the rendezvous.
# A fresh one for this script's programs, passed in the environment (never
# on a command line, where other users could read it).
GOSSAMER_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
export GOSSAMER_SECRET
unset GOSSAMER_SECRET_FILE

clear_env=(env -u GOSSAMER_PROCESSES -u GOSSAMER_RANK -u GOSSAMER_SIZE -u GOSSAMER_RENDEZVOUS
    -u SLURM_PROCID -u SLURM_NTASKS -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE GOSSAMER_THREADS=1)

value() { sed -n "s/^$1 \([0-9.]*\)$/\1/p" "$2" | head -n1; }

# Open MPI over $1 hosts, one rank each.
run_mpi() {
    local h=$1 hostlist="" i p
    for ((i = 0; i < h; i++)); do
        hostlist+="${hostlist:+,}$(addr "$i"):1"
    done
    rm -f "$work"/run.*
    timeout -k 5 "$limit" "$netns" exec "$tag" 0 mpirun --allow-run-as-root --oversubscribe -np "$h" \
        --host "$hostlist" --mca plm_rsh_agent "$agent" --mca btl tcp,self \
        --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
        "$cache/objects" "$rounds" "$messages" "$inner_reps" >"$work/run.mpi" 2>&1 &
    p=$!
    pids+=("$p")
    reap "$p"
    [ "$status" -eq 0 ] || failed "Open MPI over $h hosts ($(status_text "$status"))"
}

# Ours over $1 hosts, one process of one thread each; rank r on host r.
run_gsm() {
    local h=$1 r p rendezvous
    local -a ranks=()
    rm -f "$work"/run.* "$work"/pid.*
    port=$((port + 1))
    rendezvous="$(addr 0):$port"
    for ((r = h - 1; r >= 0; r--)); do
        # shellcheck disable=SC2016 # expanded by the inner shell
        timeout -k 5 "$limit" "$netns" exec "$tag" "$r" "${clear_env[@]}" \
            GOSSAMER_RANK="$r" GOSSAMER_SIZE="$h" GOSSAMER_RENDEZVOUS="$rendezvous" \
            sh -c 'echo $$ >"$0"; exec "$@"' "$work/pid.$r" "$gsm" "$rounds" "$messages" "$inner_reps" \
            >"$work/run.rank$r" 2>&1 &
        p=$!
        pids+=("$p")
        ranks[r]=$p
    done
    for ((r = 0; r < 100; r++)); do
        [ -s "$work/pid.0" ] && break
        sleep 0.02
    done
    [ -s "$work/pid.0" ] && leaders+=("$(cat "$work/pid.0")")
    for ((r = 0; r < h; r++)); do
        reap "${ranks[r]}"
        [ "$status" -eq 0 ] || failed "rank $r of gossamer over $h hosts ($(status_text "$status"))"
    done
}

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
echo "$prog: $(nproc) cores (${cpu:-unknown CPU}), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "$prog: $rounds barriers and $messages messages per repetition, $reps runs per host count" >&2
echo "hosts,mpi_barrier_us,gsm_barrier_us,barrier_ratio,mpi_bcast_msgs_s,gsm_bcast_msgs_s,bcast_ratio"
for h in "${hosts_arr[@]}"; do
    mb="" gb="" mc="" gc=""
    for ((rep = 1; rep <= reps; rep++)); do
        run_mpi "$h"
        mb+=" $(value barrier_us_median "$work/run.mpi")"
        mc+=" $(value bcast_msgs_per_s_median "$work/run.mpi")"
        run_gsm "$h"
        gb+=" $(value barrier_us_median "$work/run.rank0")"
        gc+=" $(value bcast_msgs_per_s_median "$work/run.rank0")"
        echo "$prog: $h hosts, run $rep/$reps done" >&2
    done
    echo "# H=$h runs: mpi barrier$mb; gossamer barrier$gb; mpi bcast$mc; gossamer bcast$gc"
    mbm=$(median <<<"${mb# }")
    gbm=$(median <<<"${gb# }")
    mcm=$(median <<<"${mc# }")
    gcm=$(median <<<"${gc# }")
    echo "$h,$mbm,$gbm,$(awk -v a="$gbm" -v b="$mbm" 'BEGIN { printf "%.2f", a / b }'),$mcm,$gcm,$(awk -v a="$gcm" -v b="$mcm" 'BEGIN { printf "%.2f", a / b }')"
done
