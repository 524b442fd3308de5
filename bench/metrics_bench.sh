#!/usr/bin/env bash
# Starts ringmaster-metrics on loopback, runs bench/metrics_bench against it, stops it.
# Usage: [METRICS_BIN=...] bench/metrics_bench.sh [SAMPLES_PER_STREAM] [BATCH]
# METRICS_BIN runs another build of ringmaster-metrics (A/B runs, alternating).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
per_stream=${1:-20000}
source "$root/scripts/lib/pg.sh"   # free_port
cmake --build "$build" --target ringmaster-metrics metrics_bench >/dev/null
grpc_port=$(free_port); http_port=$(free_port)
"${METRICS_BIN:-$build/services/metrics/ringmaster-metrics}" --listen "127.0.0.1:$grpc_port" \
  --metrics-listen "127.0.0.1:$http_port" --insecure >/tmp/ringmaster-metrics-bench.log 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
echo "machine: $(nproc) cores"
"$build/bench/metrics_bench" "127.0.0.1:$grpc_port" "$http_port" "$per_stream" "${2:-256}"
