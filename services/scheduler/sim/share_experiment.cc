#include "scheduler/sim/share_experiment.h"

#include <time.h>

#include <atomic>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ringmaster::scheduler::sim {
namespace {

absl::StatusOr<std::vector<std::vector<std::string>>> ReadCsv(const std::string& path,
                                                              size_t columns) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::vector<std::vector<std::string>> rows;
  std::string line;
  std::getline(in, line);  // the header
  for (int n = 2; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> row = absl::StrSplit(line, ',');
    if (row.size() < columns) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", n, ": expected ", columns, " columns, got ", row.size()));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

absl::Status BadNumber(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": not a number: ", what));
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

// One policy on one arrival sequence: unallocated share and failures at each load.
void RunOne(const std::vector<ShareNode>& start, const std::vector<ShareTask>& tasks,
            const std::vector<int32_t>& arrivals, SharePolicy policy, const TaskMix& mix,
            const std::vector<double>& loads, uint64_t seed, std::vector<double>& unallocated,
            std::vector<double>& failed) {
  std::vector<ShareNode> nodes = start;
  int64_t capacity = 0;
  for (const ShareNode& n : nodes) capacity += static_cast<int64_t>(n.gpu_free.size()) * kWholeGpu;
  std::vector<double> expected(nodes.size(), 0);
  const bool gradient = policy == SharePolicy::kFgd || policy == SharePolicy::kRingmaster;
  if (gradient) {
    for (size_t i = 0; i < nodes.size(); ++i) expected[i] = ExpectedFragmentation(nodes[i], mix);
  }
  const ShareContext context = PrepareShares(nodes, mix);
  std::mt19937_64 rng(seed * 7919 + static_cast<uint64_t>(policy));
  int64_t arrived = 0, allocated = 0, failures = 0;
  size_t next = 0;
  for (int32_t index : arrivals) {
    if (next >= loads.size()) break;
    const ShareTask& task = tasks[index];
    arrived += task.GpuDemand();
    ShareChoice choice = ChooseShare(nodes, task, policy, context, expected, rng);
    if (choice.node < 0) {
      ++failures;
    } else {
      Allocate(nodes[choice.node], task, choice.gpus);
      allocated += task.GpuDemand();
      if (gradient) expected[choice.node] = ExpectedFragmentation(nodes[choice.node], mix);
    }
    while (next < loads.size() && static_cast<double>(arrived) >= loads[next] * capacity) {
      unallocated[next] += 1.0 - static_cast<double>(allocated) / static_cast<double>(capacity);
      failed[next] += static_cast<double>(failures);
      ++next;
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<ShareNode>> ReadOpenbNodes(const std::string& path) {
  auto rows = ReadCsv(path, 5);
  if (!rows.ok()) return rows.status();
  std::vector<ShareNode> nodes;
  for (const auto& row : *rows) {
    ShareNode node;
    int32_t gpus = 0;
    if (!absl::SimpleAtoi(row[1], &node.cpu_total) ||
        !absl::SimpleAtoi(row[2], &node.memory_total) || !absl::SimpleAtoi(row[3], &gpus) ||
        gpus < 0 || gpus > 64) {
      return BadNumber(path, absl::StrJoin(row, ","));
    }
    node.model = row[4];
    node.cpu_free = node.cpu_total;
    node.memory_free = node.memory_total;
    node.gpu_free.assign(gpus, kWholeGpu);
    nodes.push_back(std::move(node));
  }
  return nodes;
}

absl::StatusOr<std::vector<ShareTask>> ReadOpenbTasks(const std::string& path) {
  auto rows = ReadCsv(path, 6);
  if (!rows.ok()) return rows.status();
  std::vector<ShareTask> tasks;
  for (const auto& row : *rows) {
    ShareTask task;
    if (!absl::SimpleAtoi(row[1], &task.cpu) || !absl::SimpleAtoi(row[2], &task.memory) ||
        !absl::SimpleAtoi(row[3], &task.num_gpu) || !absl::SimpleAtoi(row[4], &task.gpu_milli) ||
        task.num_gpu < 0 || task.num_gpu > 64 || task.gpu_milli < 0 || task.gpu_milli > kWholeGpu) {
      return BadNumber(path, absl::StrJoin(row, ","));
    }
    if (task.num_gpu == 0) task.gpu_milli = 0;
    if (task.num_gpu > 1) task.gpu_milli = kWholeGpu;
    if (!row[5].empty()) task.models = absl::StrSplit(row[5], '|');
    tasks.push_back(std::move(task));
  }
  return tasks;
}

std::vector<ShareCurve> RunShareExperiment(const std::vector<ShareNode>& nodes,
                                           const std::vector<ShareTask>& tasks,
                                           const std::vector<SharePolicy>& policies,
                                           const ShareExperimentOptions& options) {
  const TaskMix mix = MixOf(tasks);
  int64_t capacity = 0;
  for (const ShareNode& n : nodes) capacity += static_cast<int64_t>(n.gpu_free.size()) * kWholeGpu;
  const double top = options.loads.empty() ? 0 : options.loads.back();
  // The arrivals of each seed: tasks drawn from the trace, with replacement, until the arrived
  // GPU demand passes the highest load.
  std::vector<std::vector<int32_t>> arrivals(options.seeds);
  for (int s = 0; s < options.seeds; ++s) {
    std::mt19937_64 rng(static_cast<uint64_t>(s) + 1);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(tasks.size()) - 1);
    for (int64_t arrived = 0; static_cast<double>(arrived) < top * capacity + kWholeGpu * 8;) {
      const int32_t index = pick(rng);
      arrivals[s].push_back(index);
      arrived += tasks[index].GpuDemand();
    }
  }
  std::vector<ShareCurve> curves(policies.size());
  std::vector<std::pair<size_t, int>> work;
  for (size_t p = 0; p < policies.size(); ++p) {
    curves[p].policy = policies[p];
    curves[p].unallocated.assign(options.loads.size(), 0);
    curves[p].failed.assign(options.loads.size(), 0);
    for (int s = 0; s < options.seeds; ++s) work.emplace_back(p, s);
  }
  // Runs are independent; each thread sums into its own copies, added up at the end.
  std::atomic<size_t> next{0};
  std::vector<std::vector<ShareCurve>> partial(std::max(1, options.threads), curves);
  auto run = [&](int t) {
    for (size_t i = next++; i < work.size(); i = next++) {
      const auto [p, s] = work[i];
      const double t0 = ThreadCpuSeconds();
      RunOne(nodes, tasks, arrivals[s], policies[p], mix, options.loads, s + 1,
             partial[t][p].unallocated, partial[t][p].failed);
      partial[t][p].cpu_s += ThreadCpuSeconds() - t0;
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < options.threads; ++t) pool.emplace_back(run, t);
  run(0);
  for (std::thread& t : pool) t.join();
  for (const auto& mine : partial) {
    for (size_t p = 0; p < curves.size(); ++p) {
      for (size_t l = 0; l < options.loads.size(); ++l) {
        curves[p].unallocated[l] += mine[p].unallocated[l] / options.seeds;
        curves[p].failed[l] += mine[p].failed[l] / options.seeds;
      }
      curves[p].cpu_s += mine[p].cpu_s;
    }
  }
  return curves;
}

}  // namespace ringmaster::scheduler::sim
