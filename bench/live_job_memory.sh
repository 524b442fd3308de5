#!/usr/bin/env bash
# What a live job costs the scheduler's memory, for --max-live-jobs: the scheduler's resident
# memory with no job, then after JOBS and 2 x JOBS pending jobs (no workers: they stay
# PENDING), submitted by bench/submit_bench (4-rank trainer jobs). Starts a throw-away
# Postgres, Redis and the scheduler on loopback, and stops everything.
# Usage: bench/live_job_memory.sh [JOBS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
jobs=${1:-20000}
source "$root/bench/lib/stack.sh"

cmake --build "$build" --target ringmaster-scheduler submit_bench >/dev/null
stack_start --log-level warning
rss() { awk '/VmRSS/ {print $2}' "/proc/$scheduler/status"; }
submit() {
  "$build/bench/submit_bench" "127.0.0.1:$grpc_port" "$url" 16 "$jobs" --submit-only >/dev/null
  sleep 2  # the writer's last batches
}
empty=$(rss)
submit
one=$(rss)
submit
two=$(rss)
echo "scheduler resident memory: $empty KiB with no job, $one KiB with $jobs pending," \
  "$two KiB with $((2 * jobs))"
awk -v a="$empty" -v b="$two" -v n="$((2 * jobs))" \
  'BEGIN { printf "%.1f KiB per pending job\n", (b - a) / n }'
stack_stop
