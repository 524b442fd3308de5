#!/usr/bin/env bash
# What a container costs a job's start: the same 2-rank mpi4py program submitted on the host and
# in the test image (docs/environments.md), alternating, ROUNDS times each, with the image
# already in the workers' store. Each run's time is from just before `ringctl submit` to the
# moment rank 0's program printed after MPI_Init (its own clock, the same machine's), so it
# holds the scheduling, the pre-run check, mpirun's launch, the container's start and Python's
# and MPI's own start-up. Prints each round, the medians and their difference (goal: the
# container adds at most 0.5 s).
# Uses the quickstart cluster (starting it if it is not up). Usage: bench/container_start.sh [ROUNDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
rounds=${1:-7}
ringctl="$build/cli/ringctl"
if ! "$ringctl" workers >/dev/null 2>&1; then
  "$root/scripts/quickstart" >/dev/null
fi
source "$root/bench/lib/bench_image.sh"
image=$(make_bench_image)
program='import time
from mpi4py import MPI
c = MPI.COMM_WORLD
c.Barrier()
if c.Get_rank() == 0:
    print("first step at %.6f" % time.time(), flush=True)'

# Seconds from submit to rank 0's first step; `$@` are extra submit flags.
run() {
  local start id first
  start=$(date +%s.%N)
  id=$("$ringctl" submit --name container-start --replicas 2 "$@" -- /usr/bin/python3 -c "$program")
  "$ringctl" watch "$id" >/dev/null
  first=$("$ringctl" logs "$id" --rank 0 | awk '/^first step at/ {print $4}')
  [ -n "$first" ] || { echo "job $id printed no first step" >&2; "$ringctl" get "$id" >&2; return 1; }
  awk -v a="$first" -v b="$start" 'BEGIN {printf "%.3f", a - b}'
}

# One unmeasured run each way: the image's first use on each worker, Python's caches.
run >/dev/null; run --image "$image" >/dev/null
h=(); c=()
for i in $(seq "$rounds"); do
  if [ $((i % 2)) -eq 1 ]; then
    h+=("$(run)"); c+=("$(run --image "$image")")
  else
    c+=("$(run --image "$image")"); h+=("$(run)")
  fi
  printf 'round %d: on the host %s s, in a container %s s\n' "$i" "${h[-1]}" "${c[-1]}"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
hm=$(median "${h[@]}"); cm=$(median "${c[@]}")
echo "median submit to first step: host $hm s, container $cm s ($image, 2 ranks on 2 workers)"
awk -v a="$cm" -v b="$hm" 'BEGIN {printf "the container adds %.3f s (goal <= 0.5 s)\n", a - b}'
