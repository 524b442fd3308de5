#!/usr/bin/env bash
# Platform overhead on a communication-bound MPI program that is not the built-in trainer:
# bench/mpi_ring.py (4 ranks pass MB-megabyte buffers around a ring; mpi4py) through Ringmaster
# and by hand with mpirun, alternating, ROUNDS times each, the way platform_overhead.sh measures
# the trainer. Prints each run's ring bandwidth, the ratio of the medians (goal: at least 0.99).
#
# Through the platform: `ringctl submit` of a 4-rank command job (one simulated t4 per rank:
# two ranks on each of the quickstart's two workers), then the ring's own timing from rank 0's
# log. By hand: `mpirun` with the same placement (two ranks on each of the workers' loopback
# hosts), the same MPI flags, and a plain local shell as launch agent. Each round also prints
# the CPU time the processes of each side used (python3: the ranks; ringmaster-rank: the
# wrappers; ringmaster-rsh and bash/orted: remote launch and output relay; ringmaster-work: the
# two agents, including their housekeeping and gRPC), which is where the platform's own cost
# shows on a machine whose cores the ranks share with it.
# Uses the quickstart cluster (starting it if it is not up).
# With RINGMASTER_BENCH_IMAGE=1 the platform's ranks run in containers (docs/environments.md):
# the test image (docker/make-job-image.sh) with mpi_ring.py added, localhost/ringmaster/bench,
# against the same bare mpirun on the host: the cost of containers, measured.
# RING_MODE=token makes the ring latency-bound (one message in flight; bench/mpi_ring.py).
# Usage: [RING_MODE=sendrecv|token] bench/ring_overhead.sh [ROUNDS] [MB] [RING_ROUNDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
rounds=${1:-8}
mb=${2:-4}
ring_rounds=${3:-100}
# Debian's python3, which has python3-mpi4py (a pyenv or venv python3 on the PATH may not).
python=${RINGMASTER_PYTHON:-/usr/bin/python3}
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
mode=${RING_MODE:-sendrecv}
program=("$python" "$root/bench/mpi_ring.py" "$mb" "$ring_rounds" 5 "$mode")
platform_program=("${program[@]}")
image_flags=()
if [ "${RINGMASTER_BENCH_IMAGE:-0}" = 1 ]; then
  source "$root/bench/lib/bench_image.sh"
  image=$(make_bench_image)
  image_flags=(--image "$image")
  platform_program=(/usr/bin/python3 /opt/ringmaster/bench/mpi_ring.py "$mb" "$ring_rounds" 5 "$mode")
  echo "platform side: ranks in containers of $image"
fi

# CPU seconds (user + system) each kind of process used during a run: every 0.2 s the
# cumulative time of every live process is sampled from /proc; the last sample of each counts.
# Processes that live less than a sample apart are missed (none of the ring's do). The agents
# (ringmaster-worker) are long-lived: their time is the growth over the run.
cpu_sampler() {
  local out=$1 n=0
  : >"$out"
  while :; do
    for stat in /proc/[0-9]*/stat; do
      read -r line 2>/dev/null <"$stat" || continue
      echo "$line"
    done | awk -v n="$n" -v self="$BASHPID" '{
        name = $2; gsub(/[()]/, "", name)
        if ($1 != self && name ~ /^(ringmaster-|orted|mpirun|python3|bash|sh)/)
          print n, $1, name, $14 + $15 }' >>"$out"
    n=$((n + 1))
    sleep 0.2
  done
}
# Processes already there at the first sample are not the run's, except the agents, whose
# growth counts.
cpu_summary() {
  awk -v hz="$(getconf CLK_TCK)" '{
      if ($1 == 0) { before[$2] = $4 }
      last[$2] = $4; name[$2] = $3 }
    END {
      for (p in last) {
        if (name[p] == "ringmaster-work") t = last[p] - before[p]
        else if (p in before) continue
        else t = last[p]
        sum[name[p]] += t / hz }
      for (n in sum) printf "%s %.2f s; ", n, sum[n]
    }' "$1"
}
with_cpu() {
  local samples
  samples=$(mktemp /tmp/ringmaster-ring-cpu.XXXXXX)
  cpu_sampler "$samples" &
  local sampler=$!
  # The first sample lists what was there before the run.
  sleep 0.3
  "$@"
  kill "$sampler"; wait "$sampler" 2>/dev/null || true
  cpu=$(cpu_summary "$samples")
  rm -f "$samples"
}

platform_run() {
  local id
  id=$("$ringctl" submit --name ring-overhead --replicas 4 --gpus-per-replica 1 --gpu-type t4 \
       "${image_flags[@]}" -- "${platform_program[@]}")
  "$ringctl" watch "$id" >/dev/null
  mbs=$("$ringctl" logs "$id" --rank 0 | awk '/^ring MB\/s:/ {print $3}')
  [ -n "$mbs" ] || { echo "job $id printed no ring MB/s" >&2; "$ringctl" logs "$id" --rank 0 >&2; return 1; }
}

# The same MPI flags as the workers' mpirun: TCP over loopback, no binding, ranks yield when
# idle (the workers set OMPI_MCA_mpi_yield_when_idle=1), no tree spawn. mpirun and each host's
# orted run in sessions of their own, as the workers start them and as ssh would on real hosts:
# with the kernel's autogroup scheduling (/proc/sys/kernel/sched_autogroup_enabled) CPU time is
# shared out per session first, so on a machine busy with other work, ranks that all sat in
# this script's one session got a smaller share than the platform's and the ratio read high.
hand_run() {
  local log=/tmp/ringmaster-ring-hand.log
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 \
    PMIX_MCA_gds=hash \
    setsid -w mpirun -np 4 -H 127.0.0.2:2,127.0.0.3:2 --bind-to none --oversubscribe \
    --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1 \
    --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
    "${program[@]}" >"$log" 2>&1
  mbs=$(awk '/^ring MB\/s:/ {print $3}' "$log")
  [ -n "$mbs" ] || { echo "mpirun printed no ring MB/s" >&2; cat "$log" >&2; return 1; }
}

agent=$(mktemp /tmp/ringmaster-ring-agent.XXXXXX)
trap 'rm -f "$agent"' EXIT
printf '#!/bin/sh\nshift\nexec setsid /bin/sh -c "$*"\n' >"$agent"
chmod 755 "$agent"

p=(); h=()
for i in $(seq "$rounds"); do
  # Alternate which side goes first, so a drift in the machine's load hits both alike.
  if [ $((i % 2)) -eq 1 ]; then
    with_cpu platform_run; p+=("$mbs"); pcpu=$cpu; with_cpu hand_run; h+=("$mbs"); hcpu=$cpu
  else
    with_cpu hand_run; h+=("$mbs"); hcpu=$cpu; with_cpu platform_run; p+=("$mbs"); pcpu=$cpu
  fi
  printf 'round %d: platform %s MB/s, mpirun by hand %s MB/s\n' "$i" "${p[-1]}" "${h[-1]}"
  printf '  CPU, platform: %s\n  CPU, by hand:  %s\n' "$pcpu" "$hcpu"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
pm=$(median "${p[@]}"); hm=$(median "${h[@]}")
echo "median ring bandwidth: platform $pm, mpirun by hand $hm MB/s ($mb MB x $ring_rounds rounds, 4 ranks)"
awk -v a="$pm" -v b="$hm" 'BEGIN {printf "ratio platform/by hand: %.3f (goal >= 0.99)\n", a / b}'
