#!/usr/bin/env bash
# Cost of the collective counter (libringmaster_pmpi.so, docs/health.md) that the rank wrapper
# preloads into every rank, measured by this one script, alternating runs with and without it:
#  1. the trainer: `total images/sec` of ringmaster-train (CPU, RANKS ranks under mpirun), the
#     ratio of the medians with/without (goal: 1.00 within noise);
#  2. small collectives, where a per-call cost would show most: the time of 4-byte
#     MPI_Allreduce from bench/mpi_allreduce_baseline, ratio with/without, on RANKS ranks and
#     on 1 rank (no peer: the call itself, where the two atomic adds weigh most).
# "With" runs use a real rank channel (a file made the way ringmaster-rank makes it) so the
# counters land where they do in production.
# Usage: bench/pmpi_overhead.sh [ROUNDS] [RANKS] [STEPS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
rounds=${1:-5}
ranks=${2:-2}
steps=${3:-200}
[ -n "${RINGMASTER_BENCH_SKIP_BUILD:-}" ] ||
  cmake --build "$build" --target ringmaster-train mpi_allreduce_baseline ringmaster_pmpi >/dev/null
lib="$build/services/worker/libringmaster_pmpi.so"
channel=$(mktemp /dev/shm/ringmaster-bench-channel.XXXXXX)
trap 'rm -f "$channel"' EXIT
# One page whose first 8 bytes are the magic "RMCHAN01" (rank_channel.h).
python3 -c "import sys; open(sys.argv[1],'wb').write(b'RMCHAN01'.ljust(4096, b'\0'))" "$channel"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun -np "$ranks" --bind-to none --oversubscribe --mca btl tcp,self,vader
     --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
with=(-x LD_PRELOAD="$lib" -x RINGMASTER_RANK_CHANNEL="$channel")

train() {  # prints total images/sec
  "${mpi[@]}" "$@" "$build/trainer/ringmaster-train" --device cpu --model mlp-small \
    --steps "$steps" 2>/dev/null | awk '/total images\/sec:/ {print $3}'
}
small() {  # prints the time (us) of a 4-byte allreduce
  "${mpi[@]}" "$@" "$build/bench/mpi_allreduce_baseline" 4 4 20000 1000 2>/dev/null |
    awk '$1 == 4 {print $2}'
}
solo() {  # the same on one rank, more iterations
  mpirun -np 1 --bind-to none "$@" "$build/bench/mpi_allreduce_baseline" 4 4 1000000 10000 \
    2>/dev/null | awk '$1 == 4 {print $2}'
}
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

declare -a t_with t_without s_with s_without o_with o_without
for ((i = 1; i <= rounds; i++)); do
  t_without+=("$(train)"); t_with+=("$(train "${with[@]}")")
  s_without+=("$(small)"); s_with+=("$(small "${with[@]}")")
  o_without+=("$(solo)"); o_with+=("$(solo "${with[@]}")")
  echo "round $i: trainer images/sec without ${t_without[-1]} with ${t_with[-1]};" \
       "4-byte allreduce us without ${s_without[-1]} with ${s_with[-1]};" \
       "1 rank: without ${o_without[-1]} with ${o_with[-1]}"
done
entered=$(od -An -t u8 -j 64 -N 16 "$channel" | xargs)
tw=$(printf '%s\n' "${t_with[@]}" | median); to=$(printf '%s\n' "${t_without[@]}" | median)
sw=$(printf '%s\n' "${s_with[@]}" | median); so=$(printf '%s\n' "${s_without[@]}" | median)
echo "collectives counted in the channel (entered completed): $entered"
echo "trainer ($ranks ranks, mlp-small, $steps steps): median images/sec with $tw, without $to," \
     "ratio with/without $(awk -v a="$tw" -v b="$to" 'BEGIN {printf "%.3f", a / b}')"
echo "4-byte MPI_Allreduce ($ranks ranks): median us with $sw, without $so," \
     "ratio with/without $(awk -v a="$sw" -v b="$so" 'BEGIN {printf "%.3f", a / b}')"
ow=$(printf '%s\n' "${o_with[@]}" | median); oo=$(printf '%s\n' "${o_without[@]}" | median)
echo "4-byte MPI_Allreduce (1 rank): median us with $ow, without $oo," \
     "ratio with/without $(awk -v a="$ow" -v b="$oo" 'BEGIN {printf "%.3f", a / b}')"
