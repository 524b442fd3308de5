// DecodeSampleBatch and ValidateSample: what the service runs on every wire message, as pure
// functions.
#include "metrics/convert/sample_decode.h"

#include <functional>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "metrics/core/job_metrics.h"

namespace ringmaster::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

v1::Sample Good() {
  v1::Sample s;
  s.set_job_id("j-00aa");
  s.set_rank(1);
  s.set_world_size(2);
  s.set_queue("default");
  s.set_model("mlp");
  s.set_gpu_type("t4");
  s.set_worker_id("w1");
  s.set_step(7);
  s.set_step_seconds(0.05);
  s.set_samples_per_second(100);
  s.set_allreduce_bytes(4e6);
  s.set_allreduce_seconds(0.004);
  s.set_loss(2.0);
  return s;
}

struct BadCase {
  std::function<void(v1::Sample&)> mutate;
  DropReason reason;
  std::string message_start;  // the field first, then what was expected
};

TEST(SampleDecodeTest, EveryBadFieldIsRefusedWithInvalidArgumentNamingIt) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<BadCase> cases = {
      {[](v1::Sample& s) { s.set_job_id("J-00AA"); }, DropReason::kBadId, "job_id must be"},
      {[](v1::Sample& s) { s.set_job_id("j-"); }, DropReason::kBadId, "job_id must be"},
      {[](v1::Sample& s) { s.set_queue("Default"); }, DropReason::kBadLabel, "queue must be"},
      {[](v1::Sample& s) { s.set_model(std::string(64, 'm')); }, DropReason::kBadLabel,
       "model must be"},
      {[](v1::Sample& s) { s.set_gpu_type("t4\n"); }, DropReason::kBadLabel, "gpu_type must be"},
      {[](v1::Sample& s) { s.set_worker_id("w_1"); }, DropReason::kBadLabel, "worker_id must be"},
      {[](v1::Sample& s) { s.set_world_size(0); }, DropReason::kBadNumber,
       "world_size must be in 1..4096, got 0"},
      {[](v1::Sample& s) { s.set_rank(2); }, DropReason::kBadNumber,
       "rank must be in 0..world_size-1 (0..1), got 2"},
      {[](v1::Sample& s) { s.set_attempt(-1); }, DropReason::kBadNumber,
       "attempt must be >= 0, got -1"},
      {[](v1::Sample& s) { s.set_step(-3); }, DropReason::kBadNumber, "step must be >= 0, got -3"},
      {[](v1::Sample& s) { s.set_step_seconds(-1); }, DropReason::kBadNumber,
       "step_seconds must be a finite number in [0, 86400], got -1"},
      {[&](v1::Sample& s) { s.set_samples_per_second(nan); }, DropReason::kBadNumber,
       "samples_per_second must be a finite number in [0, 1e9], got nan"},
      {[](v1::Sample& s) { s.set_allreduce_bytes(1e14); }, DropReason::kBadNumber,
       "allreduce_bytes must be"},
      {[&](v1::Sample& s) { s.set_allreduce_seconds(inf); }, DropReason::kBadNumber,
       "allreduce_seconds must be"},
      {[](v1::Sample& s) { s.set_loss(1e7); }, DropReason::kBadNumber, "loss must be"},
  };
  for (const BadCase& c : cases) {
    v1::Sample s = Good();
    c.mutate(s);
    DropReason reason = DropReason::kNone;
    absl::Status status = ValidateSample(FromProto(s), &reason);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message_start;
    EXPECT_THAT(std::string(status.message()), StartsWith(c.message_start));
    EXPECT_EQ(reason, c.reason) << c.message_start;
  }
}

TEST(SampleDecodeTest, AGoodSampleIsValidAndDecodedFieldByField) {
  v1::Sample s = Good();
  DropReason reason = DropReason::kBadId;
  SampleIn in = FromProto(s);
  EXPECT_TRUE(ValidateSample(in, &reason).ok());
  EXPECT_EQ(reason, DropReason::kNone);
  EXPECT_EQ(in.job_id, "j-00aa");
  EXPECT_EQ(in.worker_id, "w1");
  EXPECT_EQ(in.rank, 1);
  EXPECT_EQ(in.step, 7);
  EXPECT_DOUBLE_EQ(in.allreduce_seconds, 0.004);
}

TEST(SampleDecodeTest, AHugeLabelIsQuotedBackShortened) {
  v1::Sample s = Good();
  s.set_queue(std::string(1 << 20, 'q'));
  DropReason reason = DropReason::kNone;
  absl::Status status = ValidateSample(FromProto(s), &reason);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("(1048576 bytes)"));
  EXPECT_LT(status.message().size(), 200u);
}

TEST(SampleDecodeTest, ABatchKeepsItsGoodSamplesAndListsTheBadOnesByIndexAndField) {
  v1::SampleBatch batch;
  *batch.add_samples() = Good();
  v1::Sample bad_value = Good();
  bad_value.set_step_seconds(-1);
  *batch.add_samples() = bad_value;
  *batch.add_samples() = Good();
  v1::Sample bad_id = Good();
  bad_id.set_job_id("'; DROP TABLE jobs; --");
  *batch.add_samples() = bad_id;

  DecodedBatch out;
  ASSERT_TRUE(DecodeSampleBatch(batch, &out).ok());
  ASSERT_EQ(out.valid.size(), 2u);
  ASSERT_EQ(out.rejected.size(), 2u);
  EXPECT_EQ(out.rejected[0].index, 1);
  EXPECT_EQ(out.rejected[0].reason, DropReason::kBadNumber);
  EXPECT_EQ(out.rejected[0].status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.rejected[0].status.message(),
            "samples[1].step_seconds must be a finite number in [0, 86400], got -1");
  EXPECT_EQ(out.rejected[1].index, 3);
  EXPECT_EQ(out.rejected[1].reason, DropReason::kBadId);
  EXPECT_THAT(std::string(out.rejected[1].status.message()), StartsWith("samples[3].job_id"));
}

TEST(SampleDecodeTest, ABatchOverTheLimitIsRefusedWholeWithInvalidArgument) {
  v1::SampleBatch batch;
  for (int i = 0; i < kMaxSamplesPerBatch; ++i) *batch.add_samples() = Good();
  DecodedBatch out;
  ASSERT_TRUE(DecodeSampleBatch(batch, &out).ok());
  EXPECT_EQ(out.valid.size(), static_cast<size_t>(kMaxSamplesPerBatch));

  *batch.add_samples() = Good();
  absl::Status status = DecodeSampleBatch(batch, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              StartsWith("samples: 1025 in one batch, at most 1024"));
  EXPECT_TRUE(out.valid.empty());
  EXPECT_TRUE(out.rejected.empty());
}

TEST(SampleDecodeTest, AnEmptyBatchIsValidAndKeepsNothing) {
  DecodedBatch out;
  out.valid.push_back(SampleIn{});  // left over from an earlier batch: cleared
  EXPECT_TRUE(DecodeSampleBatch(v1::SampleBatch{}, &out).ok());
  EXPECT_TRUE(out.valid.empty());
  EXPECT_TRUE(out.rejected.empty());
}

TEST(SampleDecodeTest, RecordingADecodedBatchMatchesAddingItsSamplesOneByOne) {
  v1::SampleBatch batch;
  for (int rank = 0; rank < 2; ++rank) {
    v1::Sample s = Good();
    s.set_rank(rank);
    s.set_samples_per_second(100 + rank);
    *batch.add_samples() = s;
  }
  DecodedBatch out;
  ASSERT_TRUE(DecodeSampleBatch(batch, &out).ok());
  JobMetrics batched(Limits{}), single(Limits{});
  for (const SampleIn& s : out.valid) EXPECT_EQ(batched.Record(s, 0), DropReason::kNone);
  for (const v1::Sample& s : batch.samples()) single.Add(FromProto(s), 0);
  ASSERT_EQ(batched.Snapshot().size(), 1u);
  EXPECT_DOUBLE_EQ(batched.Snapshot()[0].samples_per_second, 201);
  EXPECT_DOUBLE_EQ(batched.Snapshot()[0].samples_per_second,
                   single.Snapshot()[0].samples_per_second);
  EXPECT_EQ(batched.accepted(), single.accepted());
}

}  // namespace
}  // namespace ringmaster::metrics
