// FGD's experiment (USENIX ATC'23, section 6) on the Alibaba openb trace: tasks drawn from the
// trace keep arriving, none leaves, and each is placed by one policy of core/share_placement.h
// or fails; at each arrived GPU demand (a share of the cluster's GPU capacity) the share of GPU
// capacity left unallocated is recorded. Every policy sees the same arrivals.
#ifndef RINGMASTER_SERVICES_SCHEDULER_SIM_SHARE_EXPERIMENT_H_
#define RINGMASTER_SERVICES_SCHEDULER_SIM_SHARE_EXPERIMENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/core/share_placement.h"

namespace ringmaster::scheduler::sim {

// openb_node_list_gpu_node.csv: sn,cpu_milli,memory_mib,gpu,model.
absl::StatusOr<std::vector<ShareNode>> ReadOpenbNodes(const std::string& path);
// openb_pod_list_*.csv: name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,...
absl::StatusOr<std::vector<ShareTask>> ReadOpenbTasks(const std::string& path);

struct ShareExperimentOptions {
  // Arrived GPU demand, as shares of the cluster's GPU capacity, at which to record.
  std::vector<double> loads = {0.5, 0.7, 0.8, 0.9, 0.95, 1.0, 1.1, 1.2, 1.3};
  int seeds = 3;  // arrival sequences; figures are their mean
  int threads = 2;
};

struct ShareCurve {
  SharePolicy policy;
  std::vector<double> unallocated;  // per load: share of GPU capacity not allocated
  std::vector<double> failed;       // per load: tasks that found no node, so far
  double cpu_s = 0;                 // CPU of its runs (their threads')
};

std::vector<ShareCurve> RunShareExperiment(const std::vector<ShareNode>& nodes,
                                           const std::vector<ShareTask>& tasks,
                                           const std::vector<SharePolicy>& policies,
                                           const ShareExperimentOptions& options);

}  // namespace ringmaster::scheduler::sim

#endif  // RINGMASTER_SERVICES_SCHEDULER_SIM_SHARE_EXPERIMENT_H_
