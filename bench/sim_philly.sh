#!/usr/bin/env bash
# Replays the Helios window of the Philly trace (2017-10-01..2017-11-30, 11 VCs) through
# Ringmaster's fair share and the baselines (FIFO, SRTF, Tiresias' 2D-LAS; per VC and pooled), and
# prints them with the ratios to Helios' figures. Extra arguments go to ringmaster-sim (e.g.
# --arrival-speedup 8, --loads 1,4,8,12, --load helios; docs/fair-share.md). Needs the shared
# trace folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
traces=${RINGMASTER_TRACES:-$root/../shared/data/traces}
sim=${RINGMASTER_SIM:-$root/build/services/scheduler/ringmaster-sim}
if [[ ! -x $sim ]]; then
  echo "sim_philly.sh: $sim not built (ninja -C build ringmaster-sim)" >&2
  exit 2
fi
exec "$sim" --trace "$traces/philly-pollux/philly.csv" \
  --vcs "$traces/reference/helios_qssf_philly_vc.csv" \
  --reference "$traces/reference/helios_qssf_philly_results.csv" "$@"
