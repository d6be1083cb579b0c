#!/usr/bin/env bash
# YCSB workloads C and D over simulated hosts: gossamer-kv as one program
# with one process per host (network namespaces joined by a bridge, UCX over
# TCP between hosts) against one memcached server per host, reached with
# client-side ketama hashing. The client runs in host h0 and talks to every
# host over the bridge. Runs alternate between the two; prints the medians
# and writes a CSV and a plot. Needs root, iproute2, UCX and memcached.
set -euo pipefail

prog=${0##*/}
root=$(cd "$(dirname "$0")/.." && pwd)
netns="$root/scripts/rack-netns.sh"

hosts=2
threads=1
reps=3
records=20000
duration=2
limit=300
out="$root/results/kv-hosts.csv"
plot="$root/results/kv-hosts.png"

usage() {
    cat <<EOF
usage: $prog [-H HOSTS] [-t THREADS] [-r REPS] [-n RECORDS] [-d SECONDS]
                  [-T SECONDS] [-o FILE] [-p PNG]

Runs YCSB C and D (gossamer-kv-load ycsb, every read verified) against
gossamer-kv as one program of HOSTS processes, one per simulated host, and
against HOSTS memcached servers, one per host, REPS times each, alternating.
Appends one row per run to FILE (the columns of 'gossamer-kv-load ycsb --csv'),
then prints the medians and draws them into PNG.

  -H HOSTS      simulated hosts (default: $hosts)
  -t THREADS    threads of each server process (default: $threads)
  -r REPS       runs of each server and workload (default: $reps)
  -n RECORDS    YCSB records (default: $records)
  -d SECONDS    length of each run phase (default: $duration)
  -T SECONDS    limit on each process (default: $limit)
  -o FILE       the CSV (default: results/kv-hosts.csv; appended to)
  -p PNG        the plot (default: results/kv-hosts.png)
  -h            this help

Builds gossamer-kv first (cargo build --release -p gossamer-kv). Every
namespace and process it makes is removed when it exits, however it exits.
On a machine with few cores every host shares them: say so beside figures.
EOF
}

# shellcheck source-path=SCRIPTDIR source=lib/sim-hosts.sh
. "$root/scripts/lib/sim-hosts.sh"

while getopts "H:t:r:n:d:T:o:p:h" opt; do
    case $opt in
    H) hosts=$OPTARG ;;
    t) threads=$OPTARG ;;
    r) reps=$OPTARG ;;
    n) records=$OPTARG ;;
    d) duration=$OPTARG ;;
    T) limit=$OPTARG ;;
    o) out=$OPTARG ;;
    p) plot=$OPTARG ;;
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
shift $((OPTIND - 1))
[ $# -eq 0 ] || {
    usage >&2
    exit 2
}
for v in "$hosts" "$threads" "$reps" "$records" "$duration" "$limit"; do
    is_uint "$v" || die "bad number '$v' (see $prog -h)"
done
[ "$hosts" -le 254 ] || die "at most 254 hosts"
command -v memcached >/dev/null 2>&1 || die "memcached is missing (apt-get install memcached)"
sim_hosts_check

sim_hosts_setup kv

echo "$prog: building gossamer-kv (release)" >&2
(cd "$root" && cargo build --release -q -p gossamer-kv >&2)
bin="${CARGO_TARGET_DIR:-$root/target}/release"
[[ $bin == /* ]] || bin="$root/$bin"
kv="$bin/gossamer-kv"
load="$bin/gossamer-kv-load"

rack_up=1
"$netns" up "$tag" "$hosts" >"$work/rack"
addr=()
for ((h = 0; h < hosts; h++)); do
    a=$(awk -v h="h$h" '$1 == h { print $3 }' "$work/rack")
    [ -n "$a" ] || die "the rack did not report host h$h's address"
    addr+=("$a")
done
# The program's secret: every rank proves it knows it at the rendezvous.
# A fresh one for this script's programs, passed in the environment (never
# on a command line, where other users could read it).
GOSSAMER_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
export GOSSAMER_SECRET
unset GOSSAMER_SECRET_FILE

clear_env=(env -u GOSSAMER_PROCESSES -u GOSSAMER_RANK -u GOSSAMER_SIZE -u GOSSAMER_RENDEZVOUS
    -u SLURM_PROCID -u SLURM_NTASKS -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE)
ycsb=(ycsb --records "$records" --duration "$duration" --threads 2 --conns 4 --depth 8 --csv "$out")
mkdir -p "$(dirname "$out")"
port=40000

# Waits until host h0 can connect to $1:$2.
reachable() {
    local i
    for ((i = 0; i < 300; i++)); do
        if "$netns" exec "$tag" 0 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# Runs the YCSB client in host h0; the arguments after the first go to ycsb.
client() {
    local what=$1 p
    shift
    timeout -k 5 "$limit" "$netns" exec "$tag" 0 "$load" "${ycsb[@]}" "$@" >"$work/run.client" 2>&1 &
    p=$!
    pids+=("$p")
    reap "$p"
    [ "$status" -eq 0 ] || failed "YCSB against $what ($(status_text "$status"))"
    grep ' ops/s ' "$work/run.client" >&2
}

# Stops the background servers $@ with SIGTERM and waits for them.
stop() {
    local p
    for p in "$@"; do
        kill -s TERM "$p" 2>/dev/null || true
    done
    for p in "$@"; do
        reap "$p"
    done
}

run_gossamer() {
    local w=$1 r p servers=() ranks=()
    rm -f "$work"/run.*
    port=$((port + 1))
    for ((r = hosts - 1; r >= 0; r--)); do
        timeout -k 5 "$limit" "$netns" exec "$tag" "$r" "${clear_env[@]}" \
            GOSSAMER_RANK="$r" GOSSAMER_SIZE="$hosts" GOSSAMER_RENDEZVOUS="${addr[0]}:$port" \
            GOSSAMER_SILENCE_MS=6000 "$kv" -t "$threads" -m 1024 -p 11311 -l "${addr[r]}" \
            >"$work/run.rank$r" 2>&1 &
        p=$!
        pids+=("$p")
        ranks+=("$p")
    done
    for ((r = 0; r < hosts; r++)); do
        reachable "${addr[r]}" $((11311 + r)) || failed "gossamer-kv rank $r (not listening)"
        servers+=(--server "${addr[r]}:$((11311 + r))")
    done
    client "gossamer-kv over $hosts hosts" --workload "$w" --label gossamer-kv --route any "${servers[@]}"
    stop "${ranks[@]}"
}

run_memcached() {
    local w=$1 r p servers=() mcs=()
    rm -f "$work"/run.*
    for ((r = 0; r < hosts; r++)); do
        timeout -k 5 "$limit" "$netns" exec "$tag" "$r" memcached -u root -U 0 -t "$threads" -m 1024 \
            -l "${addr[r]}" -p 11411 >"$work/run.memcached$r" 2>&1 &
        p=$!
        pids+=("$p")
        mcs+=("$p")
    done
    for ((r = 0; r < hosts; r++)); do
        reachable "${addr[r]}" 11411 || failed "memcached on h$r (not listening)"
        servers+=(--server "${addr[r]}:11411")
    done
    client "$hosts memcached servers" --workload "$w" --label memcached --route ketama "${servers[@]}"
    stop "${mcs[@]}"
}

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
echo "$prog: $(nproc) cores (${cpu:-unknown CPU}) shared by $hosts simulated hosts; $threads thread(s) per server" >&2
for ((i = 1; i <= reps; i++)); do
    for w in c d; do
        echo "$prog: run $i/$reps, workload $w" >&2
        run_gossamer "$w"
        run_memcached "$w"
    done
done
"$load" ycsb-report --csv "$out" --baseline memcached --plot "$plot" \
    --title "YCSB C and D over $hosts simulated hosts ($(nproc) cores)"
