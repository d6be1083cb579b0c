#!/usr/bin/env bash
# Barrier latency and broadcast throughput (64-byte messages) of
# gossamer::objects against Open MPI's MPI_Barrier and MPI_Ibcast, over
# P = 2, 4, 8 processes of one host (one worker thread per process on our
# side, one rank per process on MPI's), run in turn within each repetition.
#
# Builds the small C program scripts/mpi/objects.c with mpicc OUTSIDE the
# repository (in $HOME/.cache/gossamer/mpi-objects) and our
# gossamer/examples/objects_bench.rs in release mode, then prints
#
#   processes,mpi_barrier_us,gsm_barrier_us,barrier_ratio,mpi_bcast_msgs_s,gsm_bcast_msgs_s,bcast_ratio
#
# with the median over the repetitions of each program's own median
# (barrier_ratio = gossamer / MPI time: above 1 means slower; bcast_ratio =
# gossamer / MPI throughput: above 1 means faster). Needs Debian's
# openmpi-bin and libopenmpi-dev.
set -euo pipefail

prog=${0##*/}
root=$(cd "$(dirname "$0")/.." && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/gossamer/mpi-objects"

procs_list="2 4 8"
rounds=2000
messages=20000
inner_reps=5
reps=3
limit=180

usage() {
    cat <<USAGE
usage: $prog [-P "P1 P2 ..."] [-b ROUNDS] [-m MESSAGES] [-r REPS] [-T SECONDS]

  -P LIST     process counts (default: "$procs_list")
  -b ROUNDS   barriers per timed repetition (default: $rounds)
  -m MESSAGES broadcast messages per timed repetition (default: $messages)
  -r REPS     runs of each program per process count (default: $reps)
  -T SECONDS  time limit of one run (default: $limit)
USAGE
}

while getopts "P:b:m:r:T:h" o; do
    case $o in
        P) procs_list=$OPTARG ;;
        b) rounds=$OPTARG ;;
        m) messages=$OPTARG ;;
        r) reps=$OPTARG ;;
        T) limit=$OPTARG ;;
        h) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done

command -v mpicc >/dev/null || { echo "$prog: mpicc missing (apt-get install -y libopenmpi-dev)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "$prog: mpirun missing (apt-get install -y openmpi-bin)" >&2; exit 1; }

mkdir -p "$cache"
mpicc -O2 -o "$cache/objects" "$root/scripts/mpi/objects.c"
(cd "$root" && cargo build --release -q -p gossamer --example objects_bench)
gsm="$root/target/release/examples/objects_bench"

mpi_flags=(--oversubscribe)
[ "$(id -u)" = 0 ] && mpi_flags+=(--allow-run-as-root)

field() { awk -v k="$1" '$1 == k { print $2 }'; }
med() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "processes,mpi_barrier_us,gsm_barrier_us,barrier_ratio,mpi_bcast_msgs_s,gsm_bcast_msgs_s,bcast_ratio"
for p in $procs_list; do
    mb="" gb="" mc="" gc=""
    for _ in $(seq "$reps"); do
        out=$(timeout "$limit" mpirun "${mpi_flags[@]}" -np "$p" "$cache/objects" "$rounds" "$messages" "$inner_reps")
        mb+=" $(field barrier_us_median <<<"$out")"
        mc+=" $(field bcast_msgs_per_s_median <<<"$out")"
        # A long silence limit: on an oversubscribed machine a rank may go
        # unscheduled for more than the default 1.5 s.
        out=$(GOSSAMER_SILENCE_MS=${GOSSAMER_SILENCE_MS:-20000} GOSSAMER_PROCESSES=$p timeout "$limit" "$gsm" "$rounds" "$messages" "$inner_reps")
        gb+=" $(field barrier_us_median <<<"$out")"
        gc+=" $(field bcast_msgs_per_s_median <<<"$out")"
    done
    echo "# P=$p runs: mpi barrier$mb; gossamer barrier$gb; mpi bcast$mc; gossamer bcast$gc" >&2
    mb=$(med <<<"$mb") gb=$(med <<<"$gb") mc=$(med <<<"$mc") gc=$(med <<<"$gc")
    awk -v p="$p" -v mb="$mb" -v gb="$gb" -v mc="$mc" -v gc="$gc" \
        'BEGIN { printf "%d,%.3f,%.3f,%.2f,%.0f,%.0f,%.2f\n", p, mb, gb, gb / mb, mc, gc, gc / mc }'
done
