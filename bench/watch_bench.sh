#!/usr/bin/env bash
# What idle WatchJob streams cost Postgres and the scheduler: JOBS pending jobs, no watcher vs
# one idle watcher per job, then every job cancelled and every watcher checked to end. Starts a
# throw-away Postgres (fsync on, as in production), Redis and the scheduler on loopback, runs
# bench/watch_bench, and stops everything. Usage: bench/watch_bench.sh [JOBS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
jobs=${1:-1000}
source "$root/scripts/lib/pg.sh"

cmake --build "$build" --target ringmaster-scheduler watch_bench >/dev/null
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
  --redis-addr "127.0.0.1:$redis_port" --log-level warning >"$tmp/scheduler.log" 2>&1 &
scheduler=$!
pids+=($scheduler)
for _ in $(seq 100); do
  (echo >/dev/tcp/127.0.0.1/$grpc_port) 2>/dev/null && break
  sleep 0.1
done
echo "machine: $(nproc) cores; Postgres with fsync on; scheduler with its default flags"
# Sampled from the postgres database, so the sampling is not counted in ringmaster's figures.
"$build/bench/watch_bench" "127.0.0.1:$grpc_port" \
  "postgresql://postgres@127.0.0.1:$pg_port/postgres" "$scheduler" "$jobs"
