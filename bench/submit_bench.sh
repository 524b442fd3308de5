#!/usr/bin/env bash
# Durable submit throughput three ways: with TLS and bearer-token checks (every submit
# authenticated, authorized and written to the audit trail), in plaintext with the same token
# checks, and in plaintext without tokens; and next to the single-row INSERT rate of the same
# Postgres. For each: starts a throw-away Postgres (fsync on, as in production), Redis and the
# scheduler on loopback, runs bench/submit_bench, and stops everything. Prints the
# TLS/plaintext throughput ratio (target: at least 0.9), and tokens/plaintext, which tells the
# token checks' and audit trail's share of the cost from TLS's.
# Usage: [ROUNDS=3] [SCHEDULER_FLAGS="--submit-writers 6"] bench/submit_bench.sh [CLIENTS] [JOBS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
clients=${1:-16}
jobs=${2:-20000}
source "$root/bench/lib/stack.sh"

[ -n "${RINGMASTER_BENCH_NO_BUILD:-}" ] ||
  cmake --build "$build" --target ringmaster-scheduler submit_bench >/dev/null
echo "machine: $(nproc) cores; Postgres 15 with fsync on; scheduler pool $clients connections"

# ROUNDS rounds (default 3) of the three, in a rotating order, each on a fresh stack; the
# INSERT comparison only in the first. The ratios are of the medians: one round on a busy
# machine swings either way by a third.
rounds=${ROUNDS:-3}
declare -A rates=([plaintext]="" [tokens]="" [tls]="")
for round in $(seq "$rounds"); do
  case $((round % 3)) in
    1) order=(plaintext tokens tls) ;;
    2) order=(tls plaintext tokens) ;;
    0) order=(tokens tls plaintext) ;;
  esac
  for transport in "${order[@]}"; do
    STACK_TLS=$([ $transport = tls ] && echo 1 || echo 0) \
      STACK_AUTH=$([ $transport = tokens ] && echo 1 || echo 0) \
      stack_start --postgres-pool "$clients" --log-level warning ${SCHEDULER_FLAGS:-}
    extra=(--submit-only)
    [ "$round" = 1 ] && [ $transport = plaintext ] && extra=()
    out=$("$build/bench/submit_bench" "127.0.0.1:$grpc_port" "$url" "$clients" "$jobs" "${extra[@]}") ||
      { echo "$out"; tail -20 "$tmp/scheduler.log"; exit 1; }
    echo "round $round ($transport): $out"
    commit_summary
    rates[$transport]+=" $(echo "$out" | awk '/SubmitJob via gRPC/ {print $5; exit}')"
    stack_stop
  done
done
tls=$(echo "${rates[tls]}" | median)
tokens=$(echo "${rates[tokens]}" | median)
plain=$(echo "${rates[plaintext]}" | median)
echo "submits/s per round: TLS${rates[tls]}; plaintext with tokens${rates[tokens]}; plaintext${rates[plaintext]}"
awk -v t="$tokens" -v p="$plain" 'BEGIN {
  printf "plaintext with tokens vs plaintext (medians): %.0f vs %.0f submits/s, ratio %.2f\n", t, p, t / p }'
awk -v t="$tls" -v p="$plain" 'BEGIN {
  printf "TLS vs plaintext (medians): %.0f vs %.0f submits/s, ratio %.2f (target >= 0.90)\n", t, p, t / p }'
