#include "trainer/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint_metadata.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/local_ranks.h"
#include "trainer/cpu_compute.h"
#include "trainer/local_communicator.h"
#include "trainer/trainer.h"

namespace ringmaster::trainer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::RunOnLocalRanks;

TrainingCheckpoint Sample(int64_t step) {
  TrainingCheckpoint c;
  c.step = step;
  c.seed = 42;
  c.world_size = 2;
  c.batch_size = 32;
  c.lr = 0.05;
  c.data_position = step % 8;
  c.rng_state = 0x1234567890abcdefull + static_cast<uint64_t>(step);
  c.model = "mlp-small";
  for (int i = 0; i < 1000; ++i) c.parameters.push_back(0.001f * static_cast<float>(i) - 0.3f);
  return c;
}

class CheckpointDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/checkpoint-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return absl::StrCat(dir_, "/", name); }
  std::string Read(const std::string& name) const {
    std::ifstream in(Path(name), std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void Write(const std::string& name, const std::string& bytes) const {
    std::ofstream(Path(name), std::ios::binary | std::ios::trunc) << bytes;
  }
  std::vector<std::string> Files() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  void ExpectAResizeEndsNearTheUnresizedRun(double momentum);

  std::string dir_;
};

TEST(CheckpointFormatTest, RoundTripKeepsEveryField) {
  TrainingCheckpoint c = Sample(1200);
  c.momentum = 0.9;
  c.optimizer_state = {1.5f, -2.0f};
  absl::StatusOr<TrainingCheckpoint> back = DecodeCheckpoint(EncodeCheckpoint(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, c);
}

// Version 1 as the trainer wrote it before momentum: the same fields less the momentum.
std::string EncodeVersion1(const TrainingCheckpoint& c) {
  std::string out = "RMCKPT01";
  auto put = [&out](const auto& value) {
    out.append(reinterpret_cast<const char*>(&value), sizeof(value));
  };
  auto put_floats = [&](const std::vector<float>& values) {
    put(static_cast<uint64_t>(values.size()));
    out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  };
  put(uint32_t{1});
  put(c.step);
  put(c.seed);
  put(c.world_size);
  put(c.batch_size);
  put(c.lr);
  put(c.data_position);
  put(c.rng_state);
  put(static_cast<uint32_t>(c.model.size()));
  out.append(c.model);
  put_floats(c.parameters);
  put_floats(c.optimizer_state);
  uint64_t hash = 14695981039346656037ull;  // FNV-1a 64
  for (unsigned char ch : out) hash = (hash ^ ch) * 1099511628211ull;
  put(hash);
  return out;
}

TEST(CheckpointFormatTest, AVersion1FileStillReadsAsPlainSgd) {
  const TrainingCheckpoint c = Sample(300);
  absl::StatusOr<TrainingCheckpoint> back = DecodeCheckpoint(EncodeVersion1(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, c);
  EXPECT_EQ(back->momentum, 0);
}

TEST(CheckpointFormatTest, TornFileIsRejectedAtEveryLength) {
  const std::string bytes = EncodeCheckpoint(Sample(10));
  for (size_t length :
       {size_t{0}, size_t{7}, size_t{16}, size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    absl::StatusOr<TrainingCheckpoint> torn = DecodeCheckpoint(bytes.substr(0, length));
    EXPECT_EQ(torn.status().code(), absl::StatusCode::kDataLoss) << "length " << length;
  }
}

TEST(CheckpointFormatTest, AFlippedBitAnywhereIsACorruptFile) {
  const std::string bytes = EncodeCheckpoint(Sample(10));
  for (size_t at : {size_t{3}, size_t{20}, size_t{60}, bytes.size() / 2, bytes.size() - 3}) {
    std::string corrupt = bytes;
    corrupt[at] = static_cast<char>(corrupt[at] ^ 0x10);
    absl::StatusOr<TrainingCheckpoint> decoded = DecodeCheckpoint(corrupt);
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << "byte " << at;
  }
  std::string corrupt = bytes;
  corrupt[bytes.size() / 2] ^= 1;
  EXPECT_THAT(DecodeCheckpoint(corrupt).status().message(), HasSubstr("checksum mismatch"));
}

TEST(CheckpointFormatTest, FileNamesOrderBySteps) {
  EXPECT_EQ(CheckpointFileName(1200), "ckpt-000000001200.rmck");
  EXPECT_LT(CheckpointFileName(99), CheckpointFileName(100));
}

TEST_F(CheckpointDirTest, WriteIsAtomicLeavesNoTempFilesAndKeepsTheNewestTwo) {
  for (int64_t step : {10, 20, 30}) {
    ASSERT_TRUE(WriteCheckpoint(dir_, Sample(step), 1700000000000 + step).ok());
  }
  EXPECT_THAT(Files(),
              ElementsAre("checkpoint.meta", "ckpt-000000000020.rmck", "ckpt-000000000030.rmck"));
  absl::StatusOr<CheckpointMetadata> meta = ReadCheckpointMetadata(dir_);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->step, 30);
  EXPECT_EQ(meta->time_ms, 1700000000030);
  EXPECT_EQ(meta->file, "ckpt-000000000030.rmck");
}

// The directory can belong to a team's Unix user while the worker (root) reads the metadata.
TEST_F(CheckpointDirTest, MetadataPlantedAsALinkFifoOrDeviceIsRefusedWithoutBlocking) {
  const std::string meta = dir_ + "/checkpoint.meta";
  ASSERT_EQ(symlink("/dev/zero", meta.c_str()), 0);
  EXPECT_EQ(ReadCheckpointMetadata(dir_).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(unlink(meta.c_str()), 0);
  ASSERT_EQ(mkfifo(meta.c_str(), 0644), 0);
  EXPECT_EQ(ReadCheckpointMetadata(dir_).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(unlink(meta.c_str()), 0);
  std::ofstream(meta) << std::string(5000, '#');
  EXPECT_EQ(ReadCheckpointMetadata(dir_).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(unlink(meta.c_str()), 0);
  EXPECT_EQ(ReadCheckpointMetadata(dir_).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CheckpointDirTest, WriteCreatesMissingDirectories) {
  const std::string nested = absl::StrCat(dir_, "/job/attempts");
  ASSERT_TRUE(WriteCheckpoint(nested, Sample(5), 1700000000000).ok());
  EXPECT_TRUE(std::filesystem::exists(absl::StrCat(nested, "/ckpt-000000000005.rmck")));
}

TEST_F(CheckpointDirTest, PruningNeverRemovesTheNewCheckpointBehindANewerUnusableFile) {
  // A newer file this run cannot use (here: torn) stays, and does not count against `keep`.
  const std::string whole = EncodeCheckpoint(Sample(300));
  Write(CheckpointFileName(300), whole.substr(0, whole.size() / 2));
  ASSERT_TRUE(WriteCheckpoint(dir_, Sample(100), 1, /*keep=*/2).ok());
  ASSERT_TRUE(WriteCheckpoint(dir_, Sample(150), 2, /*keep=*/2).ok());
  EXPECT_TRUE(std::filesystem::exists(Path(CheckpointFileName(150))));
  EXPECT_TRUE(std::filesystem::exists(Path(CheckpointFileName(100))));
  ASSERT_TRUE(WriteCheckpoint(dir_, Sample(160), 3, /*keep=*/2).ok());
  EXPECT_TRUE(std::filesystem::exists(Path(CheckpointFileName(160))));
  EXPECT_TRUE(std::filesystem::exists(Path(CheckpointFileName(150))));
  EXPECT_FALSE(std::filesystem::exists(Path(CheckpointFileName(100))));
  EXPECT_TRUE(std::filesystem::exists(Path(CheckpointFileName(300))));
  std::optional<FoundCheckpoint> found = FindNewestCheckpoint(dir_, nullptr);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->checkpoint.step, 160);
}

TEST_F(CheckpointDirTest, NewestCompleteIsChosenAndTornOrCorruptOnesAreSkippedWithAReason) {
  ASSERT_TRUE(WriteCheckpoint(dir_, Sample(10), 1, /*keep=*/10).ok());
  ASSERT_TRUE(WriteCheckpoint(dir_, Sample(20), 2, /*keep=*/10).ok());
  // A torn newer file (as a crash without the atomic rename would leave) and a corrupt one.
  const std::string whole = EncodeCheckpoint(Sample(30));
  Write(CheckpointFileName(30), whole.substr(0, whole.size() / 3));
  std::string corrupt = EncodeCheckpoint(Sample(40));
  corrupt[corrupt.size() / 2] ^= 0x40;
  Write(CheckpointFileName(40), corrupt);
  // A temp file of a write in progress is never a candidate.
  Write(".ckpt-000000000050.rmck.tmp.123", EncodeCheckpoint(Sample(50)));

  std::vector<std::string> skipped;
  std::optional<FoundCheckpoint> found = FindNewestCheckpoint(dir_, &skipped);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->checkpoint.step, 20);
  EXPECT_EQ(found->checkpoint, Sample(20));
  EXPECT_EQ(found->path, Path(CheckpointFileName(20)));
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_THAT(skipped[0], HasSubstr("ckpt-000000000040.rmck: checkpoint checksum mismatch"));
  EXPECT_THAT(skipped[1], HasSubstr("ckpt-000000000030.rmck"));
}

TEST_F(CheckpointDirTest, AFileRenamedToAnotherStepIsSkipped) {
  Write(CheckpointFileName(70), EncodeCheckpoint(Sample(60)));
  std::vector<std::string> skipped;
  EXPECT_FALSE(FindNewestCheckpoint(dir_, &skipped).has_value());
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0], HasSubstr("holds step 60, not 70"));
}

TEST_F(CheckpointDirTest, UnusableCheckpointsAreSkippedWithTheCallersReason) {
  ASSERT_TRUE(WriteCheckpoint(dir_, Sample(10), 1).ok());
  std::vector<std::string> skipped;
  auto found = FindNewestCheckpoint(dir_, &skipped, [](const TrainingCheckpoint&) {
    return absl::FailedPreconditionError("made with model mlp-small, this run has mlp");
  });
  EXPECT_FALSE(found.has_value());
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0], HasSubstr("this run has mlp"));
}

TEST_F(CheckpointDirTest, NoDirectoryMeansNoCheckpoint) {
  std::vector<std::string> skipped;
  EXPECT_FALSE(FindNewestCheckpoint(Path("absent"), &skipped).has_value());
  EXPECT_TRUE(skipped.empty());
}

TEST(CheckpointMetadataTest, ParsesWhatACommandWorkloadWrites) {
  absl::StatusOr<CheckpointMetadata> meta =
      ParseCheckpointMetadata("# my job\nstep=1200\ntime_ms=1764000000000\nother=x\n");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->step, 1200);
  EXPECT_EQ(meta->time_ms, 1764000000000);
  EXPECT_EQ(*ParseCheckpointMetadata(FormatCheckpointMetadata(*meta)), *meta);
}

TEST(CheckpointMetadataTest, BadOrMissingFieldsAreNamed) {
  auto missing_time = ParseCheckpointMetadata("step=3\n");
  EXPECT_EQ(missing_time.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing_time.status().message(), HasSubstr("time_ms"));
  auto bad_step = ParseCheckpointMetadata("step=-1\ntime_ms=5\n");
  EXPECT_EQ(bad_step.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_step.status().message(), HasSubstr("step must be an integer >= 0"));
  auto not_kv = ParseCheckpointMetadata("step 3\n");
  EXPECT_EQ(not_kv.status().code(), absl::StatusCode::kInvalidArgument);
}

TrainerConfig ResumableConfig(const std::string& dir, int steps) {
  TrainerConfig config;
  config.model = ModelSpec{"test", 128, {32, 16}, 5};
  config.batch_size = 16;
  config.steps = steps;
  config.warmup_steps = 1;
  config.lr = 0.1;
  config.log_every = 5;
  config.data_batches = 7;
  config.bucket_bytes = 4 << 10;
  config.checkpoint_dir = dir;
  config.checkpoint_every = 4;
  return config;
}

// What the MPI e2e tests prove across processes, here on in-process ranks: a run interrupted
// and resumed ends with the weights of a run never interrupted.
TEST_F(CheckpointDirTest, ResumedTrainingEndsWithTheWeightsOfAnUninterruptedRun) {
  auto train = [](const TrainerConfig& config, std::vector<TrainResult>* results) {
    results->assign(2, TrainResult{});
    auto statuses = RunOnLocalRanks(2, [&](LocalCommunicator& comm) -> absl::Status {
      CpuCompute compute(1);
      absl::StatusOr<TrainResult> result = Train(config, compute, comm, nullptr);
      if (!result.ok()) return result.status();
      (*results)[comm.rank()] = *result;
      return absl::OkStatus();
    });
    for (const absl::Status& status : statuses) ASSERT_TRUE(status.ok()) << status;
  };
  std::vector<TrainResult> whole, first, second;
  train(ResumableConfig(Path("whole"), 18), &whole);
  train(ResumableConfig(Path("split"), 10), &first);  // checkpoints at 4 and 8: 2 steps lost
  EXPECT_NE(first[0].weights_fingerprint, whole[0].weights_fingerprint);
  train(ResumableConfig(Path("split"), 18), &second);
  EXPECT_EQ(second[0].resumed_from_step, 8);
  EXPECT_EQ(second[1].resumed_from_step, 8);
  EXPECT_EQ(second[0].weights_fingerprint, whole[0].weights_fingerprint);
  EXPECT_EQ(second[1].ranks_differing, 0);
}

// Trains `config` on `ranks` in-process ranks; rank 0's result.
absl::StatusOr<TrainResult> TrainOnLocalRanks(const TrainerConfig& config, int ranks) {
  std::vector<absl::StatusOr<TrainResult>> results(ranks, absl::UnknownError("not run"));
  auto statuses = RunOnLocalRanks(ranks, [&](LocalCommunicator& comm) -> absl::Status {
    CpuCompute compute(1);
    results[comm.rank()] = Train(config, compute, comm, nullptr);
    return results[comm.rank()].status();
  });
  for (const absl::Status& status : statuses) {
    if (!status.ok()) return status;
  }
  return results[0];
}

// The optimizer state is saved and restored: with momentum, a resumed run is still exact.
TEST_F(CheckpointDirTest, ResumedTrainingWithMomentumEndsWithTheWeightsOfAnUninterruptedRun) {
  TrainerConfig whole_config = ResumableConfig(Path("whole"), 18);
  whole_config.momentum = 0.9;
  absl::StatusOr<TrainResult> whole = TrainOnLocalRanks(whole_config, 2);
  ASSERT_TRUE(whole.ok()) << whole.status();
  TrainerConfig split = whole_config;
  split.checkpoint_dir = Path("split");
  split.steps = 8;
  ASSERT_TRUE(TrainOnLocalRanks(split, 2).ok());
  std::optional<FoundCheckpoint> middle = FindNewestCheckpoint(Path("split"), nullptr);
  ASSERT_TRUE(middle.has_value());
  EXPECT_EQ(middle->checkpoint.momentum, 0.9);
  ASSERT_EQ(middle->checkpoint.optimizer_state.size(), middle->checkpoint.parameters.size());
  EXPECT_NE(*std::max_element(middle->checkpoint.optimizer_state.begin(),
                              middle->checkpoint.optimizer_state.end()),
            0.0f);
  split.steps = 18;
  absl::StatusOr<TrainResult> resumed = TrainOnLocalRanks(split, 2);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->resumed_from_step, 8);
  EXPECT_EQ(resumed->weights_fingerprint, whole->weights_fingerprint);
  // Another momentum is another configuration: its run starts afresh.
  split.momentum = 0.5;
  split.checkpoint_every = 0;
  absl::StatusOr<TrainResult> other = TrainOnLocalRanks(split, 2);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->resumed_from_step, 0);
}

// The in-process version of check_elastic.sh: a job resized from 2 to 4 ranks keeps its
// global batch (the second run's --batch-size of 16 per rank would double it), so it trains
// the same samples as the run never resized and ends within rounding of its weights; with
// momentum, the velocity carries over too.
TEST_F(CheckpointDirTest, AResumeAtAnotherWorldSizeKeepsTheGlobalBatchAndTheDataOrder) {
  for (double momentum : {0.0, 0.9}) {
    SCOPED_TRACE(absl::StrCat("momentum ", momentum));
    ExpectAResizeEndsNearTheUnresizedRun(momentum);
  }
}

void CheckpointDirTest::ExpectAResizeEndsNearTheUnresizedRun(double momentum) {
  const std::string resized_dir = Path(absl::StrCat("resized-", momentum));
  const std::string whole_dir = Path(absl::StrCat("whole-", momentum));
  TrainerConfig config = ResumableConfig(resized_dir, 8);
  config.momentum = momentum;
  ASSERT_TRUE(TrainOnLocalRanks(config, 2).ok());
  config.steps = 16;
  absl::StatusOr<TrainResult> resized = TrainOnLocalRanks(config, 4);
  ASSERT_TRUE(resized.ok()) << resized.status();
  EXPECT_EQ(resized->resumed_from_step, 8);
  EXPECT_EQ(resized->ranks_differing, 0);
  std::optional<FoundCheckpoint> end = FindNewestCheckpoint(resized_dir, nullptr);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->checkpoint.step, 16);
  EXPECT_EQ(end->checkpoint.world_size, 4);
  EXPECT_EQ(end->checkpoint.batch_size, 8);

  config.checkpoint_dir = whole_dir;
  absl::StatusOr<TrainResult> whole = TrainOnLocalRanks(config, 2);
  ASSERT_TRUE(whole.ok()) << whole.status();
  std::optional<FoundCheckpoint> whole_end = FindNewestCheckpoint(whole_dir, nullptr);
  ASSERT_TRUE(whole_end.has_value());
  ASSERT_EQ(whole_end->checkpoint.parameters.size(), end->checkpoint.parameters.size());
  float max_difference = 0;
  for (size_t i = 0; i < end->checkpoint.parameters.size(); ++i) {
    max_difference = std::max(max_difference, std::abs(end->checkpoint.parameters[i] -
                                                       whole_end->checkpoint.parameters[i]));
  }
  EXPECT_LT(max_difference, 1e-6f);
  EXPECT_NEAR(resized->final_loss, whole->final_loss, 1e-5);
}

TEST_F(CheckpointDirTest, AResumeAtAWorldSizeThatDoesNotDivideTheGlobalBatchIsRefused) {
  TrainerConfig config = ResumableConfig(dir_, 4);  // 2 ranks x 16: a global batch of 32
  ASSERT_TRUE(TrainOnLocalRanks(config, 2).ok());
  config.steps = 8;
  absl::StatusOr<TrainResult> odd = TrainOnLocalRanks(config, 3);
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(odd.status().message(),
              HasSubstr("a global batch of 32 does not split evenly over 3 rank(s)"));
}

TEST_F(CheckpointDirTest, AnExplicitGlobalBatchSkipsACheckpointOfAnotherOne) {
  TrainerConfig config = ResumableConfig(dir_, 4);
  ASSERT_TRUE(TrainOnLocalRanks(config, 2).ok());
  config.steps = 8;
  config.global_batch_size = 64;
  config.checkpoint_every = 0;  // writes none that would replace step 4's
  absl::StatusOr<TrainResult> fresh = TrainOnLocalRanks(config, 4);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->resumed_from_step, 0);
  config.global_batch_size = 32;
  config.steps = 12;
  absl::StatusOr<TrainResult> resumed = TrainOnLocalRanks(config, 4);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->resumed_from_step, 4);
}

TEST_F(CheckpointDirTest, StopFlagCheckpointsTheAgreedStepAndStopsEveryRank) {
  TrainerConfig config = ResumableConfig(dir_, 50);
  config.checkpoint_every = 0;
  std::vector<TrainResult> results(2);
  auto statuses = RunOnLocalRanks(2, [&](LocalCommunicator& comm) -> absl::Status {
    CpuCompute compute(1);
    // Rank 1 "gets SIGTERM" during step 6; both stop after the same step.
    StepObserver on_step = [&comm](const StepStats& s) {
      if (comm.rank() == 1 && s.step == 6) SetStopRequestedForTest(true);
    };
    absl::StatusOr<TrainResult> result = Train(config, compute, comm, nullptr, on_step);
    if (!result.ok()) return result.status();
    results[comm.rank()] = *result;
    return absl::OkStatus();
  });
  SetStopRequestedForTest(false);
  for (const absl::Status& status : statuses) ASSERT_TRUE(status.ok()) << status;
  // Rank 0 may have passed step 6's boundary check before rank 1 set the flag: 6 or 7.
  EXPECT_GE(results[0].stopped_at_step, 6);
  EXPECT_LE(results[0].stopped_at_step, 7);
  EXPECT_EQ(results[1].stopped_at_step, results[0].stopped_at_step);
  std::vector<std::string> skipped;
  std::optional<FoundCheckpoint> found = FindNewestCheckpoint(dir_, &skipped);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->checkpoint.step, results[0].stopped_at_step);
}

}  // namespace
}  // namespace ringmaster::trainer
