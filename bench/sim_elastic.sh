#!/usr/bin/env bash
# Replays the Helios window of the Philly trace (2017-10-01..2017-11-30, 11 VCs in one cohort)
# with every job of 2 or more GPUs elastic from half to double its GPUs, then with none elastic
# (the same arrivals, the same run), and FIFO per VC beside them; prints JCT, queueing,
# utilisation, resizes and what they cost (docs/fair-share.md, "Elastic jobs in the simulator").
# Extra arguments go to ringmaster-sim (default --loads 4,8; e.g. --elastic-idle-seconds 120,
# --resizes-per-hour 1). Needs the shared trace folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
traces=${RINGMASTER_TRACES:-$root/../shared/data/traces}
sim=${RINGMASTER_SIM:-$root/build/services/scheduler/ringmaster-sim}
if [[ ! -x $sim ]]; then
  echo "sim_elastic.sh: $sim not built (ninja -C build ringmaster-sim)" >&2
  exit 2
fi
args=("$@")
if [[ ! " ${args[*]} " =~ " --loads " && ! " ${args[*]} " =~ " --arrival-speedup " ]]; then
  args=(--loads 4,8 "${args[@]}")
fi
exec "$sim" --trace "$traces/philly-pollux/philly.csv" \
  --vcs "$traces/reference/helios_qssf_philly_vc.csv" \
  --reference "$traces/reference/helios_qssf_philly_results.csv" \
  --policy fifo,ringmaster,elastic "${args[@]}"
