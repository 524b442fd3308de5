#!/usr/bin/env bash
# An elastic command workload resized the way the scheduler resizes it: the mpi4py example
# (docs/examples/elastic_mpi4py.py) runs at FROM ranks, its ranks get SIGTERM mid-run, it
# checkpoints and stops, and the same command runs again at TO ranks with the same
# RINGMASTER_CHECKPOINT_DIR. It must resume from the step it stopped at (no step lost) and end
# with the same final weights, to the bit, as a run never stopped (at FROM ranks, and at TO).
#
#   check_elastic_command.sh PYTHON EXAMPLE FROM TO
set -u -o pipefail

python=$1 example=$2 from=$3 to=$4
steps=300
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun_flags=(--oversubscribe --bind-to none --mca btl tcp,self --mca btl_tcp_if_include lo
  --mca oob_tcp_if_include lo)

work=$(mktemp -d /tmp/check-elastic-command-XXXXXX)
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# run RANKS DIR LOG [FLAGS...]: the example under mpirun, in the background; sets $pid.
run() {
  local ranks=$1 dir=$2 log=$3
  shift 3
  RINGMASTER_CHECKPOINT_DIR=$dir timeout --kill-after=10 120 mpirun -np "$ranks" \
    "${mpirun_flags[@]}" "$python" "$example" --steps "$steps" "$@" >"$log" 2>&1 &
  pid=$!
}

final_weights() { sed -n 's/^final weights: //p' "$1"; }

# The run never stopped.
run "$from" "$work/base" "$work/base.log"
wait "$pid" || fail "unresized run exited with $?: $(tail -n 5 "$work/base.log")"
pid=
base=$(final_weights "$work/base.log")
[[ -n $base ]] || fail "unresized run printed no final weights"
run "$to" "$work/base-to" "$work/base-to.log"
wait "$pid" || fail "unresized run at $to exited with $?: $(tail -n 5 "$work/base-to.log")"
pid=
base_to=$(final_weights "$work/base-to.log")
echo "unresized at $to ranks: $base_to"
[[ $base_to == "$base" ]] || fail "unresized runs at $from and $to ranks end differently"

# The resized one: slow steps, so the SIGTERM lands mid-run.
run "$from" "$work/resized" "$work/first.log" --step-seconds 0.03
for _ in $(seq 600); do
  grep -q "^checkpoint at step 50$" "$work/first.log" && break
  sleep 0.1
done
grep -q "^checkpoint at step 50$" "$work/first.log" || fail "no checkpoint at step 50"
# SIGTERM to every rank, as the worker sends it; mpirun itself is left alone.
# $pid is timeout's; mpirun is its child, and the ranks mpirun's.
launcher=$(pgrep -P "$pid" -x mpirun)
mapfile -t ranks < <(pgrep -P "$launcher" -f "$example")
[[ ${#ranks[@]} -eq $from ]] || fail "found rank pids '${ranks[*]}', want $from"
kill -TERM "${ranks[@]}"
wait "$pid"
rc=$?
pid=
cat "$work/first.log"
stopped=$(sed -n 's/^stopping after step \([0-9]*\) on SIGTERM (checkpoint saved)$/\1/p' \
  "$work/first.log")
[[ -n $stopped ]] || fail "no rank stopped on SIGTERM with its checkpoint (exit $rc)"
((stopped > 50 && stopped < steps)) || fail "stopped at step $stopped, not mid-run"

run "$to" "$work/resized" "$work/second.log"
wait "$pid" || fail "resumed run at $to ranks exited with $?: $(tail -n 5 "$work/second.log")"
pid=
cat "$work/second.log"
want="resumed at step $stopped (written at $from rank(s)): global batch 12,"
want+=" $to rank(s) x $((12 / to))"
grep -qF "$want" "$work/second.log" || fail "no line '$want'"
resized=$(final_weights "$work/second.log")
echo "unresized at $from ranks: $base"
echo "resized $from -> $to at step $stopped: $resized"
[[ $resized == "$base" ]] || fail "final weights differ from the unresized run's"
echo "OK: SIGTERM at $from ranks stopped after step $stopped, resumed there at $to ranks (0 steps" \
  "lost), final weights bit-identical to the unresized run"
