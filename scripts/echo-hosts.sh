#!/usr/bin/env bash
# The echo benchmark (gossamer/examples/echo.rs) over simulated hosts: for
# each host count H, one program of H hosts x P processes per host (network
# namespaces joined by a bridge, UCX over TCP between hosts, shared memory
# within a host), beside the same total thread count in ONE process, run in
# turn within each repetition so that the ratios compare runs taken side by
# side. Prints a CSV and writes it to results/echo-hosts.csv. Needs root,
# iproute2 and UCX (libucx0).
set -euo pipefail

prog=${0##*/}
root=$(cd "$(dirname "$0")/.." && pwd)

hosts_list="1 2 4 8"
per_host=1
threads=8
size=64
millis=600
reps=3
limit=120
out="$root/results/echo-hosts.csv"

usage() {
    cat <<EOF
usage: $prog [-H "H1 H2 ..."] [-p P] [-t THREADS] [-s BYTES] [-m MILLIS]
                    [-r REPS] [-T SECONDS] [-o FILE]

Runs the echo benchmark over H simulated hosts x P processes per host, for
each H in the list, and the same thread count in one process, R times each
(every repetition runs all configurations in turn), and prints

  hosts,processes,threads,size,mops_median,mops_run1,...,mops_runR

(processes: all processes of the program; threads: all worker threads; the
first row is the program in one process). The CSV also goes to FILE.

  -H LIST     host counts, separated by spaces (default: "$hosts_list")
  -p P        processes per host (default: $per_host)
  -t THREADS  worker threads of the whole program, a multiple of H x P for
              every H (default: $threads)
  -s BYTES    request size (ECHO_SIZE, default: $size)
  -m MILLIS   length of each run (ECHO_MILLIS, default: $millis)
  -r REPS     repetitions; the figure is their median (default: $reps)
  -T SECONDS  limit on each process of a run, start-up included (default: $limit)
  -o FILE     where to write the CSV (default: results/echo-hosts.csv)

Builds the example first (cargo build --release --example echo). Needs root
(network namespaces), iproute2 and UCX; every namespace, process and
shared-memory segment it makes is removed when it exits, however it exits.
EOF
}

# shellcheck source-path=SCRIPTDIR source=lib/sim-hosts.sh
. "$root/scripts/lib/sim-hosts.sh"

while getopts "H:p:t:s:m:r:T:o:h" opt; do
    case $opt in
    H) hosts_list=$OPTARG ;;
    p) per_host=$OPTARG ;;
    t) threads=$OPTARG ;;
    s) size=$OPTARG ;;
    m) millis=$OPTARG ;;
    r) reps=$OPTARG ;;
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

for v in "$per_host" "$threads" "$size" "$millis" "$reps" "$limit"; do
    is_uint "$v" || die "bad number '$v' (see $prog -h)"
done
sim_hosts_counts "$hosts_list" 1 "$per_host" "$threads"
sim_hosts_check
sim_hosts_setup echo
sim_hosts_build examples/echo --example echo
sim_hosts_rack "$max_hosts"
clear_env+=(ECHO_THREADS="$threads" ECHO_SIZE="$size" ECHO_MILLIS="$millis")

# Sets $mops to the figure of rank 0's ECHO line, checked against the
# expected process count.
mops=
read_mops() {
    local file=$1 processes=$2 line
    mops=
    line=$(grep -m1 '^ECHO ' "$file") || return 1
    grep -q " processes=$processes " <<<"$line" || return 1
    mops=$(sed -n 's/.* mops=\([0-9.]*\).*/\1/p' <<<"$line")
    [ -n "$mops" ]
}

# One run of the program in one process (no namespace, no fabric).
run_single() {
    sim_hosts_single "$exe"
    read_mops "$work/run.rank0" 1 || failed "the one-process run (no ECHO line)"
}

# One run over $1 hosts x $per_host processes.
run_hosts() {
    local h=$1 n=$(($1 * per_host)) before after what="$1 hosts x $per_host processes"
    before=$(bridge_bytes "$h")
    sim_hosts_launch "$n" "$per_host" "$exe"
    sim_hosts_wait "$what"
    after=$(bridge_bytes "$h")
    echo "$prog:   bytes through the bridge: $((after - before))" >&2
    read_mops "$work/run.rank0" "$n" || failed "$what (no ECHO line with processes=$n)"
}

# ---- the runs --------------------------------------------------------------------

# Configurations: "hosts processes"; the first is the single process.
configs=("1 1")
for h in "${hosts_arr[@]}"; do
    [ "$h" -eq 1 ] && [ "$per_host" -eq 1 ] && continue # that is the single process
    configs+=("$h $((h * per_host))")
done
declare -A runs=()
sim_hosts_machine
echo "$prog: $threads threads, $size-byte requests, $millis ms per run, $reps repetitions," \
    "hosts: ${hosts_arr[*]} x $per_host processes" >&2
for ((rep = 1; rep <= reps; rep++)); do
    for c in "${configs[@]}"; do
        read -r h n <<<"$c"
        if [ "$n" -eq 1 ]; then
            run_single
            echo "$prog: run $rep/$reps, one process: $mops Mops/s" >&2
        else
            echo "$prog: run $rep/$reps, $h hosts x $per_host processes..." >&2
            run_hosts "$h"
            echo "$prog:   $mops Mops/s" >&2
        fi
        runs[$c]="${runs[$c]:-}${runs[$c]:+ }$mops"
    done
done

header="hosts,processes,threads,size,mops_median"
for ((rep = 1; rep <= reps; rep++)); do
    header+=",mops_run$rep"
done
csv=$header
base=
for c in "${configs[@]}"; do
    read -r h n <<<"$c"
    med=$(median <<<"${runs[$c]}")
    [ -n "$base" ] || base=$med
    csv+=$'\n'"$h,$n,$threads,$size,$med,${runs[$c]// /,}"
    echo "$prog: $h hosts, $n processes: median $med Mops/s, $(awk -v a="$med" -v b="$base" 'BEGIN { printf "%.3f", a / b }') of one process" >&2
done
mkdir -p "$(dirname "$out")"
printf '%s\n' "$csv" >"$out"
printf '%s\n' "$csv"
echo "$prog: wrote $out (load average now $(cut -d' ' -f1-3 /proc/loadavg))" >&2
