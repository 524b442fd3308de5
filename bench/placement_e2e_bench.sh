#!/usr/bin/env bash
# End-to-end placement throughput: placements stored in Postgres and delivered to their workers
# per second, next to core placement of the same jobs in process. Starts a throw-away Postgres
# (fsync on, as in production), Redis and the scheduler on loopback, runs
# bench/placement_e2e_bench, prints the scheduler's placement latency histogram, and stops
# everything. Usage: bench/placement_e2e_bench.sh [WORKERS] [JOBS]
# RINGMASTER_BENCH_WHOLE_WORKER_RANKS=1 (a diagnostic) gives every rank 8 GPUs: the same GPUs
# move with about a fifth of the ranks, which separates per-rank from per-job costs.
#
# Scheduler flags, and why:
#   --heartbeat-timeout-ms 60000  the box may have 2 cores for the scheduler, Postgres and a
#                                 thousand simulated workers; a late heartbeat must not fail jobs
#   --pass-interval-ms 100        passes run on every change anyway (at most one per 20 ms)
#   --postgres-pool 8             the default; one writer commits, the rest serve reads
#   --log-level warning           one info line per job transition would be measured too
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
workers=${1:-1000}
jobs=${2:-10000}
source "$root/bench/lib/stack.sh"

[ -n "${RINGMASTER_BENCH_NO_BUILD:-}" ] ||
  cmake --build "$build" --target ringmaster-scheduler placement_e2e_bench >/dev/null
# Timing of WAL flushes only; fsync stays on.
PG_OPTS="-c track_wal_io_timing=on" stack_start --postgres-pool 8 --heartbeat-timeout-ms 60000 \
  --heartbeat-interval-ms 2000 --pass-interval-ms 100 --log-level warning
echo "machine: $(nproc) cores; Postgres with fsync on; scheduler flags: --postgres-pool 8" \
  "--heartbeat-timeout-ms 60000 --heartbeat-interval-ms 2000 --pass-interval-ms 100"

# CPU seconds (user + system) of the given processes, from /proc.
cpu_of() {
  awk -v t="$(ticks_of "$@")" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", t / hz}'
}
# Seconds on a CPU and seconds runnable but waiting for one (run queue), summed over every thread
# of the given processes, from /proc/*/task/*/schedstat. Waiting shows what co-tenants take.
sched_of() {
  local p files=()
  for p in "$@"; do files+=(/proc/"$p"/task/*/schedstat); done
  cat "${files[@]}" 2>/dev/null | awk '{r += $1; w += $2} END {printf "%.2f %.2f", r / 1e9, w / 1e9}'
}
# Once a second while the benchmark runs: CPU used by the scheduler, Postgres and Redis in that
# second, and the scheduler's own view (GPUs allocated, jobs pending) from /metrics.
sample() {
  local prev_s prev_p prev_r prev_t now_s now_p now_r now_t m first=1
  prev_s=$(cpu_of "$scheduler"); prev_p=$(cpu_of $(pg_pids)); prev_r=$(cpu_of "$redis")
  prev_t=$(date +%s.%N)
  while sleep 1; do
    if [ -e "$tmp/placing" ]; then
      if [ "$first" = 1 ]; then
        echo "$(sched_of "$scheduler") $(sched_of $(pg_pids))" >"$tmp/sched.start"
        first=0
      fi
      echo "$(sched_of "$scheduler") $(sched_of $(pg_pids))" >"$tmp/sched.end"
    fi
    now_s=$(cpu_of "$scheduler"); now_p=$(cpu_of $(pg_pids)); now_r=$(cpu_of "$redis")
    now_t=$(date +%s.%N)
    if [ -e "$tmp/placing" ]; then
      m=$(curl -s "http://127.0.0.1:$metrics_port/metrics")
      awk -v s="$now_s" -v ps="$prev_s" -v p="$now_p" -v pp="$prev_p" -v r="$now_r" \
        -v pr="$prev_r" -v t="$now_t" -v pt="$prev_t" \
        -v gpus="$(echo "$m" | awk '/^ringmaster_gpus_allocated/ {s += $2} END {print s + 0}')" \
        -v pending="$(echo "$m" | awk '/^ringmaster_queue_pending_jobs/ {s += $2} END {print s + 0}')" \
        'BEGIN {d = t - pt; printf "%.2f %.2f %.2f %s %s\n", (s - ps) / d, (p - pp) / d, (r - pr) / d, gpus, pending}'
    fi
    prev_s=$now_s; prev_p=$now_p; prev_r=$now_r; prev_t=$now_t
  done
}
sample >"$tmp/samples" &
sampler=$!
pids+=($sampler)
status=0
"$build/bench/placement_e2e_bench" "127.0.0.1:$grpc_port" "$url" "$workers" "$jobs" \
  "$scheduler" "$tmp/placing" || status=$?
kill "$sampler" 2>/dev/null || true
echo "  about once a second while placing (cores used since the last line; the box has $(nproc)):"
echo "    scheduler postgres redis | GPUs allocated | jobs pending"
awk '{printf "    %9s %8s %5s | %14s | %12s\n", $1, $2, $3, $4, $5}' "$tmp/samples"
if [ -s "$tmp/sched.start" ] && [ -s "$tmp/sched.end" ]; then
  paste "$tmp/sched.start" "$tmp/sched.end" | awk '{
    printf "  while placing, on a CPU vs runnable but waiting for one (all threads, seconds):\n"
    printf "    scheduler %.2f on CPU, %.2f waiting; postgres %.2f on CPU, %.2f waiting\n",
      $5 - $1, $6 - $2, $7 - $3, $8 - $4}'
fi
cpu=$(awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$scheduler/stat")
echo "  scheduler CPU time (user+system, whole run incl. submits): ${cpu} s"
echo "  scheduler placement latency (submit stored -> placement decided), from /metrics:"
curl -s "http://127.0.0.1:$metrics_port/metrics" |
  grep -E '^ringmaster_placement_latency_seconds_(bucket|sum|count)' | sed 's/^/    /'
if grep -qE 'lost|ERROR|error' "$tmp/scheduler.log"; then
  echo "  scheduler log warnings/errors (first 10):"
  grep -E 'lost|ERROR|error' "$tmp/scheduler.log" | head -10 | sed 's/^/    /'
fi
exit "$status"
