#!/usr/bin/env bash
# The trainer's allreduce busbw against Open MPI's own MPI_Allreduce at the same sizes and
# ranks, measured by this one script: each size's busbw from both and their ratio.
# Usage: bench/allreduce_compare.sh [RANKS] [MAX_BYTES] [ITERS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
ranks=${1:-2}
max=${2:-16777216}
iters=${3:-20}
cmake --build "$build" --target ringmaster-train mpi_allreduce_baseline >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun -np "$ranks" --bind-to none --oversubscribe --mca btl tcp,self,vader
     --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
trainer=$("${mpi[@]}" "$build/trainer/ringmaster-train" --device cpu --benchmark allreduce \
  --min-bytes 1024 --max-bytes "$max" --iters "$iters" --warmup-iters 5 2>/dev/null)
baseline=$("${mpi[@]}" "$build/bench/mpi_allreduce_baseline" 1024 "$max" "$iters" 5 2>/dev/null)
echo "allreduce: $ranks ranks on one machine (shared memory and TCP over loopback), $iters iterations"
printf '%12s %14s %14s %8s\n' "bytes" "trainer busbw" "MPI busbw" "ratio"
join <(echo "$trainer" | awk '$1 ~ /^[0-9]+$/ {print $1, $7}' | sort -k1,1) \
     <(echo "$baseline" | awk '$1 ~ /^[0-9]+$/ {print $1, $4}' | sort -k1,1) |
  sort -n | awk '{r = ($3 > 0) ? $2 / $3 : 0; printf "%12d %11.2f GB/s %9.2f GB/s %8.2f\n", $1, $2, $3, r;
                  if ($1 >= 1048576) {s += r; n++}}
                 END {if (n) printf "mean ratio at 1 MiB and above: %.2f\n", s / n}'
