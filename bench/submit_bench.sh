#!/usr/bin/env bash
# Durable submit throughput next to the single-row INSERT rate of the same Postgres.
# Starts a throw-away Postgres (fsync on, as in production), Redis and the scheduler on
# loopback, runs bench/submit_bench, and stops everything. Usage: bench/submit_bench.sh [CLIENTS] [JOBS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
clients=${1:-16}
jobs=${2:-20000}
source "$root/bench/lib/stack.sh"

[ -n "${RINGMASTER_BENCH_NO_BUILD:-}" ] ||
  cmake --build "$build" --target ringmaster-scheduler submit_bench >/dev/null
stack_start --postgres-pool "$clients" --log-level warning
echo "machine: $(nproc) cores; Postgres 15 with fsync on; scheduler pool $clients connections"
"$build/bench/submit_bench" "127.0.0.1:$grpc_port" "$url" "$clients" "$jobs" || { tail -20 "$tmp/scheduler.log"; exit 1; }
# Where the scheduler's time went: its own histograms of group commits.
curl -s "http://127.0.0.1:$metrics_port/metrics" | awk '
  /^ringmaster_store_commit_seconds_sum/ {cs=$2} /^ringmaster_store_commit_seconds_count/ {cc=$2}
  /^ringmaster_store_batch_writes_sum/ {bs=$2} /^ringmaster_store_batch_writes_count/ {bc=$2}
  END { if (cc > 0) printf "  scheduler: %d transactions, %.1f writes each, %.2f ms each (mean)\n", cc, bs/bc, 1000*cs/cc }'
