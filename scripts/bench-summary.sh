#!/usr/bin/env bash
# Runs the quick forms of the benchmarks that fit on any machine — the demo,
# `gossamer-bench --quick faa` and `--quick map`, and the echo example's
# `--sweep --quick` — and prints their figures as rows of the summary table
# of benchmarks/README.md:
#
#   | figure | ours | baseline | ratio | machine | command | commit | date |
#
# (ratio: ours over the baseline, above 1 is better for ours). Every row
# names the machine, commit and date of this run; paste them over the rows
# they replace. Needs only Rust; the echo sweep runs several processes of
# one host over shared memory.
set -euo pipefail

prog=${0##*/}
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/results/summary"
echo_sweep=1

usage() {
    cat <<EOF
usage: $prog [-o DIR] [-E]

  -o DIR   where the runs write their files (default: results/summary)
  -E       skip the echo sweep (about 30 s on 2 cores)

Builds gossamer-bench and the echo example (release) first. The quick
runs take about 2 minutes on 2 cores; the table goes to standard output,
progress to standard error.
EOF
}

while getopts "o:Eh" opt; do
    case $opt in
    o) out=$OPTARG ;;
    E) echo_sweep=0 ;;
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

die() {
    echo "$prog: $*" >&2
    exit 1
}

cd "$root"
[[ $out == /* ]] || out="$root/$out"
if [ -z "${GOSSAMER_BENCH:-}" ]; then
    echo "$prog: building gossamer-bench and the echo example (release)" >&2
    cargo build --release -q -p gossamer-bench >&2
    [ "$echo_sweep" -eq 0 ] || cargo build --release -q -p gossamer --example echo >&2
fi
release="${CARGO_TARGET_DIR:-$root/target}/release"
[[ $release == /* ]] || release="$root/$release"
# GOSSAMER_BENCH and ECHO_EXAMPLE name already built programs (for a machine
# without a Rust toolchain); the build above is then skipped.
bench="${GOSSAMER_BENCH:-$release/gossamer-bench}"
echo_exe="${ECHO_EXAMPLE:-$release/examples/echo}"
[ -x "$bench" ] || die "no executable at $bench"
[ "$echo_sweep" -eq 0 ] || [ -x "$echo_exe" ] || die "no executable at $echo_exe (or run with -E)"
mkdir -p "$out"

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
machine="$(nproc) cores, ${cpu:-unknown CPU}"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    commit="$commit+changes"
fi
date=$(date -u +%F)
echo "$prog: $machine, load average $(cut -d' ' -f1-3 /proc/loadavg); commit $commit" >&2

# One table row: figure, ours, baseline, ratio, command.
row() {
    # shellcheck disable=SC2016 # the backquotes are Markdown
    printf '| %s | %s | %s | %s | %s | `%s` | %s | %s |\n' "$1" "$2" "$3" "$4" "$machine" "$5" "$commit" "$date"
}

# Runs gossamer-bench with the arguments given; its results go to $out.
run_bench() {
    echo "$prog: gossamer-bench $*" >&2
    "$bench" --out "$out" --no-plots "$@" >"$out/$(tr ' ' '_' <<<"$*").txt"
}

# Rows of a sweep summary ($1, a *_summary.csv of gossamer-bench) for the
# Trust variant $2 at the x values listed in $3 (space separated); the
# figure is named "$4, $5 X"; the command is $6.
sweep_rows() {
    local file=$1 variant=$2 xs=" $3 " what=$4 unit=$5 cmd=$6 x v median best best_median ratio
    while IFS=, read -r x v median _ best best_median ratio; do
        if [ "$v" != "$variant" ] || [[ $xs != *" $x "* ]]; then
            continue
        fi
        row "$what, $unit $x, \`$variant\`" "$(printf '%.1f Mops/s' "$median")" \
            "$(printf '%s %.1f Mops/s' "$best" "$best_median")" "$(printf '%.2f×' "$ratio")" "$cmd"
    done < <(tail -n +2 "$file")
}

# The lowest and highest ratio of Trust variant $2 in sweep summary $1.
ratio_range() {
    awk -F, -v v="$2" 'NR > 1 && $2 == v { r = $7 + 0; if (n++ == 0 || r < lo) lo = r; if (n == 1 || r > hi) hi = r }
        END { if (n) printf "%.2f–%.2f×", lo, hi }' "$1"
}

run_bench demo
run_bench --quick faa
run_bench --quick map
if [ "$echo_sweep" -eq 1 ]; then
    echo "$prog: echo --sweep --quick" >&2
    (cd "$out" && "$echo_exe" --sweep --quick >echo_sweep.txt)
fi

echo "| figure | ours | baseline | ratio | machine | command | commit | date |"
echo "|---|---|---|---|---|---|---|---|"
while IFS=, read -r workload threads over contestant form median ratio; do
    [ "$contestant" = "Trust<T>" ] || continue
    best=$(awk -F, -v w="$workload" -v t="$threads" '$1 == w && $2 == t && $4 != "Trust<T>" {
        if ($6 + 0 > b) { b = $6 + 0; n = $4 } } END { printf "%s %.1f Mops/s", n, b }' "$out/demo.csv")
    if [ "$over" = true ]; then
        threads="$threads threads (oversubscribed)"
    else
        threads="$threads threads"
    fi
    row "demo: $workload, $threads, \`$form\`" "$(printf '%.1f Mops/s' "$median")" "$best" \
        "$(printf '%.2f×' "$ratio")" "gossamer-bench demo"
done < <(tail -n +2 "$out/demo.csv")
for dist in uniform zipf; do
    f="$out/faa_${dist}_summary.csv"
    sweep_rows "$f" trust-async "1 16 1000 1000000" "faa, $dist keys" "objects:" "gossamer-bench --quick faa"
    for v in trust-async trust-apply; do
        row "faa, $dist keys, 1–10^6 objects, \`$v\`: range of ratios" "" "best lock per point" \
            "$(ratio_range "$f" "$v")" "gossamer-bench --quick faa"
    done
done
for dist in uniform zipf; do
    sweep_rows "$out/map_size_${dist}_summary.csv" trust-async "1000 100000" "map, $dist keys, 5% writes" \
        "entries:" "gossamer-bench --quick map"
done
sweep_rows "$out/map_writes_uniform_summary.csv" trust-async "0 100" "map, uniform keys, 1000 entries" \
    "writes (%):" "gossamer-bench --quick map"
if [ "$echo_sweep" -eq 1 ]; then
    while IFS=, read -r size threads m1 m2 ratio _ _ m2s ratio_shared; do
        case $size in 64 | 1024 | 16384) ;; *) continue ;; esac
        row "echo, $size-byte requests, $threads threads: 2 processes against 1" \
            "$(printf '%.2f Mops/s' "$m2")" "$(printf '1 process %.2f Mops/s' "$m1")" \
            "$(printf '%.2f×' "$ratio")" "cargo run --release --example echo -- --sweep --quick"
        row "echo, $size-byte requests, $threads threads: 2 processes with SharedBytes against 1" \
            "$(printf '%.2f Mops/s' "$m2s")" "$(printf '1 process %.2f Mops/s' "$m1")" \
            "$(printf '%.2f×' "$ratio_shared")" "cargo run --release --example echo -- --sweep --quick"
    done < <(tail -n +2 "$out/results/echo_size.csv")
fi
echo "$prog: done; the runs' files are in $out" >&2
