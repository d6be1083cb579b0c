# Shared by the scripts that run a program over simulated hosts
# (echo-hosts.sh, sssp-hosts.sh, objects-hosts.sh): error exits, the clean-up of the rack,
# processes, segments and scratch files on any exit, and the bookkeeping of
# background ranks. Source it after setting `prog` (the script's name) and
# `netns` (scripts/rack-netns.sh); call `sim_hosts_setup NAME` once the
# arguments are checked, before making the rack.
# shellcheck shell=bash disable=SC2154,SC2034 # prog, netns, limit come from the caller; status and rack_up go to it

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

# Sets $tag, $work, $pids, $leaders and $rack_up for a script called NAME,
# and the traps that clean up.
sim_hosts_setup() {
    tag="$1-$$"
    rack_up=0
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
