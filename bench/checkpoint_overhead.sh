#!/usr/bin/env bash
# What do checkpoints cost a training run? Runs the same 2-rank trainer with no checkpoint
# directory, with one and --checkpoint-every 0 (only the per-step agreement allreduce), and
# with one and --checkpoint-every N (agreement plus a checkpoint every N steps), alternating,
# ROUNDS times each; prints every run's `total images/sec` and the ratios of the medians to
# the run without checkpoints.
# Usage: bench/checkpoint_overhead.sh [ROUNDS] [STEPS] [EVERY]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
rounds=${1:-5}
steps=${2:-150}
every=${3:-50}
cmake --build "$build" --target ringmaster-train >/dev/null
dir=$(mktemp -d /tmp/ringmaster-checkpoint-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {
  rm -rf "$dir"/*
  # One warm-up step: the checkpoints (multiples of EVERY) fall inside the timed steps.
  mpirun -np 2 --bind-to none --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo \
    --mca oob_tcp_if_include lo "$build/trainer/ringmaster-train" --device cpu --model mlp-small \
    --steps "$steps" --warmup-steps 1 --log-every 1000000 "$@" |
    awk '/^total images\/sec:/ {print $3}'
}
none=(); agree=(); saving=()
for i in $(seq "$rounds"); do
  none+=("$(run)")
  agree+=("$(run --checkpoint-dir "$dir" --checkpoint-every 0)")
  saving+=("$(run --checkpoint-dir "$dir" --checkpoint-every "$every")")
  echo "round $i: no checkpoints ${none[-1]}, agreement only ${agree[-1]}," \
    "checkpoint every $every steps ${saving[-1]} images/sec"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
mn=$(median "${none[@]}"); ma=$(median "${agree[@]}"); ms=$(median "${saving[@]}")
echo "median total images/sec: none $mn, agreement only $ma, every $every steps $ms"
awk -v a="$ma" -v s="$ms" -v n="$mn" -v e="$every" 'BEGIN {
  printf "ratio agreement-only/none: %.3f; checkpoint-every-%d/none: %.3f\n", a / n, e, s / n }'
