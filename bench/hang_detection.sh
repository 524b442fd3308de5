#!/usr/bin/env bash
# Hang detection latency as a ratio of progress_timeout_seconds (docs/health.md): runs the two
# hang cases of run_watch_e2e_test (real scheduler, workers, Postgres, Redis, mpirun) ROUNDS
# times and prints each measured latency over the tests' 3 s timeout:
#  - stalled allreduce: from RUNNING (the stall starts within a fraction of a second after) to
#    the FAILED state seen by a 100 ms poll;
#  - a rank out of MPI while the others wait in point-to-point calls (4 ranks): the same;
#  - SIGSTOP of a trainer rank: from the SIGSTOP to the FAILED state seen by the poll.
# Needs RINGMASTER_TEST_PG_URL (a Postgres the tests may create databases on).
# Usage: bench/hang_detection.sh [ROUNDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
rounds=${1:-3}
cmake --build "$build" --target run_watch_e2e_test >/dev/null
for ((i = 1; i <= rounds; i++)); do
  "$build/tests/run_watch_e2e_test" \
    --gtest_filter='*NeverJoins*:*PointToPoint*:*Sigstop*' 2>/dev/null | grep 'detected' || true
done | awk '{
    for (i = 1; i <= NF; i++) if ($i == "detected") lat = $(i + 1)
    timeout = 3
    kind = ($1 == "SIGSTOP") ? "SIGSTOPped trainer rank" : \
           ($1 == "point-to-point") ? "stalled point-to-point" : "stalled allreduce"
    printf "%-24s latency %.2f s, ratio to the %d s timeout %.2f\n", kind, lat, timeout, lat / timeout
    sum += lat / timeout; n++ }
  END { if (n) printf "mean ratio latency/timeout over %d runs: %.2f\n", n, sum / n }'
