#!/usr/bin/env bash
# What idle WatchJob streams cost Postgres and the scheduler: JOBS pending jobs, no watcher vs
# one idle watcher per job, then every job cancelled and every watcher checked to end. Starts a
# throw-away Postgres (fsync on, as in production), Redis and the scheduler on loopback, runs
# bench/watch_bench, and stops everything. Usage: bench/watch_bench.sh [JOBS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
jobs=${1:-1000}
source "$root/bench/lib/stack.sh"

cmake --build "$build" --target ringmaster-scheduler watch_bench >/dev/null
stack_start --log-level warning
echo "machine: $(nproc) cores; Postgres with fsync on; scheduler with its default flags"
# Sampled from the postgres database, so the sampling is not counted in ringmaster's figures.
"$build/bench/watch_bench" "127.0.0.1:$grpc_port" \
  "postgresql://postgres@127.0.0.1:$pg_port/postgres" "$scheduler" "$jobs"
