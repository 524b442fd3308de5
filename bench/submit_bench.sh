#!/usr/bin/env bash
# Durable submit throughput next to the single-row INSERT rate of the same Postgres.
# Starts a throw-away Postgres (fsync on, as in production), Redis and the scheduler on
# loopback, runs bench/submit_bench, and stops everything. Usage: bench/submit_bench.sh [CLIENTS] [JOBS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
clients=${1:-16}
jobs=${2:-20000}
source "$root/scripts/lib/pg.sh"

[ -n "${RINGMASTER_BENCH_NO_BUILD:-}" ] || cmake --build "$build" --target ringmaster-scheduler submit_bench >/dev/null
tmp=$(mktemp -d /tmp/ringmaster-bench.XXXXXX)
chmod 755 "$tmp"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pg_stop "$tmp/pg"
  rm -rf "$tmp"
}
trap cleanup EXIT

pg_port=$(free_port); redis_port=$(free_port); grpc_port=$(free_port); metrics_port=$(free_port)
pg_start "$tmp/pg" "$pg_port"
pg_as_owner "$PG_BIN/createdb" -h 127.0.0.1 -p "$pg_port" -U postgres ringmaster
url="postgresql://postgres@127.0.0.1:$pg_port/ringmaster"
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no >"$tmp/redis.log" 2>&1 &
pids+=($!)
"$build/services/scheduler/ringmaster-scheduler" --listen "127.0.0.1:$grpc_port" \
  --metrics-listen "127.0.0.1:$metrics_port" --postgres-url "$url" \
  --redis-addr "127.0.0.1:$redis_port" --postgres-pool "$clients" --log-level warning \
  >"$tmp/scheduler.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  (echo >/dev/tcp/127.0.0.1/$grpc_port) 2>/dev/null && break
  sleep 0.1
done
echo "machine: $(nproc) cores; Postgres 15 with fsync on; scheduler pool $clients connections"
"$build/bench/submit_bench" "127.0.0.1:$grpc_port" "$url" "$clients" "$jobs" || { tail -20 "$tmp/scheduler.log"; exit 1; }
# Where the scheduler's time went: its own histograms of group commits.
curl -s "http://127.0.0.1:$metrics_port/metrics" | awk '
  /^ringmaster_store_commit_seconds_sum/ {cs=$2} /^ringmaster_store_commit_seconds_count/ {cc=$2}
  /^ringmaster_store_batch_writes_sum/ {bs=$2} /^ringmaster_store_batch_writes_count/ {bc=$2}
  END { if (cc > 0) printf "  scheduler: %d transactions, %.1f writes each, %.2f ms each (mean)\n", cc, bs/bc, 1000*cs/cc }'
