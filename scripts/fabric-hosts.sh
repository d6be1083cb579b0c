#!/usr/bin/env bash
# The fabric benchmark: between two simulated hosts (network namespaces on a
# bridge, UCX over TCP), UCX's own latency and bandwidth (ucx_perftest: put,
# active message and stream) beside Gossamer's blocking `apply_with` round
# trip and its echo payload bandwidth (gossamer/examples/echo.rs, every
# request crossing), per size, all in one run and interleaved per
# repetition, so that the ratios compare figures taken side by side. Prints
# a CSV, writes it to results/fabric-hosts.csv and draws results/fabric-hosts.svg.
# Needs root, iproute2 and UCX with its tools (libucx0, ucx-utils).
set -euo pipefail

prog=${0##*/}
root=$(cd "$(dirname "$0")/.." && pwd)

sizes="64 1024 4096 16384 65536"
threads=1
millis=500
reps=3
iters=20000
limit=120
quick=0
cpu=0
out="$root/results/fabric-hosts.csv"

usage() {
    cat <<EOF
usage: $prog [-s "SIZE ..."] [-t THREADS] [-m MILLIS] [-r REPS] [-n ITERS]
                      [-T SECONDS] [-o FILE] [-q] [-c]

Between two simulated hosts, for each size, measures in turn (each
repetition runs every measurement once; figures are medians):

  UCX (ucx_perftest, host h1 serving, h0 measuring):
    ucp_put_lat, ucp_am_lat      one-way latency (half a round trip), us
    ucp_put_bw, stream_bw, ucp_am_bw   bandwidth of one direction, MB/s
    ucp_put_bw, stream_bw both ways    a client on each host at once, each
                                 sending to the other: the slower
                                 direction's bandwidth, MB/s (what the
                                 link and the 2 cores give each direction
                                 while both are loaded, as in the echo)
  Gossamer (the echo example, one process per host):
    ECHO_RTT=1                   a blocking apply_with round trip carrying
                                 SIZE bytes there and back, us (median)
    ECHO_TARGETS=remote          THREADS clients per process echoing SIZE
                                 bytes to the other host; payload per
                                 direction, MB/s, with both directions
                                 loaded
    ECHO_FLOW=one-way            THREADS clients of the first process only
                                 sending SIZE bytes, answered by their
                                 length: payload in one direction, MB/s, as
                                 UCX's bandwidth tests measure it

and prints

  size,ucx_put_lat_us,ucx_am_lat_us,gossamer_rtt_us,rtt_over_am_rtt,
  ucx_put_mbps,ucx_stream_mbps,ucx_am_mbps,gossamer_mbps,bw_over_best,gossamer_mops,
  gossamer_oneway_mbps,oneway_over_best,ucx_both_mbps,echo_over_both

(rtt_over_am_rtt: Gossamer's round trip over UCX's active-message round
trip, twice ucp_am_lat; bw_over_best and oneway_over_best: Gossamer's
payload per direction, echoing and one way, over the better of UCX put and
stream one way; ucx_both_mbps: the better of UCX put and stream both ways
at once, per direction; echo_over_both: the echo's payload per direction
over it. MB is 10^6 bytes throughout: ucx_perftest's
MB/s, which are MiB/s, are converted.)

With -c, four more columns give what each gigabyte sent one way costs in
CPU time, Gossamer's one-way echo beside ucp_am_bw, in core-seconds per GB
of traffic through the bridge, all and user space only:

  oneway_cpu_s_per_gb,oneway_user_s_per_gb,ucx_am_cpu_s_per_gb,ucx_am_user_s_per_gb

Each is measured with a run of MILLIS and one of 4 x MILLIS (ucx_perftest:
as many iterations as that takes at its ucp_am_bw rate of the same
repetition): the differences of the two runs in the machine's CPU time
(/proc/stat: user, system, interrupts) and in the bytes through the bridge
leave out the start-up. The machine's time is counted, so run it on an
otherwise quiet machine. Where both cores are busy throughout, as on 2
cores, the cost per byte is what sets the bandwidth.

  -s SIZES    payload sizes in bytes (default: "$sizes")
  -t THREADS  client threads per process in the echo (default: $threads)
  -m MILLIS   length of each Gossamer run (default: $millis)
  -r REPS     repetitions (default: $reps)
  -n ITERS    ucx_perftest iterations per measurement (default: $iters)
  -T SECONDS  limit on each process, start-up included (default: $limit)
  -o FILE     where to write the CSV (default: results/fabric-hosts.csv)
  -q          quick form: sizes "64 4096", 200 ms, 1 repetition, 2000
              iterations (what CI runs)
  -c          also the CPU time per GB one way (see above)

Builds the example first (cargo build --release --example echo). Every
namespace, process and shared-memory segment it makes is removed when it
exits, however it exits.
EOF
}

# shellcheck source-path=SCRIPTDIR source=lib/sim-hosts.sh
. "$root/scripts/lib/sim-hosts.sh"

while getopts "s:t:m:r:n:T:o:qch" opt; do
    case $opt in
    s) sizes=$OPTARG ;;
    t) threads=$OPTARG ;;
    m) millis=$OPTARG ;;
    r) reps=$OPTARG ;;
    n) iters=$OPTARG ;;
    T) limit=$OPTARG ;;
    o) out=$OPTARG ;;
    q) quick=1 ;;
    c) cpu=1 ;;
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
if [ "$quick" -eq 1 ]; then
    sizes="64 4096"
    millis=200
    reps=1
    iters=2000
fi
for v in $sizes "$threads" "$millis" "$reps" "$iters" "$limit"; do
    is_uint "$v" || die "bad number '$v' (see $prog -h)"
done
command -v ucx_perftest >/dev/null 2>&1 || die "ucx_perftest is missing (apt-get install ucx-utils)"
sim_hosts_check
sim_hosts_setup fabric
sim_hosts_build examples/echo --example echo
sim_hosts_rack 2
clear_env+=(ECHO_MILLIS="$millis")

# ucx_perftest's ports: below the rendezvous ports of sim-hosts.sh (40000
# and up, one per launch) even after every run of a long benchmark has taken
# one more, so that the two never meet on host 0's address.
perf_port=$((20000 + RANDOM % 10000))

# ucx_perftest on host $1 with the options every measurement shares: $2 the
# test, $3 the size, $4 the port, $5 the file for its output; a sixth
# argument, the server's address, makes it the client. Runs $perf_iters
# iterations where a caller sets it (as a local), else $iters.
ucx_perf() {
    local host=$1 test=$2 size=$3 port=$4 out=$5
    shift 5
    local n=${perf_iters:-$iters}
    timeout -k 5 "$limit" "$netns" exec "$tag" "$host" ucx_perftest "$@" -t "$test" -s "$size" -n "$n" \
        -w $((n / 10 + 10)) -f -v -p "$port" >"$out" 2>&1
}

# The last row of figures (CSV) in ucx_perftest's output file $1; fails
# when there is none.
last_row() {
    grep -E '^[0-9]+,' "$1" | tail -n 1
}

# One ucx_perftest measurement: $1 test, $2 size, $3 the CSV column to
# report (2: median latency, 6: overall bandwidth). Sets $figure.
figure=
perftest() {
    local test=$1 size=$2 column=$3 server try attempt line=
    for ((attempt = 1; attempt <= 3; attempt++)); do
        perf_port=$((perf_port + 1))
        ucx_perf 1 "$test" "$size" "$perf_port" "$work/perf.server" &
        server=$!
        pids+=("$server")
        # The client retries while the server starts listening.
        for ((try = 0; try < 100; try++)); do
            if ucx_perf 0 "$test" "$size" "$perf_port" "$work/perf.client" "${addr[1]}"; then
                break
            fi
            kill -0 "$server" 2>/dev/null || break # the server gave up: start again
            sleep 0.1
        done
        kill -s TERM "$server" 2>/dev/null || true
        reap "$server"
        line=$(last_row "$work/perf.client") && break
        echo "$prog: ucx_perftest -t $test -s $size, attempt $attempt: no figures" \
            "($(tail -n 1 "$work/perf.client"); server: $(tail -n 1 "$work/perf.server"))" >&2
    done
    [ -n "$line" ] || failed "ucx_perftest -t $test -s $size gave no figures in 3 attempts"
    figure=$(cut -d, -f"$column" <<<"$line")
    [ -n "$figure" ] || failed "ucx_perftest -t $test -s $size: no column $column in '$line'"
}

# One ucx_perftest bandwidth test in both directions at once, as the echo
# loads the link: a server on each host, then a client on each host sending
# to the other's server, both started together. $1 test, $2 size. Sets
# $figure to the slower direction's overall bandwidth (MiB/s), so that a
# client that ran partly alone does not flatter the figure.
perftest_both() {
    local test=$1 size=$2 attempt h try ok
    local -a server=() client=() port=() got=()
    for ((attempt = 1; attempt <= 3; attempt++)); do
        for h in 0 1; do
            perf_port=$((perf_port + 1))
            port[h]=$perf_port
            ucx_perf "$h" "$test" "$size" "${port[h]}" "$work/perf.server$h" &
            server[h]=$!
            pids+=("${server[h]}")
        done
        for h in 0 1; do
            # Host h sends to the other host's server, retrying while it
            # starts listening.
            (
                for ((try = 0; try < 100; try++)); do
                    ucx_perf "$h" "$test" "$size" "${port[1 - h]}" "$work/perf.client$h" "${addr[1 - h]}" && exit 0
                    sleep 0.1
                done
                exit 1
            ) &
            client[h]=$!
            pids+=("${client[h]}")
        done
        ok=1
        for h in 0 1; do
            reap "${client[h]}"
            [ "$status" -eq 0 ] || ok=0
        done
        for h in 0 1; do
            kill -s TERM "${server[h]}" 2>/dev/null || true
            reap "${server[h]}"
        done
        if [ "$ok" -eq 1 ]; then
            for h in 0 1; do
                got[h]=$(last_row "$work/perf.client$h" | cut -d, -f6 || true)
                [ -n "${got[h]}" ] || ok=0
            done
        fi
        [ "$ok" -eq 1 ] && break
        echo "$prog: ucx_perftest -t $test -s $size both ways, attempt $attempt: no figures" \
            "(host 0: $(tail -n 1 "$work/perf.client0" 2>/dev/null); host 1: $(tail -n 1 "$work/perf.client1" 2>/dev/null))" >&2
    done
    [ "$ok" -eq 1 ] || failed "ucx_perftest -t $test -s $size both ways gave no figures in 3 attempts"
    figure=$(awk -v a="${got[0]}" -v b="${got[1]}" 'BEGIN { print (a < b ? a : b) }')
}

# Gossamer over the two hosts, one process each; $@: NAME=VALUE settings.
# Sets $line to rank 0's line that starts with $1's word ($1: RTT or ECHO).
line=
gossamer_run() {
    local word=$1
    shift
    sim_hosts_launch 2 1 env ECHO_THREADS=$((2 * threads)) "$@" "$exe"
    sim_hosts_wait "the echo over 2 hosts ($*)"
    line=$(grep -m1 "^$word " "$work/run.rank0") || failed "no $word line from rank 0 ($*)"
    grep -q " processes=2 " <<<"$line" || failed "rank 0 did not run over 2 processes: $line"
}

field() {
    sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<"$2"
}

declare -A runs=()
add() {
    runs[$1]="${runs[$1]:-}${runs[$1]:+ }$2"
}

# The machine's CPU time so far, in clock ticks: "USER ALL" (ALL: user,
# nice, system, interrupts and softirqs).
cpu_ticks() {
    awk '$1 == "cpu" { print $2 + $3, $2 + $3 + $4 + $7 + $8 }' /proc/stat
}

# Runs "$@" and sets $cost to "USER_TICKS ALL_TICKS BYTES" that it took:
# the machine's CPU time and the bytes through the bridge.
cost=
costed() {
    local c0 b0 c1 b1
    read -r -a c0 <<<"$(cpu_ticks)"
    b0=$(bridge_bytes 2)
    "$@"
    read -r -a c1 <<<"$(cpu_ticks)"
    b1=$(bridge_bytes 2)
    cost="$((c1[0] - c0[0])) $((c1[1] - c0[1])) $((b1 - b0))"
}

# The CPU time per GB between two costs ($1 the short run's, $2 the long
# one's): "ALL USER" in core-seconds per GB; "nan nan" when the long run
# moved no more bytes.
per_gb() {
    awk -v a="$1" -v b="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN {
        split(a, s, " "); split(b, l, " ")
        gb = (l[3] - s[3]) / 1e9
        if (gb <= 0) { print "nan nan"; exit }
        printf "%.3f %.3f\n", (l[2] - s[2]) / hz / gb, (l[1] - s[1]) / hz / gb
    }'
}

# ucp_am_bw one way, at size $1 for $2 iterations, for its cost only.
ucx_am_run() {
    local perf_iters=$2
    perftest ucp_am_bw "$1" 6
}

# The CPU time per GB one way at size $1, Gossamer's and UCX's active
# messages (whose rate this repetition measured: $2 MiB/s); adds them to
# the runs.
cpu_costs() {
    local s=$1 rate=$2 short long n all user
    costed gossamer_run ECHO ECHO_TARGETS=remote ECHO_FLOW=one-way ECHO_SIZE="$s" ECHO_MILLIS="$millis"
    short=$cost
    costed gossamer_run ECHO ECHO_TARGETS=remote ECHO_FLOW=one-way ECHO_SIZE="$s" ECHO_MILLIS=$((4 * millis))
    long=$cost
    read -r all user <<<"$(per_gb "$short" "$long")"
    add "oneway_cpu $s" "$all"
    add "oneway_user $s" "$user"
    # As many iterations as MILLIS takes at the measured rate.
    n=$(awk -v r="$rate" -v s="$s" -v ms="$millis" 'BEGIN { n = int(r * 1048576 * ms / 1000 / s); print (n < 1000 ? 1000 : n) }')
    costed ucx_am_run "$s" "$n"
    short=$cost
    costed ucx_am_run "$s" $((4 * n))
    long=$cost
    read -r all user <<<"$(per_gb "$short" "$long")"
    add "ucx_cpu $s" "$all"
    add "ucx_user $s" "$user"
}

sim_hosts_machine
echo "$prog: sizes $sizes; $threads client thread(s) per process; $millis ms per Gossamer run;" \
    "$iters ucx_perftest iterations; $reps repetitions" >&2
for ((rep = 1; rep <= reps; rep++)); do
    for s in $sizes; do
        echo "$prog: run $rep/$reps, $s bytes" >&2
        perftest ucp_put_lat "$s" 2 && add "put_lat $s" "$figure"
        perftest ucp_am_lat "$s" 2 && add "am_lat $s" "$figure"
        perftest ucp_put_bw "$s" 6 && add "put_bw $s" "$figure"
        perftest stream_bw "$s" 6 && add "stream_bw $s" "$figure"
        perftest ucp_am_bw "$s" 6 && add "am_bw $s" "$figure"
        perftest_both ucp_put_bw "$s" && add "put_both $s" "$figure"
        perftest_both stream_bw "$s" && add "stream_both $s" "$figure"
        gossamer_run RTT ECHO_RTT=1 ECHO_SIZE="$s"
        add "rtt $s" "$(field p50_us "$line")"
        gossamer_run ECHO ECHO_TARGETS=remote ECHO_SIZE="$s"
        add "mops $s" "$(field mops "$line")"
        # Both directions together in the line: half of it each way.
        add "mbps $s" "$(awk -v m="$(field mbps "$line")" 'BEGIN { printf "%.1f", m / 2 }')"
        gossamer_run ECHO ECHO_TARGETS=remote ECHO_FLOW=one-way ECHO_SIZE="$s"
        grep -q " flow=one-way " <<<"$line" || failed "the echo did not run one way: $line"
        add "oneway $s" "$(field mbps "$line")"
        if [ "$cpu" -eq 1 ]; then
            cpu_costs "$s" "${runs["am_bw $s"]##* }"
            echo "$prog:   CPU time per GB one way: Gossamer ${runs["oneway_cpu $s"]##* }" \
                "(user ${runs["oneway_user $s"]##* }), UCX am ${runs["ucx_cpu $s"]##* }" \
                "(user ${runs["ucx_user $s"]##* }) core-s" >&2
        fi
        echo "$prog:   one way: UCX put ${runs["put_lat $s"]##* } us, am ${runs["am_lat $s"]##* } us;" \
            "round trip: Gossamer ${runs["rtt $s"]##* } us; per direction: UCX put ${runs["put_bw $s"]##* }," \
            "stream ${runs["stream_bw $s"]##* } MiB/s, Gossamer ${runs["mbps $s"]##* } MB/s echoing," \
            "${runs["oneway $s"]##* } MB/s one way; both ways at once: UCX put ${runs["put_both $s"]##* }," \
            "stream ${runs["stream_both $s"]##* } MiB/s" >&2
    done
done

med() {
    median <<<"${runs[$1]}"
}
csv="size,ucx_put_lat_us,ucx_am_lat_us,gossamer_rtt_us,rtt_over_am_rtt,ucx_put_mbps,ucx_stream_mbps,ucx_am_mbps,gossamer_mbps,bw_over_best,gossamer_mops"
csv+=",gossamer_oneway_mbps,oneway_over_best,ucx_both_mbps,echo_over_both"
[ "$cpu" -eq 0 ] || csv+=",oneway_cpu_s_per_gb,oneway_user_s_per_gb,ucx_am_cpu_s_per_gb,ucx_am_user_s_per_gb"
for s in $sizes; do
    row=$(awk -v s="$s" -v pl="$(med "put_lat $s")" -v al="$(med "am_lat $s")" -v rtt="$(med "rtt $s")" \
        -v pb="$(med "put_bw $s")" -v sb="$(med "stream_bw $s")" -v ab="$(med "am_bw $s")" \
        -v gb="$(med "mbps $s")" -v mops="$(med "mops $s")" -v ob="$(med "oneway $s")" \
        -v pboth="$(med "put_both $s")" -v sboth="$(med "stream_both $s")" 'BEGIN {
        mib = 1.048576
        pb *= mib; sb *= mib; ab *= mib; pboth *= mib; sboth *= mib
        best = pb > sb ? pb : sb
        both = pboth > sboth ? pboth : sboth
        printf "%d,%.2f,%.2f,%.2f,%.2f,%.1f,%.1f,%.1f,%.1f,%.3f,%.4f,%.1f,%.3f,%.1f,%.3f", s, pl, al, rtt, rtt / (2 * al), pb, sb, ab, gb, gb / best, mops, ob, ob / best, both, gb / both
    }')
    if [ "$cpu" -eq 1 ]; then
        row+=",$(med "oneway_cpu $s"),$(med "oneway_user $s"),$(med "ucx_cpu $s"),$(med "ucx_user $s")"
    fi
    csv+=$'\n'"$row"
done
mkdir -p "$(dirname "$out")"
printf '%s\n' "$csv" >"$out"
printf '%s\n' "$csv"
"$exe" --plot "$out" >&2
echo "$prog: wrote $out (load average now $(cut -d' ' -f1-3 /proc/loadavg))" >&2
