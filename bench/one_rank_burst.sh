#!/usr/bin/env bash
# Trivial one-rank jobs (`true`, one t4 each) through a cluster shaped like the quickstart's:
# Postgres (fsync on), Redis, the scheduler and two workers on 127.0.0.2 and .3 with 2 simulated
# t4 GPUs each (4 devices), in plaintext. bench/one_rank_burst submits them from CLIENTS clients
# and waits until every one ended: first JOBS jobs started directly (the default for one rank),
# then MPIRUN_JOBS jobs that ask for mpirun (`use_mpirun`, every one-rank job's launch before),
# on the same cluster. Prints each side's rate from the first submit to the last end, the ratio,
# and the CPU the scheduler and the two workers spent per job on each side (their processes and
# everything they started: wrappers, mpirun, orted, ringmaster-rsh, `true`).
# Usage: [CLIENTS=8] [JOBS=2000] [MPIRUN_JOBS=200] bench/one_rank_burst.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
clients=${CLIENTS:-8}
jobs=${JOBS:-2000}
mpirun_jobs=${MPIRUN_JOBS:-200}
source "$root/bench/lib/stack.sh"

[ -n "${RINGMASTER_BENCH_NO_BUILD:-}" ] ||
  cmake --build "$build" --target ringmaster-platform one_rank_burst >/dev/null
echo "machine: $(nproc) cores; Postgres 15 with fsync on; plaintext; 2 workers x 2 simulated t4"

stack_start --log-level warning
stack_quickstart_workers burst

# CPU ticks of the scheduler, the workers and every process they started, ended ones included
# (a process's own ticks plus those of the children it reaped: /proc/PID/stat fields 14-17).
ticks_with_children() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13 + $14 + $15}'; }
cluster_ticks() {  # "SCHEDULER WORKERS" (the workers with what they started)
  local workers_total=0 p
  for p in "${workers[@]}"; do workers_total=$((workers_total + $(ticks_with_children "$p"))); done
  echo "$(ticks_with_children "$scheduler") $workers_total"
}
hz=$(getconf CLK_TCK)

# Warm-up: binaries in the page cache, the first placement.
"$build/bench/one_rank_burst" "127.0.0.1:$grpc_port" 2 8 warm >/dev/null
"$build/bench/one_rank_burst" "127.0.0.1:$grpc_port" 2 8 warm-mpirun --use-mpirun >/dev/null

# RUN JOBS [--use-mpirun]: prints the bench's lines, then "RATE MS_CPU_PER_JOB SCHEDULER_MS
# WORKERS_MS" (CPU per job: in all, the scheduler's, the workers' with what they started).
side() {
  local s0 w0 s1 w1 out rate
  read -r s0 w0 < <(cluster_ticks)
  out=$("$build/bench/one_rank_burst" "127.0.0.1:$grpc_port" "$clients" "$2" "$1" ${3:-}) ||
    { echo "$out" >&2; tail -20 "$tmp/scheduler.log" "$tmp"/w*.log >&2; exit 1; }
  read -r s1 w1 < <(cluster_ticks)
  echo "$out" >&2
  rate=$(echo "$out" | sed -n 's/.*: \([0-9.]*\) jobs\/s submit to end.*/\1/p')
  awk -v r="$rate" -v s=$((s1 - s0)) -v w=$((w1 - w0)) -v hz="$hz" -v n="$2" \
    'BEGIN {printf "%s %.2f %.2f %.2f\n", r, 1000 * (s + w) / hz / n, 1000 * s / hz / n, 1000 * w / hz / n}'
}
read -r direct_rate direct_cpu direct_s direct_w < <(side direct "$jobs")
read -r mpirun_rate mpirun_cpu mpirun_s mpirun_w < <(side mpirun "$mpirun_jobs" --use-mpirun)
echo "side | jobs | jobs/s submit to end | CPU per job: all | scheduler | workers and what they ran"
echo "started directly | $jobs | $direct_rate | $direct_cpu ms | $direct_s ms | $direct_w ms"
echo "under mpirun (use_mpirun) | $mpirun_jobs | $mpirun_rate | $mpirun_cpu ms | $mpirun_s ms | $mpirun_w ms"
awk -v d="$direct_rate" -v m="$mpirun_rate" -v dc="$direct_cpu" -v mc="$mpirun_cpu" \
  'BEGIN {printf "direct / mpirun: %.1fx the rate, %.2fx the CPU per job\n", d / m, dc / mc}'
