#!/usr/bin/env bash
# Platform overhead: the same 4-rank trainer job (fixed steps) through Ringmaster and by hand
# with mpirun and the same MPI and trainer flags, alternating, ROUNDS times each. Prints each
# run's `total images/sec` and time from start to the first step, the ratio of the median
# throughputs (goal: at least 0.99) and of the start-up times.
#
# Through the platform: `ringctl submit`, then the clock runs until rank 0's log shows step 1.
# By hand: `mpirun` with the same placement (two ranks on each of the workers' two loopback
# hosts) and MPI flags, until its output shows step 1. Both sides run on the same cores.
# Uses the quickstart cluster (starting it if it is not up). Usage: bench/platform_overhead.sh [ROUNDS] [STEPS]
# With RINGMASTER_BENCH_IMAGE=1 the platform's ranks run in containers (docs/environments.md) of
# localhost/ringmaster/bench:train: the test image with this build's trainer and the libraries
# it links (bench/lib/bench_image.sh); the by-hand side stays on the host.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
rounds=${1:-3}
steps=${2:-200}
export RINGMASTER_SCHEDULER=${RINGMASTER_SCHEDULER:-127.0.0.1:7070}
ringctl="$build/cli/ringctl"
# The quickstart cluster speaks TLS with the certificates it made (docs/security.md).
certs=${RINGMASTER_QUICKSTART_DIR:-/tmp/ringmaster-quickstart}/certs
export RINGMASTER_TLS_CA=${RINGMASTER_TLS_CA:-$certs/ca.crt}
export RINGMASTER_TLS_CERT=${RINGMASTER_TLS_CERT:-$certs/client/tls.crt}
export RINGMASTER_TLS_KEY=${RINGMASTER_TLS_KEY:-$certs/client/tls.key}
if ! "$ringctl" workers >/dev/null 2>&1; then
  "$root/scripts/quickstart" >/dev/null
fi
image_flags=()
if [ "${RINGMASTER_BENCH_IMAGE:-0}" = 1 ]; then
  source "$root/bench/lib/bench_image.sh"
  image=$(make_trainer_image "$build")
  image_flags=(--image "$image")
  echo "platform side: ranks in containers of $image"
fi
trainer_flags=(--device cpu --model mlp-small --batch-size 64 --steps "$steps")
now() { date +%s.%N; }
# Seconds from $1 until command $2... prints a line matching "step 1/".
wait_first_step() {
  local start=$1; shift
  for _ in $(seq 3000); do
    if "$@" 2>/dev/null | grep -q "^step 1/"; then awk -v a="$(now)" -v b="$start" "BEGIN {print a - b}"; return; fi
    sleep 0.02
  done
  echo "no first step" >&2; return 1
}

platform_run() {
  local start id out
  start=$(now)
  id=$("$ringctl" submit --name overhead --replicas 4 --gpus-per-replica 1 --gpu-type t4 \
       --model mlp-small --batch-size 64 --steps "$steps" "${image_flags[@]}")
  first=$(wait_first_step "$start" "$ringctl" logs "$id" --rank 0)
  "$ringctl" watch "$id" >/dev/null
  out=$("$ringctl" logs "$id" --rank 0)
  ips=$(echo "$out" | awk '/^total images\/sec:/ {print $3}')
}

# By hand the way an operator would run the same placement: the two hosts of the platform's
# workers (127.0.0.2 and .3, two ranks each), the same MPI flags (TCP over loopback, no binding,
# ranks yield when idle as the workers set it), and as launch agent a plain local shell in
# place of ssh (both "hosts" are this machine).
hand_run() {
  local start log=/tmp/ringmaster-overhead-hand.log
  start=$(now)
  # mpirun and each orted in sessions of their own, as the workers start them (and as ssh
  # would): with autogroup scheduling a busy machine shares CPU per session first (see
  # docs/workers.md), which otherwise favours the platform's ranks.
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 \
    setsid -w mpirun -np 4 -H 127.0.0.2:2,127.0.0.3:2 --bind-to none --oversubscribe \
    --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1 \
    --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
    "$build/trainer/ringmaster-train" "${trainer_flags[@]}" >"$log" 2>&1 &
  local pid=$!
  first=$(wait_first_step "$start" cat "$log")
  wait "$pid"
  ips=$(awk '/^total images\/sec:/ {print $3}' "$log")
}

agent=$(mktemp /tmp/ringmaster-overhead-agent.XXXXXX)
trap 'rm -f "$agent"' EXIT
printf '#!/bin/sh\nshift\nexec setsid /bin/sh -c "$*"\n' >"$agent"
chmod 755 "$agent"

p_ips=(); h_ips=(); p_first=(); h_first=()
for i in $(seq "$rounds"); do
  platform_run; p_ips+=("$ips"); p_first+=("$first")
  hand_run; h_ips+=("$ips"); h_first+=("$first")
  printf 'round %d: platform %s images/sec (first step after %.2f s), mpirun %s images/sec (first step after %.2f s)\n' \
    "$i" "${p_ips[-1]}" "${p_first[-1]}" "${h_ips[-1]}" "${h_first[-1]}"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
pm=$(median "${p_ips[@]}"); hm=$(median "${h_ips[@]}")
pf=$(median "${p_first[@]}"); hf=$(median "${h_first[@]}")
echo "median throughput: platform $pm, mpirun by hand $hm images/sec"
awk -v a="$pm" -v b="$hm" 'BEGIN {printf "throughput ratio platform/by hand: %.3f (goal >= 0.99; a Kubernetes MPIJob lost 6-8%%)\n", a / b}'
printf 'submit to first step: %.2f s; mpirun start to first step: %.2f s\n' "$pf" "$hf"
