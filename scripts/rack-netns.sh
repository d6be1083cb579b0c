#!/usr/bin/env bash
# A simulated rack on one machine: one network namespace per "host", joined by
# a bridge that lives in a namespace of its own, so that the root namespace's
# networking is never touched. Needs root and iproute2.
set -euo pipefail

prog=${0##*/}

usage() {
    cat <<EOF
usage: $prog COMMAND ...

  up TAG N          create hosts gsm-TAG-h0 .. gsm-TAG-h{N-1} (1 <= N <= 254) on a
                    bridge in namespace gsm-TAG-br; prints one line per host:
                    "h<I> <namespace> <IPv4 address>"
  exec TAG I CMD... run CMD in host I's namespace with GOSSAMER_HOST=h<I> and
                    UCX_TLS=tcp exported (the rest of the environment passes through)
  down TAG          kill the processes left in TAG's namespaces and remove the
                    namespaces (the bridge and veths go with them); idempotent
  check             exit 0 if this machine can create network namespaces, bridges
                    and veths; otherwise print why and exit 1

TAG is 1-40 characters of [A-Za-z0-9_-]. Host I gets 10.231.X.(I+1)/24, X in 1..250
derived from TAG. The hosts have no route out of their /24, and the root
namespace's loopback is not theirs. Needs root and iproute2.
EOF
}

die() {
    echo "$prog: $*" >&2
    exit 1
}

need_ip() {
    command -v ip >/dev/null 2>&1 || die "iproute2 is missing: apt-get install iproute2"
}

need_root() {
    [ "$EUID" -eq 0 ] || die "must run as root (network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN)"
}

check_tag() {
    [[ $1 =~ ^[A-Za-z0-9_-]{1,40}$ ]] || die "bad TAG '$1': use 1-40 characters of [A-Za-z0-9_-]"
}

# The third octet of the rack's /24, derived from the tag so that racks of
# different runs use different subnets.
subnet_octet() {
    local sum
    sum=$(printf '%s' "$1" | cksum)
    echo $((${sum%% *} % 250 + 1))
}

# The namespaces of a rack that exist now, one a line. (`ip netns list` says
# "Peer netns reference is invalid" about namespaces that other racks are
# deleting meanwhile.)
rack_namespaces() {
    ip netns list 2>/dev/null | awk '{ print $1 }' | grep -E "^gsm-$1-(h[0-9]+|br)\$" || true
}

# Pids of the processes inside the given namespaces.
rack_pids() {
    local ns
    for ns in "$@"; do
        ip netns pids "$ns" 2>/dev/null || true
    done | grep -vx "$$" || true
}

cmd_check() {
    [ $# -eq 0 ] || {
        usage >&2
        exit 2
    }
    need_ip
    need_root
    local ns="gsm-check-$$-$RANDOM" out
    if ! out=$(ip netns add "$ns" 2>&1); then
        die "cannot create a network namespace: $out"
    fi
    # shellcheck disable=SC2064 # expand $ns now
    trap "ip netns del '$ns' >/dev/null 2>&1 || true" EXIT
    if ! out=$(ip -n "$ns" link set dev lo up 2>&1); then
        die "cannot configure a network namespace: $out"
    fi
    if ! out=$(ip -n "$ns" link add name gsmchk-br type bridge 2>&1); then
        die "cannot create a bridge (kernel module 'bridge'?): $out"
    fi
    if ! out=$(ip -n "$ns" link add name gsmchk-a type veth peer name gsmchk-b 2>&1); then
        die "cannot create a veth pair (kernel module 'veth'?): $out"
    fi
    if ! out=$(ip netns del "$ns" 2>&1); then
        die "cannot remove a network namespace: $out"
    fi
    trap - EXIT
    echo "ok: network namespaces, bridges and veths can be created"
}

cmd_down() {
    [ $# -eq 1 ] || {
        usage >&2
        exit 2
    }
    need_ip
    need_root
    local tag=$1 ns pids i
    check_tag "$tag"
    local -a nss
    mapfile -t nss < <(rack_namespaces "$tag")
    [ ${#nss[@]} -gt 0 ] || return 0

    # Processes first: a namespace that still has processes outlives its name,
    # and so would its veth.
    pids=$(rack_pids "${nss[@]}")
    if [ -n "$pids" ]; then
        # shellcheck disable=SC2086 # one pid a word
        kill -s TERM $pids 2>/dev/null || true
        for ((i = 0; i < 30; i++)); do
            [ -n "$(rack_pids "${nss[@]}")" ] || break
            sleep 0.1
        done
    fi
    # Whatever ignored that (or was forked meanwhile).
    for ((i = 0; i < 50; i++)); do
        pids=$(rack_pids "${nss[@]}")
        [ -n "$pids" ] || break
        # shellcheck disable=SC2086 # one pid a word
        kill -s KILL $pids 2>/dev/null || true
        sleep 0.1
    done
    pids=$(rack_pids "${nss[@]}")
    [ -z "$pids" ] || echo "$prog: warning: processes still in rack $tag: $pids" >&2

    # The veths now, synchronously: the kernel tears a dropped namespace down
    # in the background.
    local br="gsm-$tag-br" link
    if grep -qx "$br" <<<"$(printf '%s\n' "${nss[@]}")"; then
        for link in $(ip -n "$br" -o link show type veth 2>/dev/null | awk -F': ' '{ print $2 }' | cut -d@ -f1); do
            ip -n "$br" link del "$link" 2>/dev/null || true
        done
    fi
    for ns in "${nss[@]}"; do
        ip netns del "$ns" 2>/dev/null || true
    done
    mapfile -t nss < <(rack_namespaces "$tag")
    [ ${#nss[@]} -eq 0 ] || die "could not remove: ${nss[*]}"
}

up_ok=0
up_tag=
up_cleanup() {
    if [ "$up_ok" -eq 0 ] && [ -n "$up_tag" ]; then
        echo "$prog: up failed; removing rack $up_tag" >&2
        cmd_down "$up_tag" || true
    fi
}

cmd_up() {
    [ $# -eq 2 ] || {
        usage >&2
        exit 2
    }
    need_ip
    need_root
    local tag=$1 n=$2 i ns
    check_tag "$tag"
    if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 254 ]; then
        die "bad N '$n': need 1..254 hosts"
    fi
    [ -z "$(rack_namespaces "$tag")" ] || die "rack $tag is already up (run: $prog down $tag)"
    local x br="gsm-$tag-br"
    x=$(subnet_octet "$tag")

    up_tag=$tag
    trap up_cleanup EXIT
    ip netns add "$br"
    ip -n "$br" link set dev lo up
    # IPv4 only: no IPv6 link-local addresses (nor their DAD and router
    # solicitations) on the fabric, so that its byte counters show only what
    # the hosts sent.
    ip -n "$br" link add name br0 type bridge
    ip -n "$br" link set dev br0 addrgenmode none
    ip -n "$br" link set dev br0 up
    for ((i = 0; i < n; i++)); do
        ns="gsm-$tag-h$i"
        ip netns add "$ns"
        ip -n "$ns" link set dev lo up
        ip -n "$br" link add name "v$i" type veth peer name eth0 netns "$ns"
        ip -n "$br" link set dev "v$i" addrgenmode none
        ip -n "$br" link set dev "v$i" master br0
        ip -n "$br" link set dev "v$i" up
        ip -n "$ns" link set dev eth0 addrgenmode none
        ip -n "$ns" addr add "10.231.$x.$((i + 1))/24" dev eth0
        ip -n "$ns" link set dev eth0 up
    done
    up_ok=1
    for ((i = 0; i < n; i++)); do
        echo "h$i gsm-$tag-h$i 10.231.$x.$((i + 1))"
    done
}

cmd_exec() {
    [ $# -ge 3 ] || {
        usage >&2
        exit 2
    }
    need_ip
    local tag=$1 i=$2
    shift 2
    check_tag "$tag"
    [[ $i =~ ^[0-9]+$ ]] || die "bad host index '$i'"
    local ns="gsm-$tag-h$i"
    grep -qx "$ns" <<<"$(rack_namespaces "$tag")" || die "no host h$i in rack $tag (namespace $ns)"
    export GOSSAMER_HOST="h$i"
    export UCX_TLS=tcp
    exec ip netns exec "$ns" "$@"
}

[ $# -ge 1 ] || {
    usage >&2
    exit 2
}
cmd=$1
shift
case $cmd in
up) cmd_up "$@" ;;
exec) cmd_exec "$@" ;;
down) cmd_down "$@" ;;
check) cmd_check "$@" ;;
-h | --help | help) usage ;;
*)
    usage >&2
    exit 2
    ;;
esac
