#!/usr/bin/env bash
# Replay speed of Ringmaster's policy, A/B: the Philly window at each speed-up (default 8 and 12,
# the issue's loads) through a reference ringmaster-sim and this tree's, one after the other in
# the same script, with the wall and CPU seconds of each (/usr/bin/time) and whether their
# figures (everything the sim prints but CPU times) are the same. A speed-up of the pass must
# leave them the same. docs/fair-share.md, "Replay speed".
#   bench/sim_speed.sh /tmp/sim-old            # x8 and x12
#   bench/sim_speed.sh /tmp/sim-old 4 8        # other speed-ups
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [[ $# -lt 1 ]]; then
  echo "usage: bench/sim_speed.sh REFERENCE_SIM [SPEEDUP...]" >&2
  exit 2
fi
reference=$1
shift
speedups=("$@")
[[ ${#speedups[@]} -gt 0 ]] || speedups=(8 12)
sim=${RINGMASTER_SIM:-$root/build/services/scheduler/ringmaster-sim}
for b in "$reference" "$sim"; do
  if [[ ! -x $b ]]; then
    echo "sim_speed.sh: $b not built (ninja -C build ringmaster-sim)" >&2
    exit 2
  fi
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# CPU times differ from run to run; everything else must not.
mask() { sed -E 's/[0-9]+\.[0-9]+ *$/CPU/; s/CPU [0-9.]+ s/CPU x/g; s/: [0-9.]+ s \(goal/: x (goal/'; }
for x in "${speedups[@]}"; do
  for which in reference this; do
    b=$reference
    [[ $which == this ]] && b=$sim
    RINGMASTER_SIM=$b /usr/bin/time -f "%e %U %S" -o "$out/time" \
      "$root/bench/sim_philly.sh" --policy ringmaster --arrival-speedup "$x" >"$out/$which" 2>&1
    read -r wall user sys <"$out/time"
    printf 'x%-3s %-9s wall %7.1f s  cpu %7.1f s (user %.1f, sys %.1f)  %s\n' "$x" "$which" \
      "$wall" "$(echo "$user + $sys" | bc)" "$user" "$sys" "$b"
    mask <"$out/$which" >"$out/$which.masked"
  done
  grep -E '^Ringmaster \(' "$out/this"
  if cmp -s "$out/reference.masked" "$out/this.masked"; then
    echo "x$x figures: same"
  else
    echo "x$x figures: DIFFERENT"
    diff "$out/reference.masked" "$out/this.masked" | head -20
  fi
done
