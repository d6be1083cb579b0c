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

sim_hosts_build gossamer-kv -p gossamer-kv
kv=$exe
load="$release/gossamer-kv-load"
sim_hosts_rack "$hosts"
clear_env+=(GOSSAMER_SILENCE_MS=6000)
ycsb=(ycsb --records "$records" --duration "$duration" --threads 2 --conns 4 --depth 8 --csv "$out")
mkdir -p "$(dirname "$out")"

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

# gossamer-kv as one program of one process per host; rank r listens on
# its host's address at port 11311 + r.
run_gossamer() {
    local w=$1 r servers=()
    sim_hosts_launch "$hosts" 1 "$kv" -t "$threads" -m 1024 -p 11311 -l @ADDR@
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

sim_hosts_machine
echo "$prog: the cores are shared by $hosts simulated hosts; $threads thread(s) per server" >&2
for ((i = 1; i <= reps; i++)); do
    for w in c d; do
        echo "$prog: run $i/$reps, workload $w" >&2
        run_gossamer "$w"
        run_memcached "$w"
    done
done
"$load" ycsb-report --csv "$out" --baseline memcached --plot "$plot" \
    --title "YCSB C and D over $hosts simulated hosts ($(nproc) cores)"
