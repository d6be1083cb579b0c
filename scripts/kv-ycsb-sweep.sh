#!/usr/bin/env bash
# YCSB workloads C and D against gossamer-kv as one program of N processes
# and against N independent memcached servers (client-side ketama), for
# each N in $PROCS, the runs interleaved, $REPS times. Appends one CSV row
# per run to $CSV, then prints the medians and draws them into $PLOT.
#
#   scripts/kv-ycsb-sweep.sh                       # N = 1 2 4, 3 runs each
#   PROCS="1 2" REPS=5 THREADS=4 scripts/kv-ycsb-sweep.sh
#
# Every server process gets $THREADS threads and $MEMORY MiB; the client
# runs $CLIENT_THREADS threads x $CONNS connections x $DEPTH requests in
# flight, over every server. All of it shares this host's cores: say how
# many beside the figures.
set -euo pipefail
cd "$(dirname "$0")/.."

PROCS=${PROCS:-"1 2 4"}
REPS=${REPS:-3}
THREADS=${THREADS:-2}
MEMORY=${MEMORY:-1024}
RECORDS=${RECORDS:-100000}
DURATION=${DURATION:-3}
CLIENT_THREADS=${CLIENT_THREADS:-2}
CONNS=${CONNS:-4}
DEPTH=${DEPTH:-8}
CSV=${CSV:-kv-ycsb.csv}
PLOT=${PLOT:-kv-ycsb.png}
BIN=${BIN:-target/release}
# Extra gossamer-kv flags (e.g. --local-first), and the label of its rows.
KV_FLAGS=${KV_FLAGS:-}
KV_LABEL=${KV_LABEL:-gossamer-kv}
# Set to skip the memcached runs (e.g. to compare gossamer-kv flags only).
NO_MEMCACHED=${NO_MEMCACHED:-}

if [[ -z "${NO_BUILD:-}" ]]; then
    cargo build --release -q -p gossamer-kv
fi
load=(ycsb --records "$RECORDS" --duration "$DURATION" --threads "$CLIENT_THREADS" --conns "$CONNS" --depth "$DEPTH"
    --csv "$CSV")

pid=""
log=$(mktemp)
cleanup() {
    if [[ -n "$pid" ]]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -f "$log"
}
trap cleanup EXIT

# Starts gossamer-kv over $1 processes; sets $servers to its addresses.
start_kv() {
    local n=$1
    # shellcheck disable=SC2086 # KV_FLAGS is a list of flags
    "$BIN/gossamer-kv" --processes "$n" -t "$THREADS" -m "$MEMORY" -p 0 $KV_FLAGS >"$log" 2>&1 &
    pid=$!
    local waited=0
    for waited in $(seq 600); do
        if [[ $(grep -c ' listening on .*:[0-9][0-9]*$' "$log" || true) -ge $n ]]; then break; fi
        if ! kill -0 "$pid" 2>/dev/null; then cat "$log" >&2; echo "gossamer-kv failed to start" >&2; exit 1; fi
        sleep 0.1
    done
    servers=()
    while read -r addr; do servers+=(--server "$addr"); done < <(awk '/ listening on /{print $NF}' "$log")
    if [[ ${#servers[@]} -ne $((2 * n)) ]]; then
        cat "$log" >&2
        echo "expected $n addresses after $((waited / 10)) s, got ${#servers[@]} words: ${servers[*]}" >&2
        exit 1
    fi
}

stop_kv() {
    kill -TERM "$pid"
    wait "$pid" || { echo "gossamer-kv did not stop cleanly" >&2; exit 1; }
    pid=""
}

for rep in $(seq "$REPS"); do
    for n in $PROCS; do
        for w in c d; do
            echo "run $rep/$REPS: workload $w, $n server process(es)" >&2
            start_kv "$n"
            "$BIN/gossamer-kv-load" "${load[@]}" --workload "$w" --label "$KV_LABEL" --route any "${servers[@]}"
            stop_kv
            if [[ -z "$NO_MEMCACHED" ]]; then
                "$BIN/gossamer-kv-load" "${load[@]}" --workload "$w" --label memcached --route ketama \
                    --spawn-memcached "$n" --server-threads "$THREADS" --server-memory "$MEMORY"
            fi
        done
    done
done

echo "medians over $REPS runs; $(nproc) cores, each server process $THREADS threads:"
"$BIN/gossamer-kv-load" ycsb-report --csv "$CSV" --baseline "${BASELINE:-memcached}" --plot "$PLOT" \
    --title "YCSB C and D: gossamer-kv over N processes vs N memcached servers ($(nproc) cores)"
