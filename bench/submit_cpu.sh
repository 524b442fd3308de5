#!/usr/bin/env bash
# Where a burst of durable submits spends the machine's CPU: one submit-only run of
# bench/submit_bench (plaintext, no tokens) against a fresh stack (bench/lib/stack.sh), with the
# CPU seconds of the scheduler, Postgres (the postmaster and its backends), Redis and the
# benchmark's clients over the run, the machine's idle time, the scheduler's busiest threads, its
# group commits and a submit's wait by stage; then the same for the clients' single-row INSERTs
# (the baseline of bench/submit_bench.sh), and the CPU per operation of each over all
# processes, which caps what the cores can do. For A/B runs: SCHEDULER_BIN=OLD and the new
# build, alternating.
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
# One run of submit_bench in MODE (--submit-only or --insert-only) with the CPU seconds of
# each process over it: sets s, p, r, b, i (ticks) and secs, and leaves its output in $tmp/out.
measure() {
  local s0 p0 r0 i0 t0 t1 s1 r1 i1 p1 bench
  s0=$(ticks_of "$scheduler"); p0=$(pg_ticks); r0=$(ticks_of "$redis"); i0=$(idle_ticks)
  t0=$(date +%s.%N)
  "$build/bench/submit_bench" "127.0.0.1:$grpc_port" "$url" "$clients" "$jobs" "$1" >"$tmp/out" &
  bench=$!
  # The client's own ticks, read until it exits.
  b=0
  while kill -0 "$bench" 2>/dev/null; do
    b=$(ticks_of "$bench"); sleep 0.2
  done
  wait "$bench" || { cat "$tmp/out"; tail -20 "$tmp/scheduler.log"; exit 1; }
  t1=$(date +%s.%N)
  s1=$(ticks_of "$scheduler"); p1=$(pg_ticks); r1=$(ticks_of "$redis"); i1=$(idle_ticks)
  s=$((s1 - s0)); p=$((p1 - p0)); r=$((r1 - r0)); i=$((i1 - i0))
  secs=$(awk -v a="$t0" -v z="$t1" 'BEGIN {print z - a}')
  cat "$tmp/out"
}

measure --submit-only
submit_ms=$(awk -v n="$jobs" -v hz="$hz" -v t=$((s + p + r + b)) 'BEGIN {print 1000 * t / hz / n}')
awk -v n="$jobs" -v hz="$hz" -v s="$s" -v p="$p" -v r="$r" -v b="$b" -v i="$i" \
  -v secs="$secs" -v cores="$(nproc)" 'BEGIN {
  printf "CPU over the run (%.2f s on %d cores), seconds and ms per submit:\n", secs, cores
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
# The baseline's CPU the same way: the same clients' single-row INSERTs against the same Postgres
# (the scheduler idles meanwhile). CPU per operation over every process bounds what the cores
# can do even if nothing ever waited.
measure --insert-only
awk -v n="$jobs" -v hz="$hz" -v p="$p" -v b="$b" -v i="$i" -v per_submit="$submit_ms" \
  -v cores="$(nproc)" 'BEGIN {
  ins = 1000 * (p + b) / hz / n
  printf "  INSERT CPU, seconds and ms per insert: Postgres %.2f (%.3f), clients %.2f (%.3f); idle %.2f\n",
    p / hz, 1000 * p / hz / n, b / hz, 1000 * b / hz / n, i / hz
  printf "CPU per operation, all processes: submit %.3f ms, INSERT %.3f ms; %d cores can do at most %.0f submits/s, %.0f INSERTs/s\n",
    per_submit, ins, cores, 1000 * cores / per_submit, 1000 * cores / ins }'
stack_stop
