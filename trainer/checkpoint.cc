#include "trainer/checkpoint.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/checkpoint_metadata.h"

namespace ringmaster::trainer {
namespace {

constexpr char kMagic[8] = {'R', 'M', 'C', 'K', 'P', 'T', '0', '1'};
constexpr uint32_t kFormatVersion = 2;
// Version 1 had no momentum field (plain SGD only).
constexpr uint32_t kFormatVersionWithoutMomentum = 1;
constexpr absl::string_view kPrefix = "ckpt-";
constexpr absl::string_view kSuffix = ".rmck";

volatile std::sig_atomic_t stop_requested = 0;

void OnStopSignal(int) { stop_requested = 1; }

uint64_t Fnv1a(absl::string_view bytes) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

template <typename T>
void Put(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

void PutFloats(std::string* out, const std::vector<float>& values) {
  Put<uint64_t>(out, values.size());
  out->append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

// Reads fields in order from a buffer whose checksum was already checked; lengths are still
// bounded, so a well-checksummed file of another layout cannot overrun.
class Reader {
 public:
  explicit Reader(absl::string_view bytes) : bytes_(bytes) {}

  template <typename T>
  absl::Status Get(T* value, absl::string_view field) {
    if (bytes_.size() < sizeof(T)) return Short(field);
    std::memcpy(value, bytes_.data(), sizeof(T));
    bytes_.remove_prefix(sizeof(T));
    return absl::OkStatus();
  }

  absl::Status GetString(std::string* value, absl::string_view field) {
    uint32_t length = 0;
    if (absl::Status s = Get(&length, field); !s.ok()) return s;
    if (bytes_.size() < length) return Short(field);
    value->assign(bytes_.data(), length);
    bytes_.remove_prefix(length);
    return absl::OkStatus();
  }

  absl::Status GetFloats(std::vector<float>* values, absl::string_view field) {
    uint64_t count = 0;
    if (absl::Status s = Get(&count, field); !s.ok()) return s;
    if (count > bytes_.size() / sizeof(float)) return Short(field);
    values->resize(count);
    std::memcpy(values->data(), bytes_.data(), count * sizeof(float));
    bytes_.remove_prefix(count * sizeof(float));
    return absl::OkStatus();
  }

  size_t left() const { return bytes_.size(); }

 private:
  static absl::Status Short(absl::string_view field) {
    return absl::DataLossError(absl::StrCat("checkpoint ends inside ", field));
  }
  absl::string_view bytes_;
};

// The step of a file named like CheckpointFileName, or -1.
int64_t StepOfFileName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kPrefix) || !absl::ConsumeSuffix(&name, kSuffix)) return -1;
  int64_t step = -1;
  if (!absl::SimpleAtoi(name, &step) || step < 0) return -1;
  return step;
}

// (step, name) of every checkpoint file in `dir`, newest first.
std::vector<std::pair<int64_t, std::string>> ListCheckpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> files;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return files;
  while (const dirent* entry = ::readdir(d)) {
    const int64_t step = StepOfFileName(entry->d_name);
    if (step >= 0) files.emplace_back(step, entry->d_name);
  }
  ::closedir(d);
  std::sort(files.rbegin(), files.rend());
  return files;
}

absl::Status MakeDirs(const std::string& dir) {
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    const std::string prefix = dir.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::UnavailableError(
          absl::StrCat("cannot create directory ", prefix, ": ", std::strerror(errno)));
    }
    if (slash == std::string::npos) return absl::OkStatus();
  }
}

}  // namespace

std::string EncodeCheckpoint(const TrainingCheckpoint& c) {
  std::string out(kMagic, sizeof(kMagic));
  Put(&out, kFormatVersion);
  Put(&out, c.step);
  Put(&out, c.seed);
  Put(&out, c.world_size);
  Put(&out, c.batch_size);
  Put(&out, c.lr);
  Put(&out, c.momentum);
  Put(&out, c.data_position);
  Put(&out, c.rng_state);
  Put<uint32_t>(&out, static_cast<uint32_t>(c.model.size()));
  out.append(c.model);
  PutFloats(&out, c.parameters);
  PutFloats(&out, c.optimizer_state);
  Put(&out, Fnv1a(out));
  return out;
}

absl::StatusOr<TrainingCheckpoint> DecodeCheckpoint(absl::string_view bytes) {
  if (bytes.size() < sizeof(kMagic) + sizeof(uint64_t)) {
    return absl::DataLossError(absl::StrCat("checkpoint is ", bytes.size(), " bytes, too short"));
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError("not a ringmaster-train checkpoint (bad magic)");
  }
  const absl::string_view body = bytes.substr(0, bytes.size() - sizeof(uint64_t));
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + body.size(), sizeof(stored));
  if (Fnv1a(body) != stored) {
    return absl::DataLossError("checkpoint checksum mismatch (torn or corrupted file)");
  }
  Reader r(body.substr(sizeof(kMagic)));
  uint32_t version = 0;
  TrainingCheckpoint c;
  for (absl::Status s : {r.Get(&version, "version"), r.Get(&c.step, "step"), r.Get(&c.seed, "seed"),
                         r.Get(&c.world_size, "world size"), r.Get(&c.batch_size, "batch size"),
                         r.Get(&c.lr, "lr")}) {
    if (!s.ok()) return s;
  }
  if (version != kFormatVersion && version != kFormatVersionWithoutMomentum) {
    return absl::DataLossError(absl::StrCat("checkpoint format version ", version,
                                            ", this trainer reads ", kFormatVersionWithoutMomentum,
                                            " and ", kFormatVersion));
  }
  if (version == kFormatVersion) {
    if (absl::Status s = r.Get(&c.momentum, "momentum"); !s.ok()) return s;
  }
  for (absl::Status s : {r.Get(&c.data_position, "data position"), r.Get(&c.rng_state, "rng state"),
                         r.GetString(&c.model, "model"), r.GetFloats(&c.parameters, "parameters"),
                         r.GetFloats(&c.optimizer_state, "optimizer state")}) {
    if (!s.ok()) return s;
  }
  if (r.left() != 0) {
    return absl::DataLossError(absl::StrCat("checkpoint has ", r.left(), " bytes past its end"));
  }
  if (c.step < 0) return absl::DataLossError(absl::StrCat("checkpoint step ", c.step));
  return c;
}

std::string CheckpointFileName(int64_t step) {
  return absl::StrFormat("%s%012d%s", kPrefix, step, kSuffix);
}

absl::Status WriteCheckpoint(const std::string& dir, const TrainingCheckpoint& checkpoint,
                             int64_t time_ms, int keep) {
  if (absl::Status made = MakeDirs(dir); !made.ok()) return made;
  const std::string name = CheckpointFileName(checkpoint.step);
  if (absl::Status s = WriteFileAtomically(dir, name, EncodeCheckpoint(checkpoint)); !s.ok()) {
    return s;
  }
  // The metadata only ever names a checkpoint that is already whole on disk.
  const CheckpointMetadata metadata{checkpoint.step, time_ms, name};
  if (absl::Status s =
          WriteFileAtomically(dir, kCheckpointMetadataFile, FormatCheckpointMetadata(metadata));
      !s.ok()) {
    return s;
  }
  // Keeps the one just written and the newest older ones. A newer file this run could not use
  // (another configuration, a torn write) is neither counted nor removed: pruning by step alone
  // would delete the checkpoint just written.
  int kept = 0;
  for (const auto& [step, file] : ListCheckpoints(dir)) {
    if (step > checkpoint.step) continue;
    if (++kept > std::max(keep, 1)) ::unlink(absl::StrCat(dir, "/", file).c_str());
  }
  return absl::OkStatus();
}

std::optional<FoundCheckpoint> FindNewestCheckpoint(
    const std::string& dir, std::vector<std::string>* skipped,
    const std::function<absl::Status(const TrainingCheckpoint&)>& usable) {
  for (const auto& [step, name] : ListCheckpoints(dir)) {
    const std::string path = absl::StrCat(dir, "/", name);
    std::ifstream in(path, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    absl::StatusOr<TrainingCheckpoint> decoded = DecodeCheckpoint(bytes.str());
    absl::Status why = decoded.status();
    if (why.ok() && decoded->step != step) {
      why = absl::DataLossError(absl::StrCat("holds step ", decoded->step, ", not ", step));
    }
    if (why.ok() && usable) why = usable(*decoded);
    if (!why.ok()) {
      if (skipped != nullptr) skipped->push_back(absl::StrCat(path, ": ", why.message()));
      continue;
    }
    return FoundCheckpoint{path, *std::move(decoded)};
  }
  return std::nullopt;
}

void InstallStopSignalHandlers() {
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

bool StopRequested() { return stop_requested != 0; }

void SetStopRequestedForTest(bool value) { stop_requested = value ? 1 : 0; }

}  // namespace ringmaster::trainer
