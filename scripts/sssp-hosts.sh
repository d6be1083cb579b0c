#!/usr/bin/env bash
# gossamer-sssp (sssp/) over simulated hosts: first the program in ONE
# process (no namespace, no fabric), then, for each host count H, the same
# thread count over H hosts x P processes per host (network namespaces joined
# by a bridge, UCX over TCP between hosts, shared memory within a host).
# Prints a CSV and writes it to results/sssp-hosts.csv. Needs root, iproute2
# and UCX (libucx0). Modelled on echo-hosts.sh.
set -euo pipefail

prog=${0##*/}
root=$(cd "$(dirname "$0")/.." && pwd)
netns="$root/scripts/rack-netns.sh"

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
read -r -a hosts_arr <<<"$hosts_list"
[ ${#hosts_arr[@]} -gt 0 ] || die "no host counts given"
max_hosts=1
for h in "${hosts_arr[@]}"; do
    if ! is_uint "$h" || [ "$h" -gt 254 ]; then
        die "bad host count '$h' (1..254)"
    fi
    ranks=$((h * per_host))
    [ $((threads % ranks)) -eq 0 ] ||
        die "$threads threads do not spread evenly over $h hosts x $per_host processes; pick -t as a multiple of $ranks"
    if [ "$h" -gt "$max_hosts" ]; then
        max_hosts=$h
    fi
done
sim_hosts_check

# ---- clean-up, on any exit ---------------------------------------------------

sim_hosts_setup sssp

# ---- build and rack ------------------------------------------------------------

echo "$prog: building gossamer-sssp (release)" >&2
(cd "$root" && cargo build --release -p gossamer-sssp >&2)
exe="${CARGO_TARGET_DIR:-$root/target}/release/gossamer-sssp"
[[ $exe == /* ]] || exe="$root/$exe"
[ -x "$exe" ] || die "no executable at $exe after the build"

rack_up=1
"$netns" up "$tag" "$max_hosts" >"$work/rack"
addr0=$(awk '$1 == "h0" { print $3 }' "$work/rack")
[ -n "$addr0" ] || die "the rack did not report host h0's address"
port=40000

# The program's secret: every rank proves it knows it at the rendezvous.
# A fresh one for this script's programs, passed in the environment (never
# on a command line, where other users could read it).
GOSSAMER_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
export GOSSAMER_SECRET
unset GOSSAMER_SECRET_FILE

# Launcher variables that would make a process join another program.
clear_env=(env -u GOSSAMER_PROCESSES -u GOSSAMER_RANK -u GOSSAMER_SIZE -u GOSSAMER_RENDEZVOUS
    -u SLURM_PROCID -u SLURM_NTASKS -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE)
# The same arguments for every rank (--threads is the whole program's).
args=(run --scale "$scale" --edgefactor "$edgefactor" --roots "$roots" --threads "$threads"
    --baselines none --quiet)

# Records rank 0's pid (written by its wrapper) as a namer of segments.
note_leader() {
    local i
    for ((i = 0; i < 100; i++)); do
        [ -s "$work/pid.0" ] && break
        sleep 0.02
    done
    if [ -s "$work/pid.0" ]; then
        leaders+=("$(cat "$work/pid.0")")
    fi
}

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
    local p
    rm -f "$work"/run.* "$work"/pid.*
    # shellcheck disable=SC2016 # expanded by the inner shell
    timeout -k 5 "$limit" "${clear_env[@]}" \
        sh -c 'echo $$ >"$0"; exec "$@"' "$work/pid.0" "$exe" "${args[@]}" --processes 1 \
        >"$work/run.rank0" 2>&1 &
    p=$!
    pids+=("$p")
    note_leader
    reap "$p"
    [ "$status" -eq 0 ] || failed "the one-process run ($(status_text "$status"))"
    read_result "$work/run.rank0" 1 1 || failed "the one-process run ($why)"
}

# One run over $1 hosts x $per_host processes; rank r runs on host r / P,
# rank 0 (the rendezvous) on host 0. The others start first and retry until
# rank 0 listens. Sets $bytes to what the hosts sent into the bridge.
bytes=0
run_hosts() {
    local h=$1 n=$(($1 * per_host)) r p rendezvous before after
    local -a ranks=()
    rm -f "$work"/run.* "$work"/pid.*
    port=$((port + 1))
    rendezvous="$addr0:$port"
    before=$(bridge_bytes "$h")
    for ((r = n - 1; r >= 0; r--)); do
        # shellcheck disable=SC2016 # expanded by the inner shell
        timeout -k 5 "$limit" "$netns" exec "$tag" $((r / per_host)) "${clear_env[@]}" \
            GOSSAMER_RANK="$r" GOSSAMER_SIZE="$n" GOSSAMER_RENDEZVOUS="$rendezvous" \
            sh -c 'echo $$ >"$0"; exec "$@"' "$work/pid.$r" "$exe" "${args[@]}" \
            >"$work/run.rank$r" 2>&1 &
        p=$!
        pids+=("$p")
        ranks[r]=$p
    done
    # Rank 0 names the segments of every host's region after its pid.
    note_leader
    local what="$h hosts x $per_host processes" bad=
    # Every rank is waited for before judging, so that the output shown is whole.
    for ((r = 0; r < n; r++)); do
        reap "${ranks[r]}"
        [ "$status" -eq 0 ] || bad+="${bad:+, }rank $r: $(status_text "$status")"
    done
    [ -z "$bad" ] || failed "$what ($bad)"
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

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
echo "$prog: $(nproc) cores (${cpu:-unknown CPU}), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
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
