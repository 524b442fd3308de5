#!/usr/bin/env bash
# Job arrays through a cluster shaped like the quickstart's: Postgres (fsync on), Redis, the
# scheduler and two workers on 127.0.0.2 and .3 with 2 simulated t4 GPUs each (4 devices), in
# plaintext, driven by ringctl as a user would.
#   1. A TASKS-task array of `true` (one t4 each) with parallelism 4: submit to SUCCEEDED (goal,
#      issue 32: 1,000 tasks in at most 20 s), and the CPU the scheduler and the workers (with
#      everything they started) spent per task.
#   2. A BIG-task array (goal: 100,000 accepted in one call in under 2 s): the submit's time;
#      `ringctl list` (the array as one line) and `ringctl list --array` of its created tasks, a
#      page of 1,000 at a time; then `ringctl cancel` and the time until no task of it is
#      live (goal: under 5 s).
# Usage: [TASKS=1000] [BIG=100000] bench/array_burst.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
tasks=${TASKS:-1000}
big=${BIG:-100000}
source "$root/bench/lib/stack.sh"

[ -n "${RINGMASTER_BENCH_NO_BUILD:-}" ] || cmake --build "$build" --target ringmaster-platform >/dev/null
echo "machine: $(nproc) cores; Postgres 15 with fsync on; plaintext; 2 workers x 2 simulated t4"

stack_start --log-level warning
stack_quickstart_workers array

ticks_with_children() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13 + $14 + $15}'; }
workers_ticks() {
  local total=0 p
  for p in "${workers[@]}"; do total=$((total + $(ticks_with_children "$p"))); done
  echo "$total"
}
hz=$(getconf CLK_TCK)
now_ms() { date +%s%3N; }
# One field of `ringctl get ID -o json` (protobuf JSON; absent fields are zero).
field() { ringctl get "$1" -o json | python3 -c "import json,sys; j=json.load(sys.stdin); print(eval(sys.argv[1]))" "$2"; }

# Warm-up: binaries in the page cache, the first placements.
ringctl submit --name warm --gpus-per-replica 1 --gpu-type t4 --array 8%4 --wait -- true >/dev/null

s0=$(ticks_with_children "$scheduler") w0=$(workers_ticks)
t0=$(now_ms)
id=$(ringctl submit --name sweep --gpus-per-replica 1 --gpu-type t4 --array "0-$((tasks - 1))%4" -- true)
# Watched (one stream; polling would spend the CPU the cluster is measured on).
ringctl watch "$id" >/dev/null || true
t1=$(now_ms)
[ "$(field "$id" "j['state']")" = JOB_STATE_SUCCEEDED ] || { ringctl get "$id" >&2; exit 1; }
s1=$(ticks_with_children "$scheduler") w1=$(workers_ticks)
succeeded=$(field "$id" "j['array_status'].get('succeeded', 0)")
awk -v n="$tasks" -v ok="$succeeded" -v ms=$((t1 - t0)) -v s=$((s1 - s0)) -v w=$((w1 - w0)) -v hz="$hz" 'BEGIN {
  printf "array of %d x true, parallelism 4: %d succeeded in %.1f s submit to SUCCEEDED (%.1f tasks/s); CPU per task: scheduler %.2f ms, workers and what they ran %.2f ms\n",
    n, ok, ms / 1000, n / (ms / 1000), 1000 * s / hz / n, 1000 * w / hz / n }'

t0=$(now_ms)
big_id=$(ringctl submit --name huge --gpus-per-replica 1 --gpu-type t4 --array "$big" -- sleep 600)
t1=$(now_ms)
echo "array of $big tasks: accepted in $((t1 - t0)) ms (ringctl submit, process start included)"
sleep 1  # the first pass creates its window of tasks
t0=$(now_ms)
rows=$(ringctl list | grep -c "$big_id" || true)
t1=$(now_ms)
echo "ringctl list: the array is $rows line(s), listed in $((t1 - t0)) ms"
t0=$(now_ms)
listed=$(ringctl list --array "$big_id" --limit 0 --page-size 1000 | grep -c "^$big_id-" || true)
t1=$(now_ms)
created=$(field "$big_id" "sum(j['array_status'].get(k, 0) for k in ('pending', 'running', 'succeeded', 'failed', 'cancelled'))")
echo "ringctl list --array: $listed tasks (of $created created, $big in all) in pages of 1000, in $((t1 - t0)) ms"
t0=$(now_ms)
ringctl cancel "$big_id" >/dev/null
t1=$(now_ms)
until [ "$(field "$big_id" "j['array_status'].get('pending', 0) + j['array_status'].get('running', 0)")" = 0 ]; do
  sleep 0.05
done
t2=$(now_ms)
echo "ringctl cancel: answered in $((t1 - t0)) ms; no task live $((t2 - t0)) ms after the call; $(field "$big_id" "j['array_status'].get('cancelled', 0)") counted cancelled"
