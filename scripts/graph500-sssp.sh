#!/usr/bin/env bash
# The Graph500 SSSP kernel (kernel 3), ours beside the public reference: builds
# the Graph500 v3 MPI reference (src/graph500_reference_bfs_sssp, delta-
# stepping over AML active messages) with the system's MPI, OUTSIDE this
# repository, runs its SSSP kernel (BFS skipped, validation on) and then
# `gossamer-sssp run` at the same SCALE, edge factor and root count, and prints
# both medians and the ratio graph500_time / gossamer_time (>1: we are faster).
#
# The reference source is never copied into this repository: it is cloned (or
# taken from --src) into $GRAPH500_DIR, and built in a copy there, with one
# edit to that copy (none to the source) and one compiler flag:
#   * main.c hard-codes `int num_bfs_roots = 64;` (no -D, no environment
#     variable), so one `sed` line makes it read the environment variable
#     GRAPH500_NROOTS instead (unset: 64, as before), and --roots sets it.
#   * GCC >= 10 defaults to -fno-common, with which the reference fails to link
#     ("multiple definition of `column'/`weights'"), so it is compiled with
#     -fcommon (added to MPICC, so that the Makefile's own CFLAGS stay as they
#     are).
# With a process count that is not a power of two it is built a second time,
# in its own copy, with -DPROCS_PER_NODE_NOT_POWER_OF_TWO (see its README).
#
# Installs nothing unless asked (--install, or CI=true): without mpicc/mpirun
# it prints the apt-get command and exits 2.
set -euo pipefail

prog=${0##*/}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

cores=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
scale=18
edgefactor=16
np=$cores
threads=$cores
processes=1
roots=8
src=${GRAPH500_SRC:-}
g500_dir=${GRAPH500_DIR:-$HOME/.cache/gossamer/graph500}
g500_url=https://github.com/graph500/graph500
skip_ours=0
skip_graph500=0
csv=
limit=3600
install=0
[[ ${CI:-} == true ]] && install=1
verbose=0
mpirun_extra=${GRAPH500_MPIRUN_ARGS:-}
apt_pkgs="libopenmpi-dev openmpi-bin"

usage() {
    cat <<EOF
usage: $prog [--scale S] [--edgefactor E] [--np P] [--threads T]
                       [--processes Q] [--roots R] [--src DIR|URL] [--skip-ours]
                       [--skip-graph500] [--csv FILE] [--timeout SECONDS]
                       [--install] [--verbose]

Runs the Graph500 v3 reference SSSP (MPI, delta-stepping; BFS skipped,
validation on) on P MPI processes, then ours (cargo run --release -p
gossamer-sssp -- run ...) on Q processes x T threads, at the same SCALE, edge
factor and number of roots, and prints the median time per root, the median
TEPS and the ratio graph500_time / gossamer_time (>1: gossamer is faster).

  --scale S         log2 of the vertex count (default $scale)
  --edgefactor E    edges per vertex (default $edgefactor)
  --np P            MPI processes for the reference (default: cores, $cores)
  --threads T       threads per process for ours (default: cores, $cores)
  --processes Q     processes for ours (default $processes)
  --roots R         search keys per implementation (default $roots; the
                    Graph500 rules use 64)
  --src DIR|URL     the reference: a checkout (a directory holding src/main.c)
                    is used as is; a git URL or git directory (a bare mirror
                    works) is cloned into \$GRAPH500_DIR/graph500 when that is
                    absent. Default: \$GRAPH500_SRC, else a clone of
                    $g500_url
  --skip-ours       run the reference only
  --skip-graph500   run ours only (no ratio)
  --csv FILE        append one row per implementation to FILE (header added
                    when FILE is new or empty)
  --timeout SECS    bound on each build and each run (default $limit)
  --install         install Open MPI ($apt_pkgs) with apt-get if
                    mpicc/mpirun are missing (implied by CI=true; sudo only
                    when not root)
  --verbose         also print the reference's and ours' full output
  -h, --help        this text

Environment: GRAPH500_DIR (clone, build copies and logs; default
~/.cache/gossamer/graph500, now $g500_dir), GRAPH500_SRC (as --src),
GRAPH500_MPIRUN_ARGS (extra mpirun arguments, e.g. "--mca
btl_vader_single_copy_mechanism none" in containers that forbid ptrace),
MPICC (the MPI C compiler, default mpicc).

Exit status: 0 done; 1 a run, its validation or its parsing failed; 2 usage
or missing tools; 3 a build or run went past --timeout.
EOF
}

die() { echo "$prog: $*" >&2; exit 1; }
usage_error() { echo "$prog: $*" >&2; echo "try '$prog --help'" >&2; exit 2; }
note() { echo "$prog: $*" >&2; }

need_arg() { [[ $# -ge 2 && -n $2 ]] || usage_error "$1 needs a value"; }
while [[ $# -gt 0 ]]; do
    case $1 in
        --scale) need_arg "$@"; scale=$2; shift 2 ;;
        --edgefactor) need_arg "$@"; edgefactor=$2; shift 2 ;;
        --np) need_arg "$@"; np=$2; shift 2 ;;
        --threads) need_arg "$@"; threads=$2; shift 2 ;;
        --processes) need_arg "$@"; processes=$2; shift 2 ;;
        --roots) need_arg "$@"; roots=$2; shift 2 ;;
        --src) need_arg "$@"; src=$2; shift 2 ;;
        --csv) need_arg "$@"; csv=$2; shift 2 ;;
        --timeout) need_arg "$@"; limit=$2; shift 2 ;;
        --skip-ours) skip_ours=1; shift ;;
        --skip-graph500) skip_graph500=1; shift ;;
        --install) install=1; shift ;;
        --verbose) verbose=1; shift ;;
        -h | --help) usage; exit 0 ;;
        *) usage_error "unknown argument '$1'" ;;
    esac
done

for v in scale edgefactor np threads processes roots limit; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || usage_error "--${v/limit/timeout} must be a positive integer, not '${!v}'"
done
((scale <= 40)) || usage_error "--scale $scale is out of range"
((skip_ours && skip_graph500)) && usage_error "--skip-ours and --skip-graph500 leave nothing to run"
# Paths the user gave are taken relative to where they ran us; we cd later.
[[ -z $csv || $csv == /* ]] || csv="$PWD/$csv"
[[ -z $src || $src == /* || $src =~ ^[a-z+]+:// || $src =~ ^[^/]+@ ]] || src="$PWD/$src"
mkdir -p "$g500_dir"
g500_dir=$(cd "$g500_dir" && pwd)

# ---------------------------------------------------------------- processes --
# Every build and run goes through run_bounded: its own session (setsid), under
# `timeout`, waited for in the background so that a signal to this script is
# handled at once; on return, and on exit, whatever is left of that session
# (MPI ranks put themselves in process groups of their own, not in mpirun's)
# is sent TERM, then KILL, by process id.
sidfile=
session_pids() { ps -eo pid=,sid= | awk -v s="$1" '$2 == s { print $1 }'; }
kill_session() {
    local f=$1 sid pids _
    [[ -n $f && -s $f ]] || return 0
    sid=$(<"$f")
    [[ $sid =~ ^[0-9]+$ ]] && ((sid > 1)) || return 0
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        pids=$(session_pids "$sid")
        [[ -n $pids ]] || return 0
        # shellcheck disable=SC2086  # one id per word
        kill -TERM $pids 2>/dev/null || true
        sleep 0.5
    done
    pids=$(session_pids "$sid")
    # shellcheck disable=SC2086
    [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
}
cleanup() {
    local rc=$?
    kill_session "$sidfile"
    [[ -z $sidfile ]] || rm -f "$sidfile"
    return "$rc"
}
trap cleanup EXIT
trap 'note "interrupted"; exit 130' INT TERM HUP

# run_bounded SECONDS STDOUT STDERR COMMAND... -> the command's status (124:
# timed out)
run_bounded() {
    local secs=$1 out=$2 err=$3 pid rc=0
    shift 3
    sidfile=$(mktemp "${TMPDIR:-/tmp}/graph500-sssp.sid.XXXXXX")
    # shellcheck disable=SC2016  # $$, $0, $@ belong to the inner shell
    setsid -w bash -c 'echo $$ >"$0"; exec timeout --kill-after=30 "$@"' \
        "$sidfile" "$secs" "$@" >"$out" 2>"$err" </dev/null &
    pid=$!
    wait "$pid" || rc=$?
    kill_session "$sidfile"
    rm -f "$sidfile"
    sidfile=
    return "$rc"
}

timed_out() { # timed_out STATUS WHAT
    if [[ $1 -eq 124 || $1 -eq 137 ]]; then
        note "$2 went past --timeout $limit s"
        exit 3
    fi
}

# /usr/bin/time -v (GNU time), when present, for wall time and peak RSS. Its
# "Maximum resident set size" is that of the largest single process (one MPI
# rank), not the sum over ranks.
gnutime=()
if [[ -x /usr/bin/time ]] && /usr/bin/time -v true >/dev/null 2>&1; then
    gnutime=(/usr/bin/time -v -o)
fi
time_field() { # time_field FILE "Field name" -> value or "-"
    [[ -s $1 ]] || { echo -; return; }
    awk -F': ' -v k="$2" 'index($1, k) { v = $2 } END { print (v == "" ? "-" : v) }' "$1"
}
rss_mib() { # KiB -> MiB
    [[ $1 =~ ^[0-9]+$ ]] && awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }' || echo -
}

stamp=$(date -u +%Y%m%dT%H%M%SZ)
logs="$g500_dir/logs"
mkdir -p "$logs"

# ---------------------------------------------------------------- reference --
g500_time='' g500_teps='' g500_hteps='' g500_line=''
if ((!skip_graph500)); then
    # The build copies and the clone stay out of this repository.
    g500_abs=$(cd "$g500_dir" && pwd -P)
    root_abs=$(cd "$root" && pwd -P)
    case $g500_abs/ in
        "$root_abs"/*) usage_error "GRAPH500_DIR ($g500_dir) lies inside the repository; the reference must be built outside it" ;;
    esac

    # Tools.
    missing=()
    mpicc_base=${MPICC:-mpicc}
    command -v "${mpicc_base%% *}" >/dev/null 2>&1 || missing+=(mpicc)
    command -v mpirun >/dev/null 2>&1 || missing+=(mpirun)
    pkgs=$apt_pkgs
    if ! command -v make >/dev/null 2>&1; then
        missing+=(make)
        pkgs="$pkgs make"
    fi
    if ((${#missing[@]})); then
        if ((install)); then
            note "installing $pkgs (missing: ${missing[*]})"
            sudo=()
            [[ $(id -u) -eq 0 ]] || sudo=(sudo)
            # shellcheck disable=SC2086  # package list
            "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y $pkgs ||
                { "${sudo[@]}" apt-get update && "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y $pkgs; }
            if ! command -v "${mpicc_base%% *}" >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
                note "still no ${mpicc_base%% *}/mpirun after installing $pkgs"
                exit 2
            fi
        else
            echo "$prog: missing ${missing[*]}; install them with" >&2
            echo "    apt-get install -y $pkgs" >&2
            echo "(prefix sudo when not root), or rerun with --install" >&2
            exit 2
        fi
    fi
    command -v setsid >/dev/null 2>&1 || { note "setsid (util-linux) is missing"; exit 2; }
    command -v timeout >/dev/null 2>&1 || { note "timeout (coreutils) is missing"; exit 2; }

    # Source tree.
    clone="$g500_dir/graph500"
    if [[ -n $src && -f $src/src/main.c && -f $src/src/Makefile ]]; then
        tree=$(cd "$src" && pwd -P)
    else
        from=${src:-$g500_url}
        if [[ -n $src && ! $src =~ ^[a-z+]+:// && ! $src =~ ^[^/]+@ ]] &&
            ! git --git-dir="$src" rev-parse --git-dir >/dev/null 2>&1 &&
            ! git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
            usage_error "--src $src is neither a Graph500 checkout (src/main.c) nor a git repository"
        fi
        if [[ -f $clone/src/main.c ]]; then
            note "using the existing clone $clone (remove it to clone $from again)"
        else
            command -v git >/dev/null 2>&1 || { note "git is missing (apt-get install -y git)"; exit 2; }
            note "cloning $from into $clone"
            rm -rf "$clone"
            run_bounded "$limit" "$logs/clone-$stamp.out" "$logs/clone-$stamp.err" \
                git clone --quiet "$from" "$clone" || {
                rc=$?
                timed_out "$rc" "git clone"
                cat "$logs/clone-$stamp.err" >&2
                die "git clone $from failed"
            }
        fi
        tree=$clone
    fi
    commit=$(git -C "$tree" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

    # Build copy: one per variant; rebuilt when absent, when a source file is
    # newer than the binary, or when the recipe (flags, commit) changed.
    defs=(-fcommon)
    variant=pow2
    if ((np & (np - 1))); then
        defs+=(-DPROCS_PER_NODE_NOT_POWER_OF_TWO)
        variant=npot
    fi
    build="$g500_dir/build-$variant"
    bin="$build/src/graph500_reference_bfs_sssp"
    recipe="tree=$tree commit=$commit mpicc=$mpicc_base ${defs[*]} roots-patch=GRAPH500_NROOTS v1"
    fresh=0
    if [[ -x $bin && -f $build/.recipe && $(<"$build/.recipe") == "$recipe" ]] &&
        [[ -z $(find "$tree/src" "$tree/aml" "$tree/generator" -type f -newer "$bin" -print -quit) ]]; then
        fresh=1
    fi
    if ((!fresh)); then
        note "building the reference ($variant) in $build"
        rm -rf "$build"
        mkdir -p "$build"
        cp -R "$tree/src" "$tree/aml" "$tree/generator" "$build/"
        # The one source change (build copy only): the root count from the
        # environment instead of the literal 64.
        sed -i 's/^\([[:space:]]*\)int num_bfs_roots = 64;/\1int num_bfs_roots = getenv("GRAPH500_NROOTS") ? atoi(getenv("GRAPH500_NROOTS")) : 64;/' \
            "$build/src/main.c"
        grep -q 'getenv("GRAPH500_NROOTS")' "$build/src/main.c" ||
            die "could not patch the root count in $build/src/main.c (has main.c changed?)"
        blog="$logs/build-$variant-$stamp.log"
        run_bounded "$limit" "$blog" "$blog.err" \
            make -C "$build/src" graph500_reference_bfs_sssp MPICC="$mpicc_base ${defs[*]}" || {
            rc=$?
            timed_out "$rc" "make"
            cat "$blog" "$blog.err" >&2
            die "building the reference failed (log: $blog)"
        }
        cat "$blog.err" >>"$blog" && rm -f "$blog.err"
        nwarn=$(grep -c 'warning:' "$blog" || true)
        note "built $bin ($nwarn compiler warnings; log: $blog)"
        echo "$recipe" >"$build/.recipe"
    fi

    # Run: BFS skipped, validation on.
    mpirun_args=(-np "$np")
    if mpirun --version 2>&1 | grep -qi 'open mpi\|openrte'; then
        mpirun_args=(--allow-run-as-root --oversubscribe -x SKIP_BFS=1 -x "GRAPH500_NROOTS=$roots" "${mpirun_args[@]}")
    fi
    # shellcheck disable=SC2206  # word splitting wanted
    [[ -z $mpirun_extra ]] || mpirun_args+=($mpirun_extra)
    rlog="$logs/graph500-s$scale-e$edgefactor-np$np-$stamp"
    note "reference: SKIP_BFS=1 GRAPH500_NROOTS=$roots mpirun ${mpirun_args[*]} $bin $scale $edgefactor  (logs: $rlog.{out,err})"
    t0=$(date +%s.%N)
    rc=0
    if ((${#gnutime[@]})); then
        SKIP_BFS=1 GRAPH500_NROOTS=$roots run_bounded "$limit" "$rlog.out" "$rlog.err" \
            "${gnutime[@]}" "$rlog.time" mpirun "${mpirun_args[@]}" "$bin" "$scale" "$edgefactor" || rc=$?
    else
        SKIP_BFS=1 GRAPH500_NROOTS=$roots run_bounded "$limit" "$rlog.out" "$rlog.err" \
            mpirun "${mpirun_args[@]}" "$bin" "$scale" "$edgefactor" || rc=$?
    fi
    t1=$(date +%s.%N)
    ((verbose)) && cat "$rlog.out" "$rlog.err"
    timed_out "$rc" "the reference"
    fail=
    ((rc == 0)) || fail="mpirun exited with status $rc"
    grep -q 'No results printed for invalid run' "$rlog.out" && fail="validation failed"
    grep -q 'Validation failed for this' "$rlog.err" && fail="validation failed"
    grep -q '^Validation Error' "$rlog.out" && fail="validation failed"
    grep -q '^AML: Fatal' "$rlog.out" && fail="AML initialisation failed"
    g500_field() { awk -v k="$1" '$0 ~ "^" k ":" { print $NF; exit }' "$rlog.out"; }
    g500_time=$(g500_field 'sssp median_time')
    g500_teps=$(g500_field 'sssp median_TEPS')
    g500_hteps=$(g500_field 'sssp harmonic_mean_TEPS')
    nbfs=$(g500_field 'NBFS')
    nprocs=$(g500_field 'num_mpi_processes')
    [[ -n $fail || -n $g500_time ]] || fail="no 'sssp median_time' in its output"
    if [[ -n $fail ]]; then
        tail -n 20 "$rlog.out" "$rlog.err" >&2
        die "reference run failed: $fail (logs: $rlog.out, $rlog.err)"
    fi
    [[ $nbfs == "$roots" ]] || note "warning: the reference ran $nbfs roots, not $roots"
    [[ $nprocs == "$np" ]] || note "warning: the reference reports $nprocs MPI processes, not $np"
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    rss=$(rss_mib "$(time_field "$rlog.time" 'Maximum resident set size')")
    echo "graph500 reference ($commit): SCALE $scale, edgefactor $edgefactor, $np MPI processes, $nbfs roots, validation passed"
    echo "  graph_generation $(g500_field graph_generation) s, construction_time $(g500_field construction_time) s, median_nedge $(g500_field median_nedge)"
    echo "  sssp median_time $g500_time s, sssp median_TEPS $g500_teps, sssp harmonic_mean_TEPS $g500_hteps, sssp median_validate $(g500_field 'sssp median_validate') s"
    echo "  whole run (generation, construction, warm-up, $nbfs x (SSSP + validation)): ${wall} s wall, peak RSS of one rank ${rss} MiB"
    g500_line="graph500,$np,1,$scale,$edgefactor,$g500_time,$g500_teps"
fi

# --------------------------------------------------------------------- ours --
ours_lines=()
if ((!skip_ours)); then
    command -v cargo >/dev/null 2>&1 || { note "cargo is missing (or pass --skip-ours)"; exit 2; }
    olog="$logs/gossamer-s$scale-e$edgefactor-p$processes-t$threads-$stamp"
    note "building gossamer-sssp (cargo build --release -p gossamer-sssp)"
    # No subshell here: run_bounded must run in this shell for the traps.
    cd "$root"
    rc=0
    run_bounded "$limit" "$olog.build.out" "$olog.build.err" \
        cargo build --release -q -p gossamer-sssp || rc=$?
    timed_out "$rc" "cargo build"
    if ((rc)); then
        cat "$olog.build.err" >&2
        die "cargo build -p gossamer-sssp failed"
    fi
    ours_cmd=(cargo run --release -q -p gossamer-sssp -- run --scale "$scale" --edgefactor "$edgefactor"
        --roots "$roots" --threads "$threads" --processes "$processes")
    note "ours: ${ours_cmd[*]}  (logs: $olog.{out,err})"
    t0=$(date +%s.%N)
    if ((${#gnutime[@]})); then
        run_bounded "$limit" "$olog.out" "$olog.err" "${gnutime[@]}" "$olog.time" "${ours_cmd[@]}" || rc=$?
    else
        run_bounded "$limit" "$olog.out" "$olog.err" "${ours_cmd[@]}" || rc=$?
    fi
    t1=$(date +%s.%N)
    ((verbose)) && cat "$olog.out" "$olog.err"
    timed_out "$rc" "gossamer-sssp"
    if ((rc)); then
        tail -n 20 "$olog.out" "$olog.err" >&2
        die "gossamer-sssp exited with status $rc (logs: $olog.out, $olog.err)"
    fi
    num='[0-9]+([.][0-9]*)?([eE][-+]?[0-9]+)?|inf|nan'
    num="($num)"
    mapfile -t ours_lines < <(cat "$olog.out" "$olog.err" | tr -d '\r' |
        grep -E "^result,[A-Za-z0-9_-]+,[0-9]+,[0-9]+,[0-9]+,[0-9]+,$num,$num\$" || true)
    printf '%s\n' "${ours_lines[@]}" | grep -q '^result,gossamer,' ||
        die "no 'result,gossamer,...' line in gossamer-sssp's output (logs: $olog.out, $olog.err)"
    for l in "${ours_lines[@]}"; do
        IFS=, read -r _ impl p t s e _ _ <<<"$l"
        [[ $s == "$scale" && $e == "$edgefactor" ]] ||
            note "warning: $impl reports SCALE $s edgefactor $e, not $scale/$edgefactor"
    done
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    rss=$(rss_mib "$(time_field "$olog.time" 'Maximum resident set size')")
    echo "gossamer-sssp: whole run ${wall} s wall, peak RSS of its largest process ${rss} MiB"
fi

# -------------------------------------------------------------------- table --
rows=()
[[ -z $g500_line ]] || rows+=("$g500_line")
for l in "${ours_lines[@]}"; do rows+=("${l#result,}"); done

echo
printf '%-10s %11s %16s %14s %16s\n' implementation 'procs x thr' 'median time/root' 'median TEPS' 'graph500_t / t'
for r in "${rows[@]}"; do
    IFS=, read -r impl p t _ _ tm teps <<<"$r"
    ratio=$(awk -v g="${g500_time:-}" -v x="$tm" 'BEGIN { if (g == "" || x + 0 <= 0) print "-"; else printf "%.3f", g / x }')
    printf '%-10s %11s %14.6g s %14.4g %16s\n' "$impl" "${p}x${t}" "$tm" "$teps" "$ratio"
done
gos_time=
for l in "${ours_lines[@]}"; do
    [[ $l == result,gossamer,* ]] && gos_time=$(cut -d, -f7 <<<"$l")
done
if [[ -n $g500_time && -n $gos_time ]]; then
    awk -v g="$g500_time" -v x="$gos_time" 'BEGIN {
        r = g / x
        verdict = (r > 1) ? "gossamer is faster" : "graph500 is faster or equal"
        printf "ratio graph500_time / gossamer_time = %.3f (%s)\n", r, verdict
    }'
fi

# ---------------------------------------------------------------------- csv --
if [[ -n $csv ]]; then
    mkdir -p "$(dirname "$csv")"
    [[ -s $csv ]] || echo "date,host,impl,processes,threads,scale,edgefactor,roots,median_time_s,median_teps" >"$csv"
    for r in "${rows[@]}"; do
        IFS=, read -r impl p t s e tm teps <<<"$r"
        echo "$stamp,${HOSTNAME:-$(uname -n)},$impl,$p,$t,$s,$e,$roots,$tm,$teps" >>"$csv"
    done
    note "appended ${#rows[@]} rows to $csv"
fi
