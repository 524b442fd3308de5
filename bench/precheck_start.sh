#!/usr/bin/env bash
# Cost of the pre-run allreduce check (docs/health-check.md) in a job's start: time from the
# placement (the STARTING event) to RUNNING (every rank started) of a 4-rank job, with the
# check and without it (`health_check: false`), alternating, ROUNDS times each, on a cluster
# shaped like the quickstart's (two workers on 127.0.0.2 and .3, 2 simulated t4 GPUs each, a
# 4-rank job across both). Prints every run, the medians, the check's own wall time as its
# events report it, and the ratio (target: the check adds under 10% to the start).
#
# The cluster is this script's own (PostgreSQL, Redis, scheduler, two workers on free ports,
# plain gRPC on loopback), started and stopped here. Usage: bench/precheck_start.sh [ROUNDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
rounds=${1:-5}
source "$root/scripts/lib/pg.sh"
state=$(mktemp -d /tmp/ringmaster-precheck-bench.XXXXXX)
chmod 755 "$state"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pg_stop "$state/pg"
  rm -rf "$state"
}
trap cleanup EXIT

pg_port=${PG_PORT:-$(free_port)}
redis_port=$(free_port)
sched=127.0.0.1:$(free_port)
pg_start "$state/pg" "$pg_port"
pg_as_owner "$PG_BIN/psql" -h 127.0.0.1 -p "$pg_port" -U postgres -q -c "CREATE DATABASE ringmaster" >/dev/null
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no >"$state/redis.log" 2>&1 &
pids+=($!)
"$build/services/scheduler/ringmaster-scheduler" --listen "$sched" \
  --metrics-listen "127.0.0.1:$(free_port)" \
  --postgres-url "postgresql://postgres@127.0.0.1:$pg_port/ringmaster" \
  --redis-addr "127.0.0.1:$redis_port" --heartbeat-timeout-ms 5000 --heartbeat-interval-ms 1000 \
  --insecure >"$state/scheduler.log" 2>&1 &
pids+=($!)
for w in "w1 127.0.0.2" "w2 127.0.0.3"; do
  id=${w%% *} address=${w##* }
  port=$(python3 -c "import socket; s=socket.socket(); s.bind(('$address',0)); print(s.getsockname()[1])")
  "$build/services/worker/ringmaster-worker" --worker-id "$id-bench$$" --address "$address" \
    --listen "$address:$port" --metrics-listen "127.0.0.1:$(free_port)" --scheduler "$sched" \
    --simulate-gpus 2 --simulate-gpu-type t4 --cpu-slots 0 --log-dir "$state/logs/$id" \
    --train-binary "$build/trainer/ringmaster-train" --insecure >"$state/$id.log" 2>&1 &
  pids+=($!)
done
ringctl() { "$build/cli/ringctl" --scheduler "$sched" --insecure "$@"; }
for _ in $(seq 300); do
  [ "$(ringctl workers 2>/dev/null | grep -c READY || true)" -ge 2 ] && break
  sleep 0.1
done

# One job; prints "START_TO_RUNNING_MS CHECK_SECONDS" (CHECK_SECONDS "-" without a check).
run() {
  local check=$1 spec=$state/job-$1.yaml id events
  cat >"$spec" <<YAML
name: precheck-bench
replicas: 4
gpus_per_replica: 1
gpu_type: t4
health_check: $check
command:
  argv: ["/bin/true"]
YAML
  id=$(ringctl submit -f "$spec")
  events=$(ringctl watch "$id" -o json)
  python3 - "$events" <<'PY'
import json, re, sys
starting = running = None
check = "-"
for line in sys.argv[1].splitlines():
    if not line.strip():
        continue
    e = json.loads(line)
    t = int(e.get("time_ms", 0))
    state = e.get("state", "")
    reason = e.get("reason", "")
    if state == "JOB_STATE_STARTING" and starting is None:
        starting = t
    m = re.search(r"pre-run check \w+: .* in ([0-9.]+) s", reason)
    if m:
        check = m.group(1)
    if state == "JOB_STATE_RUNNING" and running is None:
        running = t
print(running - starting, check)
PY
}

with=(); without=(); checks=()
run false >/dev/null  # warm-up: binaries and page cache, the first placement
for i in $(seq "$rounds"); do
  read -r a c < <(run true)
  read -r b _ < <(run false)
  with+=("$a"); without+=("$b"); checks+=("$c")
  printf 'round %d: placement -> RUNNING %5d ms with the check (check %s s), %5d ms without\n' \
    "$i" "$a" "$c" "$b"
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
mw=$(median "${with[@]}"); mo=$(median "${without[@]}"); mc=$(median "${checks[@]}")
echo "median placement -> RUNNING: ${mw} ms with the check, ${mo} ms without; the check itself ${mc} s"
awk -v w="$mw" -v o="$mo" 'BEGIN {printf "ratio with/without: %.2f (the check adds %.0f%% to the start; target under 10%%)\n", w / o, 100 * (w - o) / o}'
