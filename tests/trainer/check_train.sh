#!/usr/bin/env bash
# Runs ringmaster-train under mpirun on this machine's loopback and judges its output.
#
#   check_train.sh train     RANKS TRAINER [FLAGS...]  loss falls, weights agree, images/sec > 0
#   check_train.sh allreduce RANKS TRAINER [FLAGS...]  every size reports 0 wrong values
#   check_train.sh gpu       RANKS TRAINER [FLAGS...]  both of the above on --device gpu over
#                                                      NCCL; exit 77 (skip) when no GPU exists
#   check_train.sh over-memory RANKS TRAINER [FLAGS...]  with RINGMASTER_GPU_MEMORY below what
#                                                      the run needs: every rank exits non-zero
#                                                      at once, saying so, and trains nothing
set -u -o pipefail

mode=$1 ranks=$2 trainer=$3
shift 3

# Open MPI refuses root without these; CI containers run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Loopback only (Open MPI skips 127.0.0.0/8 by default); ranks share the cores.
mpirun_flags=(--oversubscribe --bind-to none --mca btl tcp,self --mca btl_tcp_if_include lo
  --mca oob_tcp_if_include lo)

log=$(mktemp)
trap 'rm -f "$log"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# run FLAGS...: runs the trainer on $ranks ranks; output in $log (and on stdout); sets $rc.
run() {
  timeout --kill-after=10 240 mpirun -np "$ranks" "${mpirun_flags[@]}" "$trainer" "$@" \
    >"$log" 2>&1
  rc=$?
  cat "$log"
}

value_of() {  # value_of "final loss" -> the number after "final loss: "
  sed -n "s/^$1: \([-0-9.eE+naif]*\).*/\1/p" "$log" | tail -n 1
}

check_train() {
  [[ $rc -eq 0 ]] || fail "trainer exited with $rc"
  local initial final images
  initial=$(value_of "initial loss")
  final=$(value_of "final loss")
  images=$(value_of "total images\/sec")
  [[ -n $initial && -n $final && -n $images ]] || fail "missing summary lines"
  awk -v a="$initial" -v b="$final" 'BEGIN { exit !(b < a) }' ||
    fail "loss did not fall: initial $initial, final $final"
  awk -v n="$images" 'BEGIN { exit !(n > 0) }' || fail "total images/sec is $images"
  grep -q "^weights consistent across $ranks ranks: yes$" "$log" ||
    fail "weights not reported consistent across $ranks ranks"
  if [[ -n ${RINGMASTER_GPU_MEMORY-} ]]; then
    grep -qE "^ringmaster-train: GPU share ${RINGMASTER_GPU_SHARE-whole device}, memory limit ${RINGMASTER_GPU_MEMORY} bytes; this run needs [0-9]+ bytes$" "$log" ||
      fail "no start line with the GPU share and memory limit"
  fi
  echo "OK: loss $initial -> $final, total images/sec $images, weights consistent"
}

check_allreduce() {
  [[ $rc -eq 0 ]] || fail "benchmark exited with $rc"
  # Data rows: size count type redop time algbw busbw #wrong.
  local rows bad
  rows=$(awk '$1 ~ /^[0-9]+$/ && $3 == "float"' "$log" | wc -l)
  bad=$(awk '$1 ~ /^[0-9]+$/ && $3 == "float" && $8 != 0' "$log" | wc -l)
  [[ $rows -gt 0 ]] || fail "no result rows"
  [[ $bad -eq 0 ]] || fail "$bad size(s) with wrong values"
  grep -q "^# Out of bounds values : 0 OK$" "$log" || fail "no '0 OK' summary"
  echo "OK: $rows sizes, 0 wrong"
}

case $mode in
  train)
    run "$@"
    check_train
    ;;
  allreduce)
    run "$@"
    check_allreduce
    ;;
  gpu)
    run "$@"
    if [[ $rc -ne 0 ]] && grep -q "no usable GPU" "$log"; then
      echo "SKIP: no usable GPU on this machine"
      exit 77
    fi
    grep -q "communicator nccl" "$log" || fail "--device gpu did not use NCCL"
    check_train
    run --device gpu --benchmark allreduce --max-bytes 64M --iters 5 --warmup-iters 2
    check_allreduce
    ;;
  over-memory)
    # As the worker runs a job's mpirun: one rank's exit does not end the others (mpirun then
    # exits 0 whatever the ranks did), so each rank reports its own exit code.
    mpirun_flags+=(--mca orte_abort_on_non_zero_status 0)
    timeout --kill-after=10 240 mpirun -np "$ranks" "${mpirun_flags[@]}" \
      bash -c '"$@"; code=$?; echo "rank exit $code"; exit $code' rank "$trainer" "$@" \
      >"$log" 2>&1
    cat "$log"
    failed=$(grep -c "^rank exit [1-9]" "$log")
    [[ $failed -eq $ranks ]] ||
      fail "$failed of $ranks ranks exited non-zero with RINGMASTER_GPU_MEMORY=${RINGMASTER_GPU_MEMORY-}"
    pattern="^ringmaster-train: needs [0-9]+ bytes of GPU memory \(model [a-z-]+, [0-9]+ samples"
    pattern+=" per rank\); RINGMASTER_GPU_MEMORY allows ${RINGMASTER_GPU_MEMORY}$"
    refusals=$(grep -cE "$pattern" "$log")
    [[ $refusals -eq $ranks ]] || fail "$refusals of $ranks ranks said what they need"
    if grep -q "^step " "$log"; then fail "trained despite the limit"; fi
    echo "OK: every rank refused: $(grep -m1 -E "$pattern" "$log")"
    ;;
  *)
    fail "unknown mode '$mode' (train, allreduce, gpu or over-memory)"
    ;;
esac
