#!/usr/bin/env bash
# Cost of libringmaster_pmpi.so (docs/health.md) on a tight point-to-point loop, where its
# per-call bookkeeping (the rank's MPI position, stored at the entry to and exit from every
# blocking call) weighs most. bench/mpi_pingpong runs, in one process, alternating blocks of
# 1,000 iterations through the MPI_ names (the library's, when preloaded) and through the PMPI_
# names (never the library's), so both arms share the moment and the machine's load; this
# script runs it ROUNDS times with the library preloaded and as many without (the control: both
# arms are then the same calls), alternating, on:
#  1. 2 ranks on one host (shared memory): MPI_Send/MPI_Recv ping-pong of 8 bytes;
#  2. 1 rank: MPI_Sendrecv of 8 bytes to itself (no peer: the call alone, the worst case).
# It prints every run, then per case the median ratio of the MPI_ arm to the PMPI_ arm with the
# library (its cost: goal at least 0.99), the same without it (the control, which shows the
# method's own error), and the median rates of the separate runs with and without the library.
# "With" runs give each rank a rank channel of its own, as ringmaster-rank does (one channel
# shared by two busy ranks would bounce its cache line between their cores); the blocking MPI
# calls rank 0's channel counted are printed at the end, so a run where the preload did not
# take shows. Both arms start the program through the same small shell line.
# Usage: bench/pmpi_p2p_overhead.sh [ROUNDS] [ITERS_2_RANKS] [ITERS_1_RANK]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
rounds=${1:-7}
iters=${2:-1000000}
solo_iters=${3:-4000000}
[ -n "${RINGMASTER_BENCH_SKIP_BUILD:-}" ] ||
  cmake --build "$build" --target mpi_pingpong ringmaster_pmpi >/dev/null
lib="$build/services/worker/libringmaster_pmpi.so"
program="$build/bench/mpi_pingpong"
channel=$(mktemp /dev/shm/ringmaster-bench-channel.XXXXXX)
trap 'rm -f "$channel" "$channel".0 "$channel".1' EXIT
# One page per rank whose first 8 bytes are the magic "RMCHAN01" (rank_channel.h).
for r in 0 1; do
  python3 -c "import sys; open(sys.argv[1],'wb').write(b'RMCHAN01'.ljust(4096, b'\0'))" \
    "$channel.$r"
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --bind-to none --mca btl self,vader -x BENCH_CHANNEL="$channel")
with=(-x LD_PRELOAD="$lib")
# Each rank's channel by its rank, set in the rank's own environment.
launch=(/bin/sh -c 'RINGMASTER_RANK_CHANNEL=$BENCH_CHANNEL.$OMPI_COMM_WORLD_RANK exec "$0" "$@"')

run() {  # NP ITERS [mpirun options]: "MPI_RATE PMPI_RATE RATIO"
  local np=$1 n=$2
  shift 2
  "${mpi[@]}" -np "$np" "$@" "${launch[@]}" "$program" "$n" $((n / 10)) 2>/dev/null |
    awk '/round trips\/s/ {print $5, $8, $10}'
}
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.4f", a / b}'; }

declare -a pw po sw so
for ((i = 1; i <= rounds; i++)); do
  # Alternate which goes first, so neither always runs on a machine just warmed by the other.
  if ((i % 2)); then
    po+=("$(run 2 "$iters")"); pw+=("$(run 2 "$iters" "${with[@]}")")
    so+=("$(run 1 "$solo_iters")"); sw+=("$(run 1 "$solo_iters" "${with[@]}")")
  else
    pw+=("$(run 2 "$iters" "${with[@]}")"); po+=("$(run 2 "$iters")")
    sw+=("$(run 1 "$solo_iters" "${with[@]}")"); so+=("$(run 1 "$solo_iters")")
  fi
  echo "round $i (MPI_ rate, PMPI_ rate, ratio): 2 ranks with ${pw[-1]}, without ${po[-1]};" \
       "1 rank with ${sw[-1]}, without ${so[-1]}"
done
state=$(od -An -t u8 -j 192 -N 8 "$channel.0" | xargs)  # mpi_state: calls in bits 8-63
echo "blocking MPI calls rank 0's channel counted over the runs with the library: $((state >> 8))"
field() { printf '%s\n' "${@:2}" | awk -v f="$1" '{print $f}' | median; }
report() {  # NAME ITERS then the runs with, "--", the runs without
  local name=$1 n=$2
  shift 2
  local -a with_runs=() without_runs=()
  while [ "$1" != "--" ]; do with_runs+=("$1"); shift; done
  shift
  without_runs=("$@")
  local rw ro
  rw=$(field 1 "${with_runs[@]}"); ro=$(field 1 "${without_runs[@]}")
  echo "$name ($n iterations, $rounds runs each): median MPI_/PMPI_ ratio with the library" \
       "$(field 3 "${with_runs[@]}"), without it (control) $(field 3 "${without_runs[@]}");" \
       "separate runs: median rate with $rw, without $ro, ratio $(ratio "$rw" "$ro")"
}
report "2-rank MPI_Send/MPI_Recv ping-pong, round trips/s" "$iters" "${pw[@]}" -- "${po[@]}"
report "1-rank MPI_Sendrecv to itself, calls/s" "$solo_iters" "${sw[@]}" -- "${so[@]}"
