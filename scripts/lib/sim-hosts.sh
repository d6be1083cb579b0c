# Shared by the scripts that run a program over simulated hosts
# (echo-hosts.sh, sssp-hosts.sh, kv-hosts.sh, objects-hosts.sh): checking
# the machine and the host counts, building the program, making the rack,
# the program's secret, launching the ranks of one program over the hosts
# and waiting for them, the clean-up of the rack, processes, segments and
# scratch files on any exit, and the bookkeeping of background processes.
#
# Source it after setting `prog` (the script's name) and `root` (the
# repository); set `limit` (seconds per process) before launching. Then:
#
#   sim_hosts_check                 # root, iproute2, UCX, namespaces
#   sim_hosts_counts "$list" MIN [P THREADS]   # -> hosts_arr, max_hosts
#   sim_hosts_setup NAME            # scratch folder, clean-up traps
#   sim_hosts_build FILE CARGO_ARGS...         # -> exe, release
#   sim_hosts_rack N                # N hosts -> addr[], and the secret
#   sim_hosts_launch N P CMD...     # ranks over the hosts -> ranks[]
#   sim_hosts_wait WHAT             # every rank succeeded, or stop
#   sim_hosts_single CMD...         # the same program in one process
#
# Every process it starts runs under `timeout $limit`; its output goes to
# $work/run.*, which `failed` shows.
#
# SIM_NETEM in the environment makes the rack's network a bad one: its
# value is a `tc netem` specification (e.g. SIM_NETEM="delay 2ms loss 1%")
# applied to every host's link as it leaves the host, so that each frame
# between two hosts gets it once. Needs the kernel's sch_netem.
# shellcheck shell=bash disable=SC2154,SC2034 # prog, root, limit come from the caller; the rest go to it

netns="$root/scripts/rack-netns.sh"

die() {
    echo "$prog: $*" >&2
    exit 1
}

is_uint() {
    [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ]
}

# Stops unless this machine can run a program over simulated hosts: root,
# iproute2, timeout, UCX and a working scripts/rack-netns.sh.
sim_hosts_check() {
    [ "$EUID" -eq 0 ] || die "must run as root (network namespaces)"
    command -v ip >/dev/null 2>&1 || die "iproute2 is missing (apt-get install iproute2)"
    command -v timeout >/dev/null 2>&1 || die "timeout (coreutils) is missing"
    # Not `grep -q`: it would stop reading early, and under pipefail the
    # SIGPIPE that ldconfig then gets would fail the check.
    ldconfig -p 2>/dev/null | grep 'libucp\.so\.0' >/dev/null ||
        die "UCX is missing: no libucp.so.0 in the linker cache (apt-get install libucx0)"
    "$netns" check >/dev/null || die "this machine cannot make simulated hosts ($netns check)"
}

# Removes what a run left, on any exit: background ranks, the rack, the
# hosts' shared-memory segments and the scratch directory.
cleanup() {
    local rc=$? p
    trap - EXIT INT TERM
    for p in ${pids[@]+"${pids[@]}"}; do
        kill -s TERM "$p" 2>/dev/null || true
    done
    for p in ${pids[@]+"${pids[@]}"}; do
        wait "$p" 2>/dev/null || true
    done
    if [ "$rack_up" -eq 1 ]; then
        "$netns" down "$tag" || echo "$prog: warning: could not remove rack $tag" >&2
    fi
    # A run that failed midway may leave its hosts' regions behind.
    for p in ${leaders[@]+"${leaders[@]}"}; do
        rm -f /dev/shm/gossamer-"$p"-* 2>/dev/null || true
    done
    rm -rf "$work"
    exit "$rc"
}

# Parses the host counts in $1 into $hosts_arr and sets $max_hosts, the
# largest (at least $2). Every count must be in $2..254; with $3 (processes
# per host) and $4 (worker threads of the whole program), every count times
# $3 must divide $4.
sim_hosts_counts() {
    local min=$2 per=${3:-} threads=${4:-} h
    read -r -a hosts_arr <<<"$1"
    [ ${#hosts_arr[@]} -gt 0 ] || die "no host counts given"
    max_hosts=$min
    for h in "${hosts_arr[@]}"; do
        { is_uint "$h" && [ "$h" -ge "$min" ] && [ "$h" -le 254 ]; } || die "bad host count '$h' ($min..254)"
        if [ -n "$per" ] && [ $((threads % (h * per))) -ne 0 ]; then
            die "$threads threads do not spread evenly over $h hosts x $per processes;" \
                "pick -t as a multiple of $((h * per))"
        fi
        [ "$h" -le "$max_hosts" ] || max_hosts=$h
    done
}

# Sets $tag, $work, $pids, $leaders, $rack_up and $port for a script called
# NAME, and the traps that clean up.
sim_hosts_setup() {
    tag="$1-$$"
    rack_up=0
    port=40000
    work=$(mktemp -d "${TMPDIR:-/tmp}/$1-hosts.XXXXXX")
    pids=()    # background processes we started (timeout wrappers)
    leaders=() # pids of rank 0 processes (they name the shared-memory segments)
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# Bytes the hosts have sent into the bridge so far.
bridge_bytes() {
    local n=$1 i sum=0 b
    for ((i = 0; i < n; i++)); do
        b=$(ip netns exec "gsm-$tag-br" cat "/sys/class/net/v$i/statistics/rx_bytes")
        sum=$((sum + b))
    done
    echo "$sum"
}

# Waits for a background process we started; sets $status to its exit status.
status=0
reap() {
    local p=$1 i
    status=0
    wait "$p" || status=$?
    for i in "${!pids[@]}"; do
        [ "${pids[$i]}" != "$p" ] || unset 'pids[i]'
    done
}

# "exit status N", saying when N means that `timeout` stopped the process.
status_text() {
    case $1 in
    124) echo "exit status 124: ran past $limit s" ;;
    137) echo "exit status 137: killed after running past $limit s" ;;
    *) echo "exit status $1" ;;
    esac
}

# Shows a failed run's output and stops.
failed() {
    local what=$1 f
    echo "$prog: $what failed" >&2
    for f in "$work"/run.*; do
        [ -e "$f" ] || continue
        echo "---- ${f##*/run.}" >&2
        cat "$f" >&2
    done
    exit 1
}

# The median of the numbers on standard input, one per line or separated by
# spaces (the mean of the middle two for an even count).
median() {
    tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Builds with `cargo build --release ARGS...` (ARGS after the first) and
# sets $release to the release folder and $exe to the file $1 in it.
sim_hosts_build() {
    local file=$1
    shift
    echo "$prog: building $file (release)" >&2
    (cd "$root" && cargo build --release -q "$@" >&2)
    release="${CARGO_TARGET_DIR:-$root/target}/release"
    [[ $release == /* ]] || release="$root/$release"
    exe="$release/$file"
    [ -x "$exe" ] || die "no executable at $exe after the build"
}

# Makes the rack: $1 hosts h0, h1, ... joined by a bridge; sets $addr
# (host i's address at index i). Also makes the programs' secret: every
# rank proves it knows it at the rendezvous. A fresh one for this script's
# programs, passed in the environment (never on a command line, where other
# users could read it).
sim_hosts_rack() {
    local n=$1 h a
    rack_up=1
    "$netns" up "$tag" "$n" >"$work/rack"
    addr=()
    for ((h = 0; h < n; h++)); do
        a=$(awk -v h="h$h" '$1 == h { print $3 }' "$work/rack")
        [ -n "$a" ] || die "the rack did not report host h$h's address"
        addr+=("$a")
    done
    if [ -n "${SIM_NETEM:-}" ]; then
        local out
        for ((h = 0; h < n; h++)); do
            # shellcheck disable=SC2086 # the specification is several words
            out=$(ip netns exec "gsm-$tag-h$h" tc qdisc add dev eth0 root netem $SIM_NETEM 2>&1) ||
                die "SIM_NETEM=\"$SIM_NETEM\": tc netem on host h$h: $out (the kernel needs sch_netem)"
        done
        echo "$prog: every link: netem $SIM_NETEM" >&2
    fi
    GOSSAMER_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
    export GOSSAMER_SECRET
    unset GOSSAMER_SECRET_FILE
}

# `env` without the launcher variables that would make a process join
# another program; scripts append their own NAME=VALUE settings.
clear_env=(env -u GOSSAMER_PROCESSES -u GOSSAMER_RANK -u GOSSAMER_SIZE -u GOSSAMER_RENDEZVOUS
    -u SLURM_PROCID -u SLURM_NTASKS -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE)

# Records rank 0's pid (written by its wrapper into $work/pid.0): rank 0
# names the shared-memory segments of every host's region after it.
sim_hosts_note_leader() {
    local i
    for ((i = 0; i < 100; i++)); do
        [ -s "$work/pid.0" ] && break
        sleep 0.02
    done
    if [ -s "$work/pid.0" ]; then
        leaders+=("$(cat "$work/pid.0")")
    fi
}

# Starts one program of $1 ranks, $2 per host: rank r on host r / $2, with
# the rendezvous at rank 0 on host 0 (a fresh port each time). The command
# follows; an argument @ADDR@ becomes the address of the rank's host. The
# others start first and retry until rank 0 listens. Rank r's output goes
# to $work/run.rankR; $ranks holds their (timeout wrappers') pids.
sim_hosts_launch() {
    local n=$1 per=$2 r p
    shift 2
    rm -f "$work"/run.* "$work"/pid.*
    port=$((port + 1))
    ranks=()
    for ((r = n - 1; r >= 0; r--)); do
        # shellcheck disable=SC2016 # expanded by the inner shell
        timeout -k 5 "$limit" "$netns" exec "$tag" $((r / per)) "${clear_env[@]}" \
            GOSSAMER_RANK="$r" GOSSAMER_SIZE="$n" GOSSAMER_RENDEZVOUS="${addr[0]}:$port" \
            sh -c 'echo $$ >"$0"; exec "$@"' "$work/pid.$r" "${@//@ADDR@/${addr[r / per]}}" \
            >"$work/run.rank$r" 2>&1 &
        p=$!
        pids+=("$p")
        ranks[r]=$p
    done
    sim_hosts_note_leader
}

# Waits for every rank of the last launch (all of them, so that the output
# shown is whole); stops with their output unless all succeeded. $1 says
# what ran.
sim_hosts_wait() {
    local r bad=
    for ((r = 0; r < ${#ranks[@]}; r++)); do
        reap "${ranks[r]}"
        [ "$status" -eq 0 ] || bad+="${bad:+, }rank $r: $(status_text "$status")"
    done
    [ -z "$bad" ] || failed "$1 ($bad)"
}

# Runs the command as one process, outside any namespace (no fabric);
# output to $work/run.rank0. Stops with its output unless it succeeded.
sim_hosts_single() {
    local p
    rm -f "$work"/run.* "$work"/pid.*
    # shellcheck disable=SC2016 # expanded by the inner shell
    timeout -k 5 "$limit" "${clear_env[@]}" sh -c 'echo $$ >"$0"; exec "$@"' "$work/pid.0" "$@" \
        >"$work/run.rank0" 2>&1 &
    p=$!
    pids+=("$p")
    sim_hosts_note_leader
    reap "$p"
    [ "$status" -eq 0 ] || failed "the one-process run ($(status_text "$status"))"
}

# The machine line every script prints first (on standard error).
sim_hosts_machine() {
    local cpu
    cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
    echo "$prog: $(nproc) cores (${cpu:-unknown CPU}), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
}
