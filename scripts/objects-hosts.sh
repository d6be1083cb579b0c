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
sim_hosts_counts "$hosts_list" 2
sim_hosts_check
command -v mpicc >/dev/null || die "mpicc is missing (apt-get install -y libopenmpi-dev)"
command -v mpirun >/dev/null || die "mpirun is missing (apt-get install -y openmpi-bin)"

sim_hosts_setup objects

# ---- build --------------------------------------------------------------------

mkdir -p "$cache"
mpicc -O2 -o "$cache/objects" "$root/scripts/mpi/objects.c"
sim_hosts_build examples/objects_bench -p gossamer --example objects_bench

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

sim_hosts_rack "$max_hosts"
clear_env+=(GOSSAMER_THREADS=1)

value() { sed -n "s/^$1 \([0-9.]*\)$/\1/p" "$2" | head -n1; }

# Open MPI over $1 hosts, one rank each.
run_mpi() {
    local h=$1 hostlist="" i p
    for ((i = 0; i < h; i++)); do
        hostlist+="${hostlist:+,}${addr[i]}:1"
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
    sim_hosts_launch "$1" 1 "$exe" "$rounds" "$messages" "$inner_reps"
    sim_hosts_wait "gossamer over $1 hosts"
}

sim_hosts_machine
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
