#!/usr/bin/env bash
# Where a burst of durable submits spends the machine's CPU: one submit-only run of
# bench/submit_bench (plaintext, no tokens) against a fresh stack (bench/lib/stack.sh), with the
# CPU seconds of the scheduler, Postgres (the postmaster and its backends), Redis and the
# benchmark's clients over the run, the machine's idle time, the scheduler's busiest threads and
# its group commits. For A/B runs: SCHEDULER_BIN=OLD and the new build, alternating.
# Usage: [SCHEDULER_BIN=...] [SCHEDULER_FLAGS="--submit-writers 2"] bench/submit_cpu.sh [CLIENTS] [JOBS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
clients=${1:-16}
jobs=${2:-20000}
source "$root/bench/lib/stack.sh"

[ -n "${RINGMASTER_BENCH_NO_BUILD:-}" ] ||
  cmake --build "$build" --target ringmaster-scheduler submit_bench >/dev/null
hz=$(getconf CLK_TCK)
idle_ticks() { awk '/^cpu / {print $5 + $6}' /proc/stat; }

STACK_TLS=0 STACK_AUTH=0 stack_start --postgres-pool "$clients" --log-level warning \
  ${SCHEDULER_FLAGS:-}
s0=$(ticks_of "$scheduler"); p0=$(ticks_of $(pg_pids)); r0=$(ticks_of "$redis"); i0=$(idle_ticks)
t0=$(date +%s.%N)
"$build/bench/submit_bench" "127.0.0.1:$grpc_port" "$url" "$clients" "$jobs" --submit-only \
  >"$tmp/out" &
bench=$!
# The client's own ticks, read until it exits; Postgres's backends, read while they live.
b=0; p1=$p0
while kill -0 "$bench" 2>/dev/null; do
  b=$(ticks_of "$bench"); p1=$(ticks_of $(pg_pids)); sleep 0.2
done
wait "$bench" || { cat "$tmp/out"; tail -20 "$tmp/scheduler.log"; exit 1; }
t1=$(date +%s.%N)
s1=$(ticks_of "$scheduler"); r1=$(ticks_of "$redis"); i1=$(idle_ticks)
cat "$tmp/out"
awk -v n="$jobs" -v hz="$hz" -v s=$((s1 - s0)) -v p=$((p1 - p0)) -v r=$((r1 - r0)) -v b="$b" \
  -v i=$((i1 - i0)) -v t0="$t0" -v t1="$t1" -v cores="$(nproc)" 'BEGIN {
  printf "CPU over the run (%.2f s on %d cores), seconds and ms per submit:\n", t1 - t0, cores
  printf "  scheduler %.2f (%.3f), Postgres %.2f (%.3f), Redis %.2f (%.3f), clients %.2f (%.3f); idle %.2f\n",
    s / hz, 1000 * s / hz / n, p / hz, 1000 * p / hz / n, r / hz, 1000 * r / hz / n,
    b / hz, 1000 * b / hz / n, i / hz }'
# Unnamed threads carry the binary's name: the writers, the pass loop, the Redis mirror.
for t in /proc/"$scheduler"/task/*; do
  echo "$(sed 's/.*) //' "$t/stat" | awk '{print $12 + $13}') $(basename "$t") $(cat "$t/comm")"
done >"$tmp/threads"
echo "  the scheduler's busiest threads (CPU seconds over its life):"
sort -rn "$tmp/threads" | head -4 | awk -v hz="$hz" '{printf "    %.2f  %s (%s)\n", $1 / hz, $3, $2}'
echo "  and by thread name:"
awk -v hz="$hz" '{t[$3] += $1; n[$3]++} END {for (c in t) printf "    %.2f  %s (%d threads)\n", t[c] / hz, c, n[c]}' \
  "$tmp/threads" | sort -rn
commit_summary
submit_wait_summary "$(awk '/SubmitJob via gRPC/ {for (i = 1; i < NF; i++) if ($i == "mean") print $(i + 1)}' "$tmp/out")"
stack_stop
