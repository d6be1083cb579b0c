#!/usr/bin/env bash
# Dedicated trustees in `gossamer-bench faa` and `map`: every fixed count
# k = 0 … threads-1 and the runtime's controller (`--dedicated auto`), one
# invocation each, in rounds that alternate them, so that all of them see
# the same machine. k = 0 is the plain variants (`trust-async`,
# `trust-apply`: every thread both client and trustee), k ≥ 1 the `-ded`
# variants with k trustee-only threads, `auto` the `-ded` variants with the
# controller picking k while each measurement runs.
#
# Prints, per workload cell and form (`async`, `apply`), the median Mops/s
# of every k over all rounds and repetitions, the best fixed k, the
# controller's median and its ratio to the best fixed k, then how often
# the controller ended a measurement at each k and every change it made.
# Writes the same table to $OUT/summary.csv.
#
#   scripts/dedicated-sweep.sh                        # 2 threads, 3 rounds, quick sweeps
#   THREADS=4 ROUNDS=5 scripts/dedicated-sweep.sh     # k = 0 … 3
#   BENCH_ARGS="--duration-ms 500" scripts/dedicated-sweep.sh
#
# The load average at the start is printed with the figures: on a busy
# machine the spread between rounds is larger than the differences.
set -euo pipefail
cd "$(dirname "$0")/.."

THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
REPEAT=${REPEAT:-3}
BENCH_ARGS=${BENCH_ARGS:---quick}
OUT=${OUT:-results/dedicated}
BIN=${BIN:-target/release/gossamer-bench}
BENCHES=${BENCHES:-"faa map"}

if ((THREADS < 2)); then
    echo "dedicated-sweep: THREADS must be at least 2 (k = 1 needs a client thread beside the trustee)" >&2
    exit 2
fi
if [[ -z "${NO_BUILD:-}" ]]; then
    cargo build --release -q -p gossamer-bench
fi
rm -rf "$OUT"/round[0-9]* "$OUT/all.csv" "$OUT/summary.csv"
mkdir -p "$OUT"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; threads $THREADS; rounds $ROUNDS"

ks=(0)
for ((k = 1; k < THREADS; k++)); do ks+=("$k"); done
ks+=(auto)

variants_of() { # bench k
    local plain
    case $1 in
    faa) plain=trust-async,trust-apply ;;
    map) plain=trust-async ;;
    esac
    if [[ $2 == 0 ]]; then
        echo "$plain"
    else
        echo "${plain//,/-ded,}-ded"
    fi
}

for ((r = 1; r <= ROUNDS; r++)); do
    # Rotate which k goes first in each round.
    n=${#ks[@]}
    for ((i = 0; i < n; i++)); do
        k=${ks[$(((i + r - 1) % n))]}
        for bench in $BENCHES; do
            dir="$OUT/round$r/k$k"
            mkdir -p "$dir"
            args=(--threads "$THREADS" --repeat "$REPEAT" --no-plots --out "$dir")
            [[ $k != 0 ]] && args+=(--dedicated "$k")
            # shellcheck disable=SC2086 # BENCH_ARGS is a list of options
            "$BIN" $BENCH_ARGS "${args[@]}" "$bench" --variants "$(variants_of "$bench" "$k")" \
                >"$dir/$bench.out" 2>"$dir/$bench.err" || {
                echo "dedicated-sweep: $bench at k=$k failed, see $dir/$bench.err" >&2
                exit 1
            }
            printf 'round %d  k=%-4s %s done\n' "$r" "$k" "$bench"
        done
    done
done

# Every repetition of every invocation: file kind, cell, form, k, Mops/s.
for f in "$OUT"/round*/k*/*.csv; do
    case $f in *_summary.csv) continue ;; esac
    k=${f%/*}
    k=${k##*/k}
    kind=${f##*/}
    kind=${kind%.csv}
    tail -n +2 "$f" | awk -F, -v k="$k" -v kind="$kind" '{
        form = $2; sub(/^trust-/, "", form); sub(/-ded$/, "", form)
        print kind "," $1 "," form "," k "," $4
    }'
done >"$OUT/all.csv"

echo
echo "Mops/s, medians over $ROUNDS rounds × $REPEAT repetitions; auto ÷ the best fixed k of the same cell:"
awk -F, -v ks="${ks[*]}" "$(cat scripts/lib/median.awk)"'
    {
        cell = $1 "," $2 "," $3
        if (!(cell in seen)) { seen[cell] = 1; order[++cells] = cell }
        v[cell, $4] = v[cell, $4] " " $5
    }
    END {
        nk = split(ks, k, " ")
        header = "workload,cell,form"
        for (i = 1; i <= nk; i++) header = header ",k=" k[i]
        print header ",best fixed k,auto / best"
        for (c = 1; c <= cells; c++) {
            cell = order[c]; line = cell; best = -1; bestk = ""
            for (i = 1; i <= nk; i++) {
                m = ((cell, k[i]) in v) ? median(v[cell, k[i]]) : ""
                med[k[i]] = m
                line = line "," m
                if (k[i] != "auto" && m != "" && m + 0 > best) { best = m + 0; bestk = k[i] }
            }
            ratio = (med["auto"] != "" && best > 0) ? sprintf("%.2f", med["auto"] / best) : ""
            print line "," bestk "," ratio
        }
    }' "$OUT/all.csv" >"$OUT/summary.csv"
if command -v column >/dev/null; then
    column -t -s, "$OUT/summary.csv"
else
    tr , '\t' <"$OUT/summary.csv"
fi

echo
echo "The controller's count at the end of each measurement (all rounds):"
cat "$OUT"/round*/kauto/*.err | grep -o 'dedicated auto: k=[0-9]* at the end' | sort | uniq -c || true
echo "Its changes (one line per measurement that made any):"
cat "$OUT"/round*/kauto/*.err | grep 'dedicated auto:' | grep -v 'changes: \[\]' || echo "  none"
