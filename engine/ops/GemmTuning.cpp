#include "ops/GemmTuning.h"

#include "base/AtomicFile.h"
#include "base/log.h"
#include "gl/Program.h"

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <fstream>
#include <sstream>

namespace glnet {
namespace {

// Per thread: a tuning measures on the thread that plans, while another (a Python module's GL thread for another
// device) may plan with the table.
thread_local bool ignored = false;

bool tuningOff() {
  const char* value = std::getenv("GLNET_TUNE");
  return value && std::string(value) == "0";
}

// Tables read so far, by device: a process may use several, each from its own thread. Entries never move once made.
std::map<std::string, GemmTuning>& tables() {
  static std::map<std::string, GemmTuning> loaded;
  return loaded;
}
std::mutex& tablesMutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace

std::string gemmTuningKey(std::uint64_t rows, std::uint64_t columns, std::uint64_t depth, bool splittable, GemmOperand operand) {
  return std::to_string(rows) + "x" + std::to_string(columns) + "x" + std::to_string(depth) +
         (operand == GemmOperand::gathered ? " gathered" : " loaded") + (splittable ? " splittable" : " whole");
}

std::string GemmCandidate::name() const {
  if (!split) return std::string(config->name) + " whole";
  return std::string(config->name) + " split" + (splits > 1 ? " " + std::to_string(splits) : "");
}

std::vector<GemmCandidate> gemmCandidates(const Limits& limits) {
  std::vector<GemmCandidate> candidates;
  for (const GemmConfig* config : gemmConfigsFitting(limits)) {
    candidates.push_back({config, true});
    candidates.push_back({config, false});
    for (const std::uint32_t splits : {2u, 4u}) candidates.push_back({config, true, splits});
  }
  return candidates;
}

GemmTuning GemmTuning::parse(const std::string& text, const std::string& source) {
  GemmTuning tuning;
  std::istringstream lines(text);
  std::string line;
  std::size_t skipped = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t equals = line.find(" = ");
    std::istringstream value(equals == std::string::npos ? "" : line.substr(equals + 3));
    std::string config, split, parts, rest;
    value >> config >> split >> parts;
    const GemmConfig* found = nullptr;
    for (const GemmConfig& candidate : gemmConfigs()) {
      if (config == candidate.name) found = &candidate;
    }
    // "split N": N from 2 to 64, written in digits alone.
    const bool counted = parts.size() >= 1 && parts.size() <= 2 && parts.find_first_not_of("0123456789") == std::string::npos &&
                         std::stoul(parts) >= 2 && std::stoul(parts) <= 64;
    if (!found || (split != "split" && split != "whole") || (!parts.empty() && (split != "split" || !counted)) || (value >> rest)) {
      ++skipped;
      continue;
    }
    tuning.set(line.substr(0, equals), {found, split == "split", parts.empty() ? 0u : static_cast<std::uint32_t>(std::stoul(parts))});
  }
  if (skipped) log::warn(source + ": " + std::to_string(skipped) + " lines are not GEMM tunings; they are ignored (glnet_bench --tune writes them again)");
  return tuning;
}

std::string GemmTuning::text() const {
  std::string text = "# GEMM shape (rows x columns x depth, operand, split allowed) = configuration, split (the rule's, or "
                     "into N parts) or whole sum; written by glnet_bench --tune\n";
  for (const auto& [key, candidate] : entries_) text += key + " = " + candidate.name() + "\n";
  return text;
}

std::optional<GemmCandidate> GemmTuning::find(const std::string& key) const {
  const auto found = entries_.find(key);
  if (found == entries_.end()) return std::nullopt;
  return found->second;
}

void GemmTuning::set(const std::string& key, const GemmCandidate& candidate) {
  // A shape that may not split its sum runs either candidate whole: kept as such, so the table reads as it runs.
  const std::string whole = " whole";
  const bool splittable = key.size() < whole.size() || key.compare(key.size() - whole.size(), whole.size(), whole) != 0;
  entries_[key] = splittable ? candidate : GemmCandidate{candidate.config, false};
}

std::string currentGemmTuningPath() {
  const std::string directory = Program::binaryCacheDirectory();
  if (directory.empty()) return "";
  return directory + "/gemm-tuning-" + Program::deviceCacheName() + ".txt";
}

GemmTuning* currentGemmTuning() {
  if (ignored || tuningOff() || currentLimits().maxWorkGroupInvocations <= 0) return nullptr;
  const std::string device = Program::deviceCacheName();
  const std::lock_guard<std::mutex> lock(tablesMutex());
  auto found = tables().find(device);
  if (found != tables().end()) return &found->second;
  GemmTuning table;
  const std::string path = currentGemmTuningPath();
  if (!path.empty()) {
    std::ifstream file(path, std::ios::binary);
    if (file) table = GemmTuning::parse(std::string(std::istreambuf_iterator<char>(file), {}), path);
  }
  return &tables().emplace(device, std::move(table)).first->second;
}

void checkCurrentGemmTuningWritable() {
  const std::string path = currentGemmTuningPath();
  if (path.empty()) return;
  std::error_code ignoredError;  // checkWritable names the path if the folder is still missing
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ignoredError);
  checkWritable(path);
}

void saveCurrentGemmTuning() {
  const std::string path = currentGemmTuningPath();
  GemmTuning* table = currentGemmTuning();
  if (path.empty() || !table) return;
  checkCurrentGemmTuningWritable();
  writeFileAtomically(path, table->text());
}

IgnoredGemmTuning::IgnoredGemmTuning() : previous_(ignored) { ignored = true; }
IgnoredGemmTuning::~IgnoredGemmTuning() { ignored = previous_; }

}  // namespace glnet
