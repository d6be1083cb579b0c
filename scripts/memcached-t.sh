#!/usr/bin/env bash
# memcached's own test suite (the t/ folder of memcached 1.6.18, unchanged)
# against stock memcached and against gossamer-kv, in one process and as one
# program of 2 processes. Every file runs under `prove` against a fresh
# server, with a time limit; prints a table file x server -> pass, fail,
# skip or timeout, and exits non-zero if a file that passes against
# memcached does not pass against every gossamer-kv server.
#
#   scripts/memcached-t.sh                      # every file
#   scripts/memcached-t.sh touch.t stats.t      # these files only
#   SERVERS="memcached kv-1" scripts/memcached-t.sh
#
# Servers (columns):
#   memcached  stock memcached (Debian's binary, or $MEMCACHED)
#   kv-1       gossamer-kv, one process
#   kv-2       gossamer-kv, one program of 2 processes; the suite talks to
#              rank 1, so that its keys live in both processes
#   kv-2r0     the same program, the suite talking to rank 0; only the
#              files in R0_FILES (those whose keys, clock or settings must
#              agree across processes), as kv-2 already runs every file
#              across both processes ("-" for the others; KV_ALL=1: every
#              file)
# When memcached is a column, the gossamer-kv columns run only the files
# that pass against it ("-" in the table; KV_ALL=1: every file).
#
# Most files run in the suite's external-server mode
# (T_MEMD_USE_DAEMON=HOST:PORT): new_memcached() connects to the given
# server and ignores the arguments a file passes it, so every server here
# gets the same flags, memcached's defaults written out (-t 4 -m 64,
# loopback, no UDP). The files in OWN_SERVER_FILES need the flags they pass
# (memory limits, LRU settings, item size) and start servers of their own:
# the harness runs `./memcached-debug ARGS -p PORT ...` for each, and that
# program starts the column's server with those arguments (see below). The
# harness also runs `./memcached-debug -h` to find which features the server
# has (TLS, SASL, proxy, extstore); that is stock memcached's help for every
# column (without the extstore options, see below), so each column skips the
# same files.
#
# Settings (environment):
#   MEMCACHED_T  the tarball (default ../shared/third_party/memcached-1.6.18/
#                t.tar.gz, relative to the repository root, or to the main
#                worktree's root from a linked worktree)
#   MEMCACHED    the memcached binary (default: memcached on PATH)
#   BIN          where gossamer-kv is (default target/release, built here
#                unless NO_BUILD=1)
#   SERVERS      the columns (default "memcached kv-1 kv-2 kv-2r0")
#   OWN_SERVER_FILES  files run with servers started by the harness with
#                the file's own flags (default "lru-maintainer.t stats.t")
#   R0_FILES     the files the kv-2r0 column runs
#   T_TIMEOUT    seconds per file and server (default 45): a file still
#                running then counts as timed out (some wait forever for a
#                reply a server does not send)
#   LOGS         where each run's output is kept (default
#                target/memcached-t; one file per server and test file)
#
# Files run one after another: several of them measure time (expiry,
# flush_all with a delay, the LRU crawler), and on a small machine running
# them side by side makes them fail for want of CPU rather than for what
# the server does.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

suite=shared/third_party/memcached-1.6.18/t.tar.gz
if [[ -n "${MEMCACHED_T:-}" ]]; then
    tarball=$MEMCACHED_T
else
    # Beside the repository; from a linked worktree, beside its main one.
    tarball=$root/../$suite
    common=$(git rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
    if [[ ! -f "$tarball" && -n "$common" && -f "$common/../../$suite" ]]; then
        tarball=$common/../../$suite
    fi
fi
BIN=${BIN:-target/release}
SERVERS=${SERVERS:-"memcached kv-1 kv-2 kv-2r0"}
OWN_SERVER_FILES=${OWN_SERVER_FILES:-"lru-maintainer.t stats.t"}
# Files where what a client of rank 0 sees depends on the other process:
# expiry and flush_all times, touch, counters and settings summed or
# applied over the program, the LRU maintainer and crawler.
R0_FILES=${R0_FILES:-"expirations.t flush-all.t touch.t issue_14.t incrdecr.t stats.t lru-maintainer.t lru-crawler.t issue_70.t noreply.t"}
T_TIMEOUT=${T_TIMEOUT:-45}
LOGS=${LOGS:-target/memcached-t}
THREADS=4
MEMORY=64

die() {
    echo "memcached-t: $*" >&2
    exit 2
}

[[ -f "$tarball" ]] || die "no test suite at $tarball; set MEMCACHED_T to memcached 1.6.18's t.tar.gz"
command -v prove >/dev/null 2>&1 || die "prove not found; install perl (Debian: apt-get install perl)"
if ! command -v timeout >/dev/null 2>&1 || ! command -v setsid >/dev/null 2>&1; then
    die "timeout and setsid not found; install coreutils and util-linux"
fi
MEMCACHED=${MEMCACHED:-$(command -v memcached || true)}
[[ -n "$MEMCACHED" && -x "$MEMCACHED" ]] ||
    die "memcached not found (the suite probes it even for gossamer-kv); install it (Debian: apt-get install memcached) or set MEMCACHED"
for s in $SERVERS; do
    case $s in
        memcached | kv-1 | kv-2 | kv-2r0) ;;
        *) die "unknown server $s in SERVERS (memcached, kv-1, kv-2, kv-2r0)" ;;
    esac
done
if [[ " $SERVERS " == *" kv-"* && -z "${NO_BUILD:-}" ]]; then
    cargo build --release -q -p gossamer-kv --bin gossamer-kv
fi
kv="$root/$BIN/gossamer-kv"
[[ "$BIN" == /* ]] && kv="$BIN/gossamer-kv"
[[ " $SERVERS " != *" kv-"* || -x "$kv" ]] || die "no gossamer-kv at $kv; build it (cargo build --release -p gossamer-kv) or set BIN"

# A program of several processes stops when one of them falls silent for
# 1.5 s (fate sharing); on a few cores shared with builds, a starved process
# can be silent that long, and the program would stop in the middle of a
# file for want of CPU. A process that exits still fails the file (its log
# says so and keeps the server's output).
export GOSSAMER_SILENCE_MS=${GOSSAMER_SILENCE_MS:-10000}

work=$(mktemp -d "${TMPDIR:-/tmp}/memcached-t.XXXXXX")
server_pid="" # process group of the running server
prove_pid=""

# Stops a process group: SIGTERM, then SIGKILL if it is still there after
# 10 s. gossamer-kv's later ranks die with rank 0 in any case (the launcher
# asks the kernel to kill them when it dies).
stop_group() {
    local pgid=$1
    kill -TERM -- "-$pgid" 2>/dev/null || return 0
    for _ in $(seq 100); do
        kill -0 -- "-$pgid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL -- "-$pgid" 2>/dev/null || true
    wait "$pgid" 2>/dev/null || true
}

cleanup() {
    if [[ -n "$prove_pid" ]]; then stop_group "$prove_pid"; fi
    if [[ -n "$server_pid" ]]; then stop_group "$server_pid"; fi
    prove_pid=""
    server_pid=""
    rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "memcached-t: interrupted" >&2; exit 130' INT TERM HUP

tar xzf "$tarball" -C "$work" || die "cannot unpack $tarball"
# The suite's temporary files go inside $work, removed on exit: daemonize.t
# makes one with File::Temp and leaves it.
mkdir "$work/tmp"
[[ -d "$work/t/lib" ]] || die "$tarball does not hold memcached's t/ folder"
# The harness runs ./memcached-debug -h to see what the server supports.
# It is memcached, except that its help leaves out the external storage
# options: the servers under test run without it (no ext_path), and told
# otherwise, the extstore files wait forever for items to reach a disk
# that is not there (and metaget.t, which has an extstore part, with them).
# For the files that start their own servers, it starts the server of the
# column in MEMCACHED_T_SERVER with the file's arguments, less the
# harness's -o relaxed_privileges (known only to memcached's seccomp
# builds): memcached as they are; gossamer-kv also without memcached's -u
# (user) and -U (UDP), with half the -m per process for 2 processes, and
# with its help leaving out unix sockets too, so that the harness gives it
# a TCP port (rank 1's for kv-2: rank r listens on -p + r).
mc=$(printf %q "$MEMCACHED")
kvq=$(printf %q "$kv")
cat >"$work/memcached-debug" <<WRAPPER
#!/usr/bin/env bash
kind=\${MEMCACHED_T_SERVER:-memcached}
if [ "\$#" = 1 ] && [ "\$1" = -h ]; then
    help=\$($mc -h)
    rc=\$?
    if [[ \$kind == kv-* && -n \${MEMCACHED_T_OWN:-} ]]; then
        printf '%s\n' "\$help" | grep -v -e ext_path -e unix-socket
    else
        printf '%s\n' "\$help" | grep -v ext_path
    fi
    exit \$rc
fi
args=()
while [[ \$# -gt 0 ]]; do
    case \$1 in
        -o)
            # The harness adds relaxed_privileges, which only memcached's
            # seccomp builds know.
            opts=\$(printf '%s' "\$2" | tr , '\\n' | grep -vx relaxed_privileges | paste -sd , -)
            [[ -n \$opts ]] && args+=(-o "\$opts")
            shift 2
            ;;
        -u | -U)
            [[ \$kind == memcached ]] && args+=("\$1" "\$2")
            shift 2
            ;;
        -m)
            # A program of 2 processes is one server of the memory the
            # file asks for: each process gets half (-m is per process),
            # and at least 2 MB (twice the largest item, as memcached
            # requires).
            mem=\$2
            [[ \$kind == kv-2* ]] && mem=\$(((mem + 1) / 2)) && ((mem < 2)) && mem=2
            args+=(-m "\$mem")
            shift 2
            ;;
        -p)
            port=\$2
            [[ \$kind == kv-2 ]] && port=\$((port - 1))
            args+=(-p "\$port")
            shift 2
            ;;
        *)
            args+=("\$1")
            shift
            ;;
    esac
done
case \$kind in
    memcached) exec $mc "\${args[@]}" ;;
    kv-1) exec $kvq "\${args[@]}" ;;
    *) exec $kvq --processes 2 "\${args[@]}" ;;
esac
WRAPPER
chmod +x "$work/memcached-debug"
# The harness starts its servers as `./timedrun 600 SERVER ARGS`.
printf '#!/bin/sh\nshift\nexec "$@"\n' >"$work/timedrun"
chmod +x "$work/timedrun"
# prove's own output is buffered when it goes to a file and lost when prove
# is killed at the time limit; loaded into prove (and the test), this module
# flushes every line, so a timed-out run's log shows how far it got.
mkdir "$work/flush"
printf 'package AutoFlush;\nuse IO::Handle;\nSTDOUT->autoflush(1);\nSTDERR->autoflush(1);\n1;\n' >"$work/flush/AutoFlush.pm"
mkdir -p "$LOGS"
LOGS=$(cd "$LOGS" && pwd)

# A free TCP port on loopback (the kernel's choice; memcached has no way to
# pick one itself and report it).
free_port() {
    perl -MIO::Socket::INET -e \
        'print IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0, Listen => 1, ReuseAddr => 1)->sockport'
}

# True once 127.0.0.1:$1 accepts a connection.
answers() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Starts server $1 in a process group of its own; sets server_pid and port.
# Fails if it does not answer within 20 s.
start_server() {
    local kind=$1 log="$work/server.log"
    port=""
    : >"$log"
    case $kind in
        memcached)
            local user=()
            [[ $(id -u) == 0 ]] && user=(-u root)
            port=$(free_port)
            setsid "$MEMCACHED" -p "$port" -U 0 -l 127.0.0.1 -t "$THREADS" -m "$MEMORY" "${user[@]}" >"$log" 2>&1 &
            ;;
        kv-1)
            setsid "$kv" -p 0 -l 127.0.0.1 -t "$THREADS" -m "$MEMORY" >"$log" 2>&1 &
            ;;
        kv-2 | kv-2r0)
            setsid "$kv" --processes 2 -p 0 -l 127.0.0.1 -t "$THREADS" -m "$MEMORY" >"$log" 2>&1 &
            ;;
    esac
    server_pid=$!
    local rank=1
    [[ $kind == kv-2r0 ]] && rank=0
    for _ in $(seq 200); do
        if ! kill -0 "$server_pid" 2>/dev/null; then
            cat "$log" >&2
            echo "memcached-t: $kind did not start" >&2
            server_pid=""
            return 1
        fi
        case $kind in
            kv-1) port=$(sed -n 's/^gossamer-kv listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$log") ;;
            kv-2*) port=$(sed -n "s/^gossamer-kv rank $rank listening on 127\.0\.0\.1:\([0-9]*\)\$/\1/p" "$log") ;;
        esac
        if [[ -n "$port" ]] && answers "$port"; then return 0; fi
        sleep 0.1
    done
    cat "$log" >&2
    echo "memcached-t: $kind did not answer within 20 s" >&2
    return 1
}

# Runs t/$1 against server $2; sets r to pass, fail, skip or timeout.
run_file() {
    local file=$1 kind=$2 log="$LOGS/$2/${1%.t}.log" rc=0
    mkdir -p "$LOGS/$kind"
    if [[ " $OWN_SERVER_FILES " == *" $file "* ]]; then
        # The harness starts the servers (see memcached-debug above); they
        # are in prove's process group, which timeout ends.
        : >"$log"
        (cd "$work" && MEMCACHED_T_SERVER=$kind MEMCACHED_T_OWN=1 PERL5LIB="$work/flush" PERL5OPT=-MAutoFlush \
            TMPDIR="$work/tmp" GOSSAMER_SILENCE_MS=$GOSSAMER_SILENCE_MS \
            exec timeout -k 5 "$T_TIMEOUT" prove -v "t/$file") \
            >>"$log" 2>&1 &
        prove_pid=$!
        wait "$prove_pid" || rc=$?
        # A server the harness left behind goes with the group.
        stop_group "$prove_pid"
        prove_pid=""
        verdict "$file" "$log" "$rc"
        return
    fi
    if ! start_server "$kind" 2>"$log"; then
        if [[ -n "$server_pid" ]]; then stop_group "$server_pid"; fi
        server_pid=""
        r=fail
        return
    fi
    # timeout puts prove (and what it starts) in a process group of its own
    # and kills the group at the limit; waiting in the background keeps this
    # shell free to act on Ctrl-C at once.
    (cd "$work" && T_MEMD_USE_DAEMON="127.0.0.1:$port" PERL5LIB="$work/flush" PERL5OPT=-MAutoFlush \
        TMPDIR="$work/tmp" exec timeout -k 5 "$T_TIMEOUT" prove -v "t/$file") \
        >>"$log" 2>&1 &
    prove_pid=$!
    wait "$prove_pid" || rc=$?
    prove_pid=""
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "--- the server had exited by the end of the run" >>"$log"
    fi
    stop_group "$server_pid"
    server_pid=""
    if [[ -s "$work/server.log" ]]; then
        echo "--- server output" >>"$log"
        cat "$work/server.log" >>"$log"
    fi
    verdict "$file" "$log" "$rc"
}

# Sets r from the exit status $3 of the run of t/$1 logged in $2.
verdict() {
    local file=$1 log=$2 rc=$3
    if [[ $rc == 124 || $rc == 137 ]]; then
        r=timeout
    elif [[ $rc != 0 ]]; then
        r=fail
    elif grep -q "^t/$file \.\.* skipped" "$log"; then
        r=skip
    else
        r=pass
    fi
}

# The first failing assertion of a run and what the server answered: the
# first "not ok" line (or else the last "ok") and the first diagnostics block ("#   Failed test"
# and what follows; the test writes those to stderr, so they need not come
# right after it), then prove's summary of how the file ended.
why() {
    local log=$1
    # (Each step may find nothing; none of them may stop the report.)
    grep -m 1 '^not ok' "$log" ||
        { grep '^ok ' "$log" | tail -n 1 | sed 's/^/no failed assertion; the last to pass: /'; } || true
    awk '/^#   Failed test/ { if (n++) exit } n && /^#/ { print; if (++k == 12) exit }' "$log" || true
    { sed -n '/^Test Summary Report/,/^Files=/p' "$log" | grep '^  \|^t/'; } || true
}

if [[ $# -gt 0 ]]; then
    files=("$@")
    for f in "${files[@]}"; do [[ -f "$work/t/$f" ]] || die "no file t/$f in the suite"; done
else
    files=()
    for f in "$work"/t/*.t; do files+=("${f##*/}"); done
fi
read -r -a servers <<<"$SERVERS"

start=$SECONDS
declare -A result
regressions=()
printf '%-28s' file
for s in "${servers[@]}"; do printf ' %-9s' "$s"; done
printf '\n'
for f in "${files[@]}"; do
    base=""
    printf '%-28s' "$f"
    for s in "${servers[@]}"; do
        if [[ $s == kv-* && -n $base && $base != pass && -z "${KV_ALL:-}" ]]; then
            r="-"
        elif [[ $s == kv-2r0 && " $R0_FILES " != *" $f "* && -z "${KV_ALL:-}" ]]; then
            r="-"
        else
            run_file "$f" "$s"
        fi
        [[ $s == memcached ]] && base=$r
        result[$f,$s]=$r
        printf ' %-9s' "$r"
        # ("-": a kv-2r0 file left out on purpose, see R0_FILES.)
        if [[ $s == kv-* && $base == pass && $r != pass && $r != "-" ]]; then regressions+=("$f,$s"); fi
    done
    printf '\n'
done

echo
for s in "${servers[@]}"; do
    declare -A count=([pass]=0 [fail]=0 [skip]=0 [timeout]=0 [-]=0)
    for f in "${files[@]}"; do count[${result[$f,$s]}]=$((${count[${result[$f,$s]}]} + 1)); done
    printf '%-9s pass %d, fail %d, timeout %d, skip %d, not run %d\n' "$s" \
        "${count[pass]}" "${count[fail]}" "${count[timeout]}" "${count[skip]}" "${count[-]}"
    unset count
done
echo "$((SECONDS - start)) s for ${#files[@]} files; logs in $LOGS"

if [[ ${#regressions[@]} -gt 0 ]]; then
    echo
    echo "passed against memcached, not against gossamer-kv:"
    for fs in "${regressions[@]}"; do
        f=${fs%,*}
        s=${fs#*,}
        echo "--- $f on $s: ${result[$f,$s]} ($LOGS/$s/${f%.t}.log)"
        [[ ${result[$f,$s]} == timeout ]] && echo "    (still running after $T_TIMEOUT s)"
        why "$LOGS/$s/${f%.t}.log" | cut -c1-300 | sed 's/^/    /' || true
    done
    exit 1
fi
if [[ " $SERVERS " == *" memcached "* && " $SERVERS " == *" kv-"* ]]; then
    echo "every file that passes against memcached passes against gossamer-kv"
fi
