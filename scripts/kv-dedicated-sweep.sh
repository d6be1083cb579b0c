#!/usr/bin/env bash
# gossamer-kv with a fixed number of dedicated trustees (k = 0 and 1 by
# default) and with the run-time controller (`--dedicated-trustees auto`),
# side by side with memcached: `gossamer-kv-load compare` runs every
# workload against every server in turn, rotating which goes first, $RUNS
# times, and prints a table of medians. Then, per workload, the controller's
# median throughput over that of the best fixed k, and the count changes the
# controller made (the runtime logs each at info level; the auto server runs
# with -v so that they reach this script).
#
#   scripts/kv-dedicated-sweep.sh                 # k = 0 1 and auto, 3 runs
#   KS="0 1" RUNS=5 DURATION=5 scripts/kv-dedicated-sweep.sh
#
# All servers and the client share this host's cores: the load average at
# the start is printed with the figures.
set -euo pipefail
cd "$(dirname "$0")/.."

KS=${KS:-"0 1"}
RUNS=${RUNS:-3}
THREADS=${THREADS:-2}
DURATION=${DURATION:-3}
WARMUP=${WARMUP:-1}
CLIENT_THREADS=${CLIENT_THREADS:-2}
CONNS=${CONNS:-4}
DEPTH=${DEPTH:-32}
UNIFORM_KEYS=${UNIFORM_KEYS:-1000}
ZIPF_KEYS=${ZIPF_KEYS:-1000000}
SET_RATIOS=${SET_RATIOS:-0.01,0.1}
CSV=${CSV:-kv-dedicated.csv}
BIN=${BIN:-target/release}

if [[ -z "${NO_BUILD:-}" ]]; then
    cargo build --release -q -p gossamer-kv
fi
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"

variants=()
for k in $KS; do variants+=(--variant "k=$k:--dedicated-trustees $k"); done
variants+=(--variant "auto:--dedicated-trustees auto -v")

log=$(mktemp)
trap 'rm -f "$log"' EXIT
start_row=$(($( [[ -f "$CSV" ]] && wc -l <"$CSV" || echo 1) + 1))
"$BIN/gossamer-kv-load" compare --server-threads "$THREADS" --runs "$RUNS" --duration "$DURATION" \
    --warmup "$WARMUP" --threads "$CLIENT_THREADS" --conns "$CONNS" --depth "$DEPTH" \
    --uniform-keys "$UNIFORM_KEYS" --zipf-keys "$ZIPF_KEYS" --set-ratios "$SET_RATIOS" \
    "${variants[@]}" --csv "$CSV" 2> >(tee "$log" >&2)

echo
echo "auto / best fixed k (medians of $RUNS runs of this invocation):"
tail -n +"$start_row" "$CSV" | awk -F, -v ks="$KS" "$(cat scripts/lib/median.awk)"'
    $2 != "memcached" { key = $7 " " $8 " sets " $9; ops[key, $2] = ops[key, $2] " " $13; keys[key] = 1 }
    END {
        nk = split(ks, k, " ")
        for (key in keys) {
            best = 0; bestk = ""
            line = ""
            for (i = 1; i <= nk; i++) {
                m = median(ops[key, "k=" k[i]])
                line = line sprintf("k=%s %.0f  ", k[i], m)
                if (m > best) { best = m; bestk = k[i] }
            }
            auto = median(ops[key, "auto"])
            ratio = best > 0 ? auto / best : 0
            printf "%-28s %sauto %.0f  auto/best (k=%s) %.2f\n", key, line, auto, bestk, ratio
        }
    }' | sort
changes=$(grep -c "dedicated trustees changed" "$log" || true)
echo "controller: $changes change(s) of the dedicated count in the auto server"
grep "dedicated trustees changed" "$log" | sed 's/^/  /' || true
