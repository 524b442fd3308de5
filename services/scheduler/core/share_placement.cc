#include "scheduler/core/share_placement.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

namespace ringmaster::scheduler {
namespace {

// How much a placement's use of a pressured GPU type weighs against fragmentation: chosen from
// 100, 1,000, 3,000, 10,000 and 30,000 on the openb gpuspec33 list, seeds 1 to 3 (docs/
// fair-share.md, "Shared GPUs in the simulator"); 3,000 did best from 110% of demand on and
// within 2% of the best at 100%.
constexpr double kPressureWeight = 3000;

bool Allows(const ShareTask& task, const std::string& model) {
  return task.num_gpu == 0 || task.models.empty() ||
         std::find(task.models.begin(), task.models.end(), model) != task.models.end();
}

int64_t FreeGpu(const std::vector<int32_t>& gpus) {
  int64_t total = 0;
  for (int32_t g : gpus) total += g;
  return total;
}

// Fits, on a node state given by its parts (no copy of the node).
bool FitsState(const std::string& model, int64_t cpu, int64_t memory, const int32_t* gpus, size_t n,
               const ShareTask& task) {
  if (!Allows(task, model) || cpu < task.cpu || memory < task.memory) return false;
  if (task.num_gpu == 0) return true;
  const int32_t per = task.PerGpu();
  int32_t room = 0;
  for (size_t i = 0; i < n; ++i) room += gpus[i] >= per ? 1 : 0;
  return room >= task.num_gpu;
}

int64_t FragmentationState(const std::string& model, int64_t cpu, int64_t memory,
                           const int32_t* gpus, size_t n, const ShareTask& task) {
  int64_t total = 0, unusable = 0;
  const int32_t per = task.PerGpu();
  for (size_t i = 0; i < n; ++i) {
    total += gpus[i];
    if (gpus[i] < per) unusable += gpus[i];
  }
  if (task.num_gpu == 0 || !FitsState(model, cpu, memory, gpus, n, task)) return total;
  return unusable;
}

// The expected fragmentation of a node state, as its GPU type sees the mix: to the shapes that
// may not run on it every free GPU is a fragment.
double ExpectedState(const ShareContext::TypeMix& mix, const std::string& model, int64_t cpu,
                     int64_t memory, const int32_t* gpus, size_t n) {
  int64_t free = 0;
  for (size_t i = 0; i < n; ++i) free += gpus[i];
  double sum = mix.excluded_weight * static_cast<double>(free);
  for (const TaskShape* s : mix.allowed) {
    sum +=
        s->weight * static_cast<double>(FragmentationState(model, cpu, memory, gpus, n, s->task));
  }
  return sum;
}

// The GPUs a task would take: for one share, the fullest GPU with room (or every distinct
// choice, `all`); for whole GPUs, the first free ones.
std::vector<std::vector<int32_t>> GpuChoices(const ShareNode& node, const ShareTask& task,
                                             bool all) {
  if (task.num_gpu == 0) return {{}};
  const int32_t per = task.PerGpu();
  if (task.num_gpu == 1 && per < kWholeGpu) {
    std::vector<std::vector<int32_t>> out;
    std::vector<int32_t> seen;
    int32_t best = -1;
    for (int32_t g = 0; g < static_cast<int32_t>(node.gpu_free.size()); ++g) {
      const int32_t free = node.gpu_free[g];
      if (free < per) continue;
      if (all) {
        if (std::find(seen.begin(), seen.end(), free) == seen.end()) {
          seen.push_back(free);
          out.push_back({g});
        }
      } else if (best < 0 || free < node.gpu_free[best]) {
        best = g;
      }
    }
    if (!all && best >= 0) out.push_back({best});
    return out;
  }
  std::vector<int32_t> gpus;
  for (int32_t g = 0; g < static_cast<int32_t>(node.gpu_free.size()) &&
                      static_cast<int32_t>(gpus.size()) < task.num_gpu;
       ++g) {
    if (node.gpu_free[g] >= per) gpus.push_back(g);
  }
  if (static_cast<int32_t>(gpus.size()) < task.num_gpu) return {};
  return {gpus};
}

double Ratio(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0;
}

}  // namespace

TaskMix MixOf(const std::vector<ShareTask>& tasks) {
  std::map<std::tuple<int32_t, int32_t, std::vector<std::string>>, std::vector<const ShareTask*>>
      groups;
  for (const ShareTask& t : tasks) groups[{t.num_gpu, t.gpu_milli, t.models}].push_back(&t);
  TaskMix mix;
  for (const auto& group : groups) {
    // Not a structured binding: clang 14 does not let a lambda capture one.
    const std::vector<const ShareTask*>& members = group.second;
    auto median = [&](auto field) {
      std::vector<int64_t> v;
      for (const ShareTask* t : members) v.push_back(field(*t));
      std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
      return v[v.size() / 2];
    };
    TaskShape shape;
    shape.task = *members.front();
    shape.task.cpu = median([](const ShareTask& t) { return t.cpu; });
    shape.task.memory = median([](const ShareTask& t) { return t.memory; });
    shape.weight = static_cast<double>(members.size()) / static_cast<double>(tasks.size());
    mix.push_back(std::move(shape));
  }
  return mix;
}

bool Fits(const ShareNode& node, const ShareTask& task) {
  return FitsState(node.model, node.cpu_free, node.memory_free, node.gpu_free.data(),
                   node.gpu_free.size(), task);
}

int64_t Fragmentation(const ShareNode& node, const ShareTask& task) {
  return FragmentationState(node.model, node.cpu_free, node.memory_free, node.gpu_free.data(),
                            node.gpu_free.size(), task);
}

double ExpectedFragmentation(const ShareNode& node, const TaskMix& mix) {
  double sum = 0;
  for (const TaskShape& s : mix) sum += s.weight * static_cast<double>(Fragmentation(node, s.task));
  return sum;
}

void Allocate(ShareNode& node, const ShareTask& task, const std::vector<int32_t>& gpus) {
  node.cpu_free -= task.cpu;
  node.memory_free -= task.memory;
  for (int32_t g : gpus) node.gpu_free[g] -= task.PerGpu();
}

const char* SharePolicyName(SharePolicy policy) {
  switch (policy) {
    case SharePolicy::kRandom:
      return "random";
    case SharePolicy::kBestFit:
      return "best fit";
    case SharePolicy::kDotProduct:
      return "dot product";
    case SharePolicy::kGpuPacking:
      return "GPU packing";
    case SharePolicy::kFgd:
      return "FGD";
    case SharePolicy::kRingmaster:
      return "Ringmaster";
  }
  return "?";
}

std::optional<SharePolicy> LiveSharePolicy(const std::string& name) {
  if (name == "gpu-packing") return SharePolicy::kGpuPacking;
  if (name == "fgd") return SharePolicy::kFgd;
  if (name == "ringmaster") return SharePolicy::kRingmaster;
  return std::nullopt;
}

void RecentDemand::Add(const ShareTask& task, int64_t ranks) {
  if (task.num_gpu == 0 || ranks <= 0 || capacity_ <= 0) return;
  ranks = std::min(ranks, capacity_);
  window_.emplace_back(task, ranks);
  ranks_ += ranks;
  while (ranks_ > capacity_) {
    auto& [oldest, count] = window_.front();
    const int64_t drop = std::min(count, ranks_ - capacity_);
    count -= drop;
    ranks_ -= drop;
    if (count == 0) window_.pop_front();
  }
  ++changes_;
}

TaskMix RecentDemand::Mix() const {
  std::map<std::tuple<int32_t, int32_t, std::vector<std::string>>, int64_t> counts;
  for (const auto& [task, ranks] : window_) {
    counts[{task.num_gpu, task.PerGpu(), task.models}] += ranks;
  }
  TaskMix mix;
  for (const auto& [key, ranks] : counts) {
    TaskShape shape;
    std::tie(shape.task.num_gpu, shape.task.gpu_milli, shape.task.models) = key;
    shape.weight = static_cast<double>(ranks) / static_cast<double>(ranks_);
    mix.push_back(std::move(shape));
  }
  return mix;
}

ShareContext PrepareShares(const std::vector<ShareNode>& nodes, const TaskMix& mix) {
  ShareContext context;
  std::map<std::string, double> capacity;
  for (const ShareNode& node : nodes) {
    capacity[node.model] += static_cast<double>(node.gpu_free.size()) * kWholeGpu;
  }
  for (const auto& [model, c] : capacity) {
    ShareContext::TypeMix& type = context.types[model];
    for (const TaskShape& s : mix) {
      if (Allows(s.task, model)) {
        type.allowed.push_back(&s);
      } else {
        type.excluded_weight += s.weight;
      }
    }
  }
  // The pressure: a task that may run anywhere then goes where it takes least from tasks that
  // may not. In openb's gpuspec33 list the T4-only tasks alone ask for more than the T4s there
  // are, and FGD, which sees only fragments, hands them to tasks that could have used a G2.
  for (const TaskShape& s : mix) {
    if (s.task.models.empty() || s.task.num_gpu == 0) continue;
    double cap = 0;
    for (const auto& [model, c] : capacity) cap += Allows(s.task, model) ? c : 0;
    if (cap <= 0) continue;
    for (const auto& [model, c] : capacity) {
      if (Allows(s.task, model)) {
        context.types[model].pressure += s.weight * static_cast<double>(s.task.GpuDemand()) / cap;
      }
    }
  }
  return context;
}

ShareChoice ChooseShare(const std::vector<ShareNode>& nodes, const ShareTask& task,
                        SharePolicy policy, const ShareContext& context,
                        const std::vector<double>& expected, std::mt19937_64& rng) {
  ShareChoice best;
  if (policy == SharePolicy::kRandom) {
    int64_t seen = 0;
    for (int32_t n = 0; n < static_cast<int32_t>(nodes.size()); ++n) {
      if (!Fits(nodes[n], task)) continue;
      // Reservoir sampling: each fitting node with the same chance, in one pass.
      if (std::uniform_int_distribution<int64_t>(0, seen++)(rng) == 0) best.node = n;
    }
    if (best.node < 0) return best;
    auto choices = GpuChoices(nodes[best.node], task, /*all=*/true);
    best.gpus = choices[std::uniform_int_distribution<size_t>(0, choices.size() - 1)(rng)];
    return best;
  }
  const bool gradient = policy == SharePolicy::kFgd || policy == SharePolicy::kRingmaster;
  // Lower is better, compared as a tuple.
  using Score = std::tuple<double, double, double>;
  Score best_score{std::numeric_limits<double>::infinity(), 0, 0};
  std::vector<int32_t> after;
  const int32_t per = task.PerGpu();
  const int64_t demand = task.GpuDemand();
  for (int32_t n = 0; n < static_cast<int32_t>(nodes.size()); ++n) {
    const ShareNode& node = nodes[n];
    if (!Fits(node, task)) continue;
    const int64_t gpu_cap = static_cast<int64_t>(node.gpu_free.size()) * kWholeGpu;
    const int64_t gpu_free = FreeGpu(node.gpu_free);
    const ShareContext::TypeMix* type = nullptr;
    if (gradient) {
      auto it = context.types.find(node.model);
      if (it == context.types.end()) continue;  // a type the context was not prepared for
      type = &it->second;
    }
    for (const std::vector<int32_t>& gpus : GpuChoices(node, task, gradient)) {
      Score score;
      switch (policy) {
        case SharePolicy::kBestFit:
          score = {Ratio(node.cpu_free - task.cpu, node.cpu_total) +
                       Ratio(node.memory_free - task.memory, node.memory_total) +
                       Ratio(gpu_free - demand, gpu_cap),
                   0, 0};
          break;
        case SharePolicy::kDotProduct:
          score = {
              -(Ratio(task.cpu, node.cpu_total) * Ratio(node.cpu_free, node.cpu_total) +
                Ratio(task.memory, node.memory_total) * Ratio(node.memory_free, node.memory_total) +
                Ratio(demand, gpu_cap) * Ratio(gpu_free, gpu_cap)),
              0, 0};
          break;
        case SharePolicy::kGpuPacking: {
          int32_t idle = 0;
          for (int32_t g : node.gpu_free) idle += g == kWholeGpu ? 1 : 0;
          if (task.num_gpu == 0) {
            score = {Ratio(node.cpu_free - task.cpu, node.cpu_total), 0, 0};
          } else if (task.num_gpu == 1 && per < kWholeGpu) {
            const int32_t free = node.gpu_free[gpus[0]];
            score = {free < kWholeGpu ? 0.0 : 1.0, static_cast<double>(free),
                     static_cast<double>(idle)};
          } else {
            score = {static_cast<double>(idle), 0, 0};
          }
          break;
        }
        case SharePolicy::kFgd:
        case SharePolicy::kRingmaster: {
          after = node.gpu_free;
          for (int32_t g : gpus) after[g] -= per;
          const double grown =
              ExpectedState(*type, node.model, node.cpu_free - task.cpu,
                            node.memory_free - task.memory, after.data(), after.size()) -
              expected[n];
          // Ringmaster: among equal gradients, the node left with the least free GPU, so that
          // emptier nodes stay whole for the tasks of many GPUs; FGD takes the first.
          if (policy == SharePolicy::kFgd) {
            score = {std::round(grown * 1e6) / 1e6, 0, 0};
          } else {
            // Ringmaster: what the task takes of a GPU type is charged at that type's pressure
            // (kPressureWeight), and among equal scores the node left with the least free GPU
            // wins, so that emptier nodes stay whole for the tasks of many GPUs.
            const double charged =
                grown + kPressureWeight * static_cast<double>(demand) * type->pressure;
            score = {std::round(charged * 1e6) / 1e6, static_cast<double>(gpu_free - demand), 0};
          }
          break;
        }
        case SharePolicy::kRandom:
          break;
      }
      if (score < best_score) {
        best_score = score;
        best.node = n;
        best.gpus = gpus;
      }
    }
  }
  return best;
}

}  // namespace ringmaster::scheduler
