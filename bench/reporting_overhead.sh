#!/usr/bin/env bash
# Does streaming to ringmaster-metrics slow training? Runs the same 2-rank trainer job with and
# without --metrics-addr, alternating, ROUNDS times each, and prints every run's
# `total images/sec` and the ratio of the medians (goal: at least 0.99).
# Usage: bench/reporting_overhead.sh [ROUNDS] [STEPS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
rounds=${1:-5}
steps=${2:-150}
source "$root/scripts/lib/pg.sh"   # free_port
cmake --build "$build" --target ringmaster-metrics ringmaster-train >/dev/null
grpc_port=$(free_port); http_port=$(free_port)
"$build/services/metrics/ringmaster-metrics" --listen "127.0.0.1:$grpc_port" \
  --metrics-listen "127.0.0.1:$http_port" --insecure >/tmp/ringmaster-reporting-bench.log 2>&1 &
# Loopback only: the trainer's metrics stream in plaintext, as the service runs.
export RINGMASTER_INSECURE=1
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {
  mpirun -np 2 --bind-to none --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo \
    --mca oob_tcp_if_include lo "$build/trainer/ringmaster-train" --device cpu --model mlp-small \
    --steps "$steps" --log-every 1000000 "$@" | awk '/^total images\/sec:/ {print $3}'
}
with=(); without=()
for i in $(seq "$rounds"); do
  without+=("$(run)")
  with+=("$(run --metrics-addr "127.0.0.1:$grpc_port" --job-id "j-$(printf %04x "$i")" --queue bench)")
  echo "round $i: without ${without[-1]}, with ${with[-1]} images/sec"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
mw=$(median "${with[@]}"); mo=$(median "${without[@]}")
sent=$(curl -s "127.0.0.1:$http_port/metrics" | awk '/^ringmaster_metrics_samples_total/ {print $2}')
echo "median total images/sec: without reporting $mo, with reporting $mw"
echo "samples the metrics service kept: $sent (expected $((rounds * steps * 2)))"
awk -v a="$mw" -v b="$mo" 'BEGIN {printf "ratio with/without: %.3f (goal >= 0.99)\n", a / b}'
