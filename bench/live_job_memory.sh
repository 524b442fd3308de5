#!/usr/bin/env bash
# What a live job costs the scheduler's memory, for --max-live-jobs and --max-live-spec-mib:
# the scheduler's resident memory with no job, then after JOBS and 2 x JOBS pending jobs (no
# workers: they stay PENDING), submitted by bench/submit_bench (4-rank trainer jobs); then
# after BIG more jobs of the largest spec the scheduler takes (argv and env at their limits),
# submitted with ringctl. Starts a throw-away Postgres, Redis and the scheduler on loopback,
# and stops everything.
# Usage: bench/live_job_memory.sh [JOBS] [BIG]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
jobs=${1:-20000}
big=${2:-200}
source "$root/bench/lib/stack.sh"

cmake --build "$build" --target ringmaster-scheduler submit_bench ringctl >/dev/null
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

# The largest spec: 64 env values of 4096 bytes and 16 arguments of 4096 bytes (64 KiB).
spec=$tmp/big-spec.yaml
value=$(head -c 4096 /dev/zero | tr '\0' v)
{
  echo "name: big"
  echo "replicas: 1"
  echo "command:"
  echo "  argv:"
  for i in $(seq 16); do echo "    - $value"; done
  echo "  env:"
  for i in $(seq 64); do echo "    E$i: $value"; done
} >"$spec"
spec_kib=$(( (16 * 4096 + 64 * (4096 + 3)) / 1024 ))
for i in $(seq "$big"); do
  "$build/cli/ringctl" --scheduler "127.0.0.1:$grpc_port" submit -f "$spec" >/dev/null
done
sleep 2
three=$(rss)
echo "then $three KiB with $big more jobs of about $spec_kib KiB of argv and env each"
awk -v a="$two" -v b="$three" -v n="$big" -v k="$spec_kib" \
  'BEGIN { printf "%.0f KiB per such job: %.1f x its spec\n", (b - a) / n, (b - a) / n / k }'
stack_stop
