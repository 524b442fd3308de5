#!/usr/bin/env bash
# Durable submits against single-row INSERTs of the same Postgres at several client counts, in
# plaintext: each count on a fresh stack (Postgres with fsync on, Redis, the scheduler), where
# bench/submit_bench runs the submits and then the INSERTs with as many clients. Prints a row per
# count and then each side's best rate over the counts, and their ratio: what the platform can
# store per second against what Postgres can, each at the concurrency that suits it (a single
# client count measures a submit's latency as much as the rate; bench/submit_bench.sh).
# Usage: [REPEAT=N] bench/submit_sweep.sh [CLIENTS ...]   (default: 8 16 32 64 128)
# REPEAT (default 1) runs the sweep N times; each row then shows the median of its runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(8 16 32 64 128)
jobs=${JOBS:-20000}
repeat=${REPEAT:-1}
source "$root/bench/lib/stack.sh"

[ -n "${RINGMASTER_BENCH_NO_BUILD:-}" ] ||
  cmake --build "$build" --target ringmaster-scheduler submit_bench >/dev/null
echo "machine: $(nproc) cores; Postgres 15 with fsync on; plaintext; $jobs operations each way"

declare -A submits inserts
for run in $(seq "$repeat"); do
  for c in "${counts[@]}"; do
    stack_start --postgres-pool "$c" --log-level warning ${SCHEDULER_FLAGS:-}
    out=$("$build/bench/submit_bench" "127.0.0.1:$grpc_port" "$url" "$c" "$jobs") ||
      { echo "$out"; tail -20 "$tmp/scheduler.log"; exit 1; }
    stack_stop
    s=$(echo "$out" | awk '/SubmitJob via gRPC/ {print $5; exit}')
    i=$(echo "$out" | awk '/single-row INSERT/ {print $5; exit}')
    echo "run $run, $c clients: $s submits/s, $i INSERTs/s"
    submits[$c]+=" $s"
    inserts[$c]+=" $i"
  done
done

echo "clients | submits/s | INSERTs/s | ratio"
best_s=0 best_s_at=0 best_i=0 best_i_at=0
for c in "${counts[@]}"; do
  s=$(echo "${submits[$c]}" | median)
  i=$(echo "${inserts[$c]}" | median)
  awk -v c="$c" -v s="$s" -v i="$i" 'BEGIN {printf "%7d | %9.0f | %9.0f | %5.2f\n", c, s, i, s / i}'
  if awk -v a="$s" -v b="$best_s" 'BEGIN {exit !(a > b)}'; then best_s=$s best_s_at=$c; fi
  if awk -v a="$i" -v b="$best_i" 'BEGIN {exit !(a > b)}'; then best_i=$i best_i_at=$c; fi
done
awk -v s="$best_s" -v sc="$best_s_at" -v i="$best_i" -v ic="$best_i_at" 'BEGIN {
  printf "best: %.0f submits/s (%d clients) against %.0f INSERTs/s (%d clients), ratio %.2f\n",
    s, sc, i, ic, s / i }'
