#!/usr/bin/env bash
# How much the pre-run check's busbw spreads from run to run with no fault anywhere
# (docs/health-check.md, "Why the fastest allreduce"): RUNS times each, alternating, the check
# inside MPI_Init (libringmaster_pmpi.so preloaded into a plain MPI program) and
# ringmaster-check, 2 ranks on loopback TCP as on the quickstart. For each: the median, the
# extremes, the coefficient of variation, and how many results were below half the median of
# the 15 before them (the baseline rule at the default --check-min-ratio).
# OLD_PMPI=FILE and OLD_CHECK=FILE (an older build's library and binary) run alternately with
# this build's, for an A/B in one run.
# Usage: [OLD_PMPI=...] [OLD_CHECK=...] bench/check_spread.sh [RUNS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RINGMASTER_BUILD_DIR:-$root/build}
runs=${1:-30}
[ -n "${RINGMASTER_BENCH_NO_BUILD:-}" ] ||
  cmake --build "$build" --target ringmaster_pmpi ringmaster-check mpi_allreduce_baseline >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpi=(mpirun -np 2 --oversubscribe --bind-to none --mca btl "tcp,self"
     --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
# A program whose MPI_Init is all that matters: one 1 KiB allreduce after it.
program=("$build/bench/mpi_allreduce_baseline" 1024 1024 1 0)

# busbw of one check, or "-" when it wrote no result.
in_mpi_init() {
  rm -f "$tmp/result"
  "${mpi[@]}" -x LD_PRELOAD="$1" -x RINGMASTER_PRECHECK_RESULT="$tmp/result" "${program[@]}" \
    >/dev/null 2>&1 || true
  awk '/^busbw_gbps/ {print $2; found = 1} END {if (!found) print "-"}' "$tmp/result" 2>/dev/null ||
    echo -
}
separate() {
  rm -f "$tmp/result"
  "${mpi[@]}" "$1" --result "$tmp/result" >/dev/null 2>&1 || true
  awk '/^busbw_gbps/ {print $2; found = 1} END {if (!found) print "-"}' "$tmp/result" 2>/dev/null ||
    echo -
}

variants=("in MPI_Init, this build" "ringmaster-check, this build")
[ -n "${OLD_PMPI:-}" ] && variants+=("in MPI_Init, OLD_PMPI")
[ -n "${OLD_CHECK:-}" ] && variants+=("ringmaster-check, OLD_CHECK")
for _ in $(seq "$runs"); do
  row=("$(in_mpi_init "$build/services/worker/libringmaster_pmpi.so")"
       "$(separate "$build/trainer/ringmaster-check")")
  [ -n "${OLD_PMPI:-}" ] && row+=("$(in_mpi_init "$OLD_PMPI")")
  [ -n "${OLD_CHECK:-}" ] && row+=("$(separate "$OLD_CHECK")")
  echo "${row[*]}" >>"$tmp/rows"
done

echo "pre-run check busbw, 2 ranks on loopback TCP, $runs runs of each, alternating" \
  "($(nproc) cores)"
for i in "${!variants[@]}"; do
  awk -v col=$((i + 1)) -v name="${variants[$i]}" '
    function sort(x, m,    a, b, t) {
      for (a = 0; a < m; ++a) for (b = a + 1; b < m; ++b) if (x[b] < x[a]) {
        t = x[a]; x[a] = x[b]; x[b] = t
      }
    }
    $col != "-" { v[n++] = $col }
    $col == "-" { missing++ }
    END {
      if (n == 0) { printf "  %-30s no result\n", name; exit }
      below = 0
      for (k = 1; k < n; ++k) {
        m = 0; for (j = (k > 15 ? k - 15 : 0); j < k; ++j) w[m++] = v[j]
        sort(w, m)
        if (v[k] < 0.5 * w[int((m - 1) / 2)]) below++
      }
      for (k = 0; k < n; ++k) { s[k] = v[k]; sum += v[k] }
      sort(s, n)
      mean = sum / n; for (k = 0; k < n; ++k) ss += (v[k] - mean) ^ 2
      median = (n % 2) ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2
      printf "  %-30s median %.2f GB/s, min %.2f, max %.2f, cv %.2f;", name, median, s[0],
        s[n - 1], sqrt(ss / n) / mean
      printf " below half the median of the 15 before: %d of %d%s\n", below, n - 1,
        missing ? sprintf(" (%d runs wrote no result)", missing) : ""
    }' "$tmp/rows"
done
