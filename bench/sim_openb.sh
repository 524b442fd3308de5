#!/usr/bin/env bash
# FGD's fragmentation experiment (USENIX ATC'23) on the Alibaba openb trace: 1,213 GPU nodes,
# tasks of openb_pod_list_gpuspec33.csv drawn until the arrived GPU demand is 130% of capacity,
# none leaving; prints the share of GPUs left unallocated at each arrived load for random, best
# fit, dot product, GPU packing, FGD and Ringmaster's policy (core/share_placement.h), and the
# ratios at 100%. Extra arguments go to ringmaster-sim (e.g. --seeds 10, --openb-pods
# openb_pod_list_default.csv). Needs the shared trace folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
traces=${RINGMASTER_TRACES:-$root/../shared/data/traces}
sim=${RINGMASTER_SIM:-$root/build/services/scheduler/ringmaster-sim}
if [[ ! -x $sim ]]; then
  echo "sim_openb.sh: $sim not built (ninja -C build ringmaster-sim)" >&2
  exit 2
fi
exec "$sim" --openb "$traces/alibaba-openb-2023" "$@"
