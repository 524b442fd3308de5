#!/usr/bin/env bash
# Cost of the pre-run allreduce check (docs/health-check.md) in a job's start: time from the
# placement (the STARTING event) to RUNNING (every rank started) of a 4-rank job, with the
# check and without it (`health_check: false`), alternating, ROUNDS times each, on a cluster
# shaped like the quickstart's (two workers on 127.0.0.2 and .3, 2 simulated t4 GPUs each, a
# 4-rank job across both). Three workloads: a command (/bin/true), checked by an mpirun of
# ringmaster-check before the job's own; the built-in trainer, checked inside its own MPI_Init
# (the check's time there, as its event reports it, is what it adds to the start); and a plain
# MPI program (tests/worker/programs/stalled_allreduce.c, no rank stalling) whose spec sets
# command.check_in_mpi_init, checked inside its MPI_Init the same way. For that program the
# start is also measured whole: from the placement until MPI_Init returned to its last rank
# (each rank prints the time), with the check and without.
# Prints every run, the medians and a ratio for each (target: the check adds under 10%).
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
  --insecure --insecure-no-auth >"$state/scheduler.log" 2>&1 &
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
# Its own config directory: a token file a quickstart left in ~/.config would be sent, and this
# scheduler (no auth) knows no token.
ringctl() { XDG_CONFIG_HOME=$state/config "$build/cli/ringctl" --scheduler "$sched" --insecure "$@"; }
for _ in $(seq 300); do
  [ "$(ringctl workers 2>/dev/null | grep -c READY || true)" -ge 2 ] && break
  sleep 0.1
done

# One job; prints "START_TO_RUNNING_MS CHECK_SECONDS START_TO_END_MS START_TO_PAST_INIT_MS"
# (CHECK_SECONDS "-" without a check; the last is "-" but for the MPI program). WORKLOAD
# "command": /bin/true, checked by ringmaster-check's own mpirun before the job's; "trainer":
# ringmaster-train, checked inside its own MPI_Init.
run() {
  local check=$1 workload=$2 spec=$state/job-$1-$2.yaml id events
  {
    cat <<YAML
name: precheck-bench
replicas: 4
gpus_per_replica: 1
gpu_type: t4
health_check: $check
YAML
    if [ "$workload" = command ]; then
      printf 'command:\n  argv: ["/bin/true"]\n'
    elif [ "$workload" = mpi ]; then
      # Held long enough to be running when the check's result is read (every 200 ms).
      printf 'command:\n  argv: ["%s"]\n  env: {STALL_RANK: "-1", HOLD_MS: "1000"}\n' "$mpi_program"
      printf '  check_in_mpi_init: true\n'
    else
      # Long enough to be running when the check's result is read (every 200 ms).
      printf 'trainer:\n  model: mlp-small\n  steps: 100\n'
    fi
  } >"$spec"
  id=$(ringctl submit -f "$spec")
  events=$(ringctl watch "$id" -o json)
  local a c e starting init=-
  read -r a c e starting < <(python3 - "$events" <<'PY'
import json, re, sys
starting = running = ended = None
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
    if state == "JOB_STATE_SUCCEEDED":
        ended = t
print(running - starting, check, (ended or running) - starting, starting)
PY
  )
  [ "$workload" = mpi ] && init=$(past_init "$id" "$starting")
  echo "$a $c $e $init"
}

# For the MPI program: ms from the placement (STARTING's time) until the last of its 4 ranks
# returned from MPI_Init (each prints the wall-clock time; same host as the scheduler).
past_init() {
  local id=$1 starting=$2 r t latest=0
  for r in 0 1 2 3; do
    t=$(ringctl logs "$id" --rank "$r" | sed -n 's/.*past MPI_Init at \([0-9]*\) ms.*/\1/p')
    [ -n "$t" ] || { echo "-"; return; }
    [ "$t" -gt "$latest" ] && latest=$t
  done
  echo $((latest - starting))
}

median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

mpi_program=$build/tests/stalled_allreduce
[ -x "$mpi_program" ] || cmake --build "$build" --target stalled_allreduce >/dev/null
run false command >/dev/null  # warm-up: binaries and page cache, the first placement
run false trainer >/dev/null

echo "== command job (/bin/true): ringmaster-check's own mpirun before the job's"
with=(); without=(); checks=()
for i in $(seq "$rounds"); do
  read -r a c _ < <(run true command)
  read -r b _ _ < <(run false command)
  with+=("$a"); without+=("$b"); checks+=("$c")
  printf 'round %d: placement -> RUNNING %5d ms with the check (check %s s), %5d ms without\n' \
    "$i" "$a" "$c" "$b"
done
mw=$(median "${with[@]}"); mo=$(median "${without[@]}"); mc=$(median "${checks[@]}")
echo "median placement -> RUNNING: ${mw} ms with the check, ${mo} ms without; the check itself ${mc} s"
awk -v w="$mw" -v o="$mo" 'BEGIN {printf "command ratio with/without: %.2f (the check adds %.0f%% to the start; target under 10%%)\n", w / o, 100 * (w - o) / o}'

# The trainer's check runs in its MPI_Init, after its ranks started (RUNNING): what it adds to
# the job's start is its own time, which rank 0 measures inside MPI_Init and the event reports.
echo "== trainer job (mlp-small, 100 steps): checked inside its own MPI_Init"
with=(); without=(); checks=(); ends_with=(); ends_without=()
for i in $(seq "$rounds"); do
  read -r a c ea _ < <(run true trainer)
  read -r b _ eb _ < <(run false trainer)
  with+=("$a"); without+=("$b"); checks+=("$c"); ends_with+=("$ea"); ends_without+=("$eb")
  printf 'round %d: placement -> RUNNING %5d ms with the check (in MPI_Init %s s), %5d ms without; placement -> SUCCEEDED %5d vs %5d ms\n' \
    "$i" "$a" "$c" "$b" "$ea" "$eb"
done
mw=$(median "${with[@]}"); mo=$(median "${without[@]}"); mc=$(median "${checks[@]}")
mew=$(median "${ends_with[@]}"); meo=$(median "${ends_without[@]}")
echo "median placement -> RUNNING: ${mw} ms with the check, ${mo} ms without; the check in MPI_Init ${mc} s"
echo "median placement -> SUCCEEDED: ${mew} ms with the check, ${meo} ms without (noisy: the whole run)"
awk -v o="$mo" -v c="$mc" 'BEGIN {printf "trainer ratio (start + check in MPI_Init) / start: %.2f (the check adds %.0f%% to the start; target under 10%%)\n", (o + 1000 * c) / o, 100000 * c / o}'

# The same for a plain MPI program whose spec says it calls MPI_Init.
echo "== MPI command (stalled_allreduce, check_in_mpi_init: true): checked inside its MPI_Init"
with=(); without=(); checks=(); inits_with=(); inits_without=()
for i in $(seq "$rounds"); do
  read -r a c _ ia < <(run true mpi)
  read -r b _ _ ib < <(run false mpi)
  with+=("$a"); without+=("$b"); checks+=("$c"); inits_with+=("$ia"); inits_without+=("$ib")
  printf 'round %d: placement -> RUNNING %5d ms with the check (in MPI_Init %s s), %5d ms without; placement -> every rank past MPI_Init %s vs %s ms\n' \
    "$i" "$a" "$c" "$b" "$ia" "$ib"
done
mw=$(median "${with[@]}"); mo=$(median "${without[@]}"); mc=$(median "${checks[@]}")
echo "median placement -> RUNNING: ${mw} ms with the check, ${mo} ms without; the check in MPI_Init ${mc} s"
awk -v o="$mo" -v c="$mc" 'BEGIN {printf "MPI command ratio (start + check in MPI_Init) / start: %.2f (the check adds %.0f%% to the start; target under 10%%)\n", (o + 1000 * c) / o, 100000 * c / o}'
# Measured, not added up: the program's start ends when MPI_Init returns to its last rank.
miw=$(median "${inits_with[@]}"); mio=$(median "${inits_without[@]}")
echo "median placement -> every rank past MPI_Init: ${miw} ms with the check, ${mio} ms without"
awk -v w="$miw" -v o="$mio" 'BEGIN {printf "MPI command ratio, placement -> past MPI_Init, with/without: %.2f (the check adds %.0f%%; target under 10%%)\n", w / o, 100 * (w - o) / o}'
