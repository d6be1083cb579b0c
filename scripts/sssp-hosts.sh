#!/usr/bin/env bash
# gossamer-sssp (sssp/) over simulated hosts: first the program in ONE
# process (no namespace, no fabric), then, for each host count H, the same
# thread count over H hosts x P processes per host (network namespaces joined
# by a bridge, UCX over TCP between hosts, shared memory within a host).
# Prints a CSV and writes it to results/sssp-hosts.csv. Needs root, iproute2
# and UCX (libucx0).
set -euo pipefail

prog=${0##*/}
root=$(cd "$(dirname "$0")/.." && pwd)

hosts_list="1 2"
per_host=1
threads=2
scale=16
edgefactor=16
roots=8
limit=600
out="$root/results/sssp-hosts.csv"

usage() {
    cat <<EOF
usage: $prog [-H "H1 H2 ..."] [-p P] [-t THREADS] [-s SCALE] [-e EDGEFACTOR]
                     [-r ROOTS] [-T SECONDS] [-o FILE]

Runs gossamer-sssp (single-source shortest paths on a Kronecker graph) in one
process, then over H simulated hosts x P processes per host for each H in the
list, all with the same total thread count, and prints

  hosts,processes,threads,scale,edgefactor,median_s,median_teps,bridge_bytes

(processes: all processes of the program; threads: all worker threads;
median_s, median_teps: gossamer's median over the roots, from its result line;
bridge_bytes: bytes the hosts sent into the simulated fabric during the run).
The first row is the program in one process, outside any namespace; its
bridge_bytes is "local". The CSV also goes to FILE.

  -H LIST       host counts, separated by spaces (default: "$hosts_list")
  -p P          processes per host (default: $per_host)
  -t THREADS    worker threads of the whole program, a multiple of H x P for
                every H (default: $threads)
  -s SCALE      log2 of the number of vertices (default: $scale)
  -e EDGEFACTOR edges per vertex (default: $edgefactor)
  -r ROOTS      roots searched from in each run (default: $roots)
  -T SECONDS    limit on each process of a run, start-up included (default: $limit)
  -o FILE       where to write the CSV (default: results/sssp-hosts.csv)
  -h            this help

Builds gossamer-sssp first (cargo build --release -p gossamer-sssp). Each run
is 'gossamer-sssp run --scale SCALE --edgefactor EDGEFACTOR --roots ROOTS
--threads THREADS --baselines none --quiet', which validates every search.
The environment passes through to every process (e.g. GOSSAMER_SILENCE_MS=10000
for oversubscribed cores). Needs root (network namespaces), iproute2 and UCX;
every namespace, process and shared-memory segment it makes is removed when
it exits, however it exits.
EOF
}

# shellcheck source-path=SCRIPTDIR source=lib/sim-hosts.sh
. "$root/scripts/lib/sim-hosts.sh"

while getopts "H:p:t:s:e:r:T:o:h" opt; do
    case $opt in
    H) hosts_list=$OPTARG ;;
    p) per_host=$OPTARG ;;
    t) threads=$OPTARG ;;
    s) scale=$OPTARG ;;
    e) edgefactor=$OPTARG ;;
    r) roots=$OPTARG ;;
    T) limit=$OPTARG ;;
    o) out=$OPTARG ;;
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

for v in "$per_host" "$threads" "$scale" "$edgefactor" "$roots" "$limit"; do
    is_uint "$v" || die "bad number '$v' (see $prog -h)"
done
sim_hosts_counts "$hosts_list" 1 "$per_host" "$threads"
sim_hosts_check
sim_hosts_setup sssp
sim_hosts_build gossamer-sssp -p gossamer-sssp
sim_hosts_rack "$max_hosts"

# The same arguments for every rank (--threads is the whole program's).
args=(run --scale "$scale" --edgefactor "$edgefactor" --roots "$roots" --threads "$threads"
    --baselines none --quiet)

# Checks rank 0's output ($1) against $2 processes on $3 hosts; sets
# $median_s and $median_teps from its gossamer result line, or returns 1 and
# sets $why.
median_s=
median_teps=
why=
read_result() {
    local file=$1 processes=$2 hosts=$3 line want pword hword
    median_s='' median_teps='' why=''
    pword=processes hword=hosts
    [ "$processes" -ne 1 ] || pword=process
    [ "$hosts" -ne 1 ] || hword=host
    want="$threads threads in $processes $pword on $hosts $hword"
    if ! line=$(grep -m1 '^gossamer-sssp: .* threads in ' "$file"); then
        why="no 'gossamer-sssp: ... threads in ...' line from rank 0"
        return 1
    fi
    if [[ $line != *"; $want" ]]; then
        why="rank 0 says '${line#*; }', expected '$want'"
        return 1
    fi
    if ! line=$(grep '^result,gossamer,' "$file" | tail -n1); then
        why="no result,gossamer, line from rank 0"
        return 1
    fi
    local -a f
    IFS=, read -r -a f <<<"$line"
    if [ "${#f[@]}" -ne 8 ] || [ "${f[2]}" != "$processes" ] || [ "${f[3]}" != "$threads" ] ||
        [ "${f[4]}" != "$scale" ] || [ "${f[5]}" != "$edgefactor" ]; then
        why="unexpected result line '$line'"
        return 1
    fi
    median_s=${f[6]} median_teps=${f[7]}
}

# One run of the program in one process (no namespace, no fabric).
run_single() {
    sim_hosts_single "$exe" "${args[@]}" --processes 1
    read_result "$work/run.rank0" 1 1 || failed "the one-process run ($why)"
}

# One run over $1 hosts x $per_host processes. Sets $bytes to what the
# hosts sent into the bridge.
bytes=0
run_hosts() {
    local h=$1 n=$(($1 * per_host)) before after what="$1 hosts x $per_host processes"
    before=$(bridge_bytes "$h")
    sim_hosts_launch "$n" "$per_host" "$exe" "${args[@]}"
    sim_hosts_wait "$what"
    after=$(bridge_bytes "$h")
    bytes=$((after - before))
    read_result "$work/run.rank0" "$n" "$h" || failed "$what ($why)"
    if [ "$h" -gt 1 ] && [ "$bytes" -eq 0 ]; then
        failed "$what (nothing went through the bridge: the hosts did not talk over the fabric)"
    fi
}

# Seconds since $1 (an $EPOCHREALTIME), to a tenth.
since() {
    awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'
}

# ---- the runs --------------------------------------------------------------------

sim_hosts_machine
echo "$prog: scale $scale, edge factor $edgefactor, $roots roots, $threads threads," \
    "hosts: ${hosts_arr[*]} x $per_host processes" >&2

csv="hosts,processes,threads,scale,edgefactor,median_s,median_teps,bridge_bytes"
echo "$prog: one process..." >&2
start=$EPOCHREALTIME
run_single
echo "$prog:   median $median_s s per root, $median_teps TEPS ($(since "$start") s)" >&2
csv+=$'\n'"1,1,$threads,$scale,$edgefactor,$median_s,$median_teps,local"
for h in "${hosts_arr[@]}"; do
    echo "$prog: $h hosts x $per_host processes..." >&2
    start=$EPOCHREALTIME
    run_hosts "$h"
    echo "$prog:   median $median_s s per root, $median_teps TEPS; $bytes bytes through the bridge" \
        "($(since "$start") s)" >&2
    csv+=$'\n'"$h,$((h * per_host)),$threads,$scale,$edgefactor,$median_s,$median_teps,$bytes"
done

mkdir -p "$(dirname "$out")"
printf '%s\n' "$csv" >"$out"
printf '%s\n' "$csv"
echo "$prog: wrote $out (load average now $(cut -d' ' -f1-3 /proc/loadavg))" >&2
