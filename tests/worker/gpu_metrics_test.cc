// GPU readings to dcgm-exporter's metrics, the /metrics text they make, and NVML's absence.
#include "worker/core/gpu_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include "absl/strings/match.h"
#include "worker/gpu_metrics_collector.h"
#include "worker/host/nvml_sampler.h"

namespace ringmaster::worker {
namespace {

GpuReading H100() {
  GpuReading r;
  r.index = 1;
  r.uuid = "GPU-6f1c2a3b-0000-1111-2222-333344445555";
  r.model = "NVIDIA H100 80GB HBM3";
  r.utilization_percent = 87;
  r.memory_used_bytes = 1536ull * 1024 * 1024 + 512 * 1024;  // 1536.5 MiB
  r.memory_free_bytes = 80000ull * 1024 * 1024;
  r.temperature_celsius = 64;
  return r;
}

TEST(DcgmSamplesTest, UsesDcgmExporterNamesUnitsAndLabels) {
  std::vector<MetricSample> samples = DcgmSamples({H100()}, "node-a");
  const std::map<std::string, std::string> labels = {
      {"gpu", "1"},
      {"UUID", "GPU-6f1c2a3b-0000-1111-2222-333344445555"},
      {"device", "nvidia1"},
      {"modelName", "NVIDIA H100 80GB HBM3"},
      {"Hostname", "node-a"}};
  EXPECT_EQ(samples, (std::vector<MetricSample>{{"DCGM_FI_DEV_GPU_UTIL", labels, 87},
                                                {"DCGM_FI_DEV_FB_USED", labels, 1536},
                                                {"DCGM_FI_DEV_FB_FREE", labels, 80000},
                                                {"DCGM_FI_DEV_GPU_TEMP", labels, 64}}));
}

TEST(DcgmSamplesTest, ReadingsNvmlRefusedAreLeftOutNotZero) {
  GpuReading r;
  r.index = 0;
  r.uuid = "GPU-x";
  r.temperature_celsius = 40;
  std::vector<MetricSample> samples = DcgmSamples({r}, "h");
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].name, "DCGM_FI_DEV_GPU_TEMP");
}

TEST(GpuMetricsCollectorTest, ScrapeShowsOneGaugeFamilyPerName) {
  GpuReading second = H100();
  second.index = 0;
  second.uuid = "GPU-other";
  GpuMetricsCollector collector(
      [&]() -> absl::StatusOr<std::vector<GpuReading>> {
        return std::vector<GpuReading>{second, H100()};
      },
      "node-a");
  const std::string text = prometheus::TextSerializer().Serialize(collector.Collect());
  EXPECT_TRUE(absl::StrContains(text, "# TYPE DCGM_FI_DEV_GPU_UTIL gauge")) << text;
  EXPECT_TRUE(absl::StrContains(
      text,
      "DCGM_FI_DEV_GPU_TEMP{Hostname=\"node-a\",UUID=\"GPU-6f1c2a3b-0000-1111-2222-"
      "333344445555\",device=\"nvidia1\",gpu=\"1\",modelName=\"NVIDIA H100 80GB HBM3\"} 64"))
      << text;
  EXPECT_EQ(collector.Collect().size(), 4u);
}

TEST(GpuMetricsCollectorTest, FailedReadingExportsNothing) {
  GpuMetricsCollector collector(
      []() -> absl::StatusOr<std::vector<GpuReading>> {
        return absl::UnavailableError("NVML: GPU is lost");
      },
      "h");
  EXPECT_TRUE(collector.Collect().empty());
}

// Where there is no driver NVML is unavailable and says why; where there is, it reads.
TEST(NvmlSamplerTest, OpensWhereTheDriverIsAndSaysWhyNotElsewhere) {
  absl::StatusOr<std::unique_ptr<NvmlSampler>> sampler = NvmlSampler::Open();
  if (!sampler.ok()) {
    EXPECT_EQ(sampler.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_TRUE(absl::StrContains(sampler.status().message(), "NVML") ||
                absl::StrContains(sampler.status().message(), "libnvidia-ml"))
        << sampler.status();
    return;
  }
  absl::StatusOr<std::vector<GpuReading>> readings = (*sampler)->Read();
  ASSERT_TRUE(readings.ok()) << readings.status();
  for (const GpuReading& r : *readings) {
    EXPECT_FALSE(r.uuid.empty());
    std::cout << "GPU " << r.index << " " << r.model << " " << r.uuid
              << " util=" << r.utilization_percent.value_or(0)
              << "% fb_used=" << r.memory_used_bytes.value_or(0)
              << " fb_free=" << r.memory_free_bytes.value_or(0)
              << " temp=" << r.temperature_celsius.value_or(0) << "\n";
  }
}

}  // namespace
}  // namespace ringmaster::worker
