#include "ops/GemmTuning.h"

#include "base/AtomicFile.h"
#include "base/Stopwatch.h"
#include "base/check.h"
#include "base/log.h"
#include "gl/Program.h"

#include <algorithm>
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

// A candidate is kept where it takes at most this share of the rule's time, and a tuning where the whole plan does.
constexpr double requiredGain = 0.97;
constexpr double requiredTotalGain = 0.99;
constexpr double warmUpSeconds = 0.25;

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
                     "into N parts) or whole sum; written by glnet_bench --tune or glnet_train --tune\n";
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

std::string gemmTuningRefusal(const std::string& option) {
  if (tuningOff()) return option + " with GLNET_TUNE=0: the tuning would be ignored; unset GLNET_TUNE";
  const char* forced = std::getenv("GLNET_GEMM_CONFIG");
  if (forced && *forced) return option + " with GLNET_GEMM_CONFIG set: every GEMM would run that configuration; unset GLNET_GEMM_CONFIG";
  return {};
}

void warmUpForTiming(const std::function<void()>& runAndWait, int runs) {
  Stopwatch clock;
  for (int run = 0; run < runs || clock.seconds() < warmUpSeconds; ++run) runAndWait();
}

GemmTuningReport tuneGemms(const std::function<GemmPlanTimes()>& timePlan, const std::function<void(const std::string&)>& progress) {
  Stopwatch clock;
  GemmTuningReport report;
  GemmPlanTimes rule;
  std::map<std::string, std::pair<GemmCandidate, double>> fastest;
  {
    IgnoredGemmTuning ruleAndCandidatesOnly;
    if (progress) progress("the rule's choices");
    rule = timePlan();
    for (const GemmCandidate& candidate : gemmCandidates(currentLimits())) {
      if (progress) progress(candidate.name());
      ForcedGemmConfig forced(*candidate.config, candidate.split, candidate.splits);
      std::map<std::string, double> times;
      try {
        times = timePlan().gemmMs;
      } catch (const GpuFailure&) {
        throw;
      } catch (const Error& error) {
        // A configuration some GEMM of this model cannot take (its groups past the device's counts, say).
        log::info("GEMM tuning: " + candidate.name() + " does not run this model (" + error.what() + ")");
        continue;
      }
      ++report.candidates;
      for (const auto& [key, ms] : times) {
        const auto found = fastest.find(key);
        if (found == fastest.end() || ms < found->second.second) fastest.insert_or_assign(key, std::make_pair(candidate, ms));
      }
    }
    // The rule's choices timed again after the candidates, each shape keeping its faster time: the first timing may
    // run before the GPU's clocks have risen (on the H100, a training step's GEMMs 17.1 ms at first, within 6.6 ms
    // for the whole step later), which would make every candidate look better than the rule.
    const GemmPlanTimes ruleAgain = timePlan();
    for (auto& [key, ms] : rule.gemmMs) {
      const auto again = ruleAgain.gemmMs.find(key);
      if (again != ruleAgain.gemmMs.end()) ms = std::min(ms, again->second);
    }
    rule.totalMs = std::min(rule.totalMs, ruleAgain.totalMs);
  }
  GemmTuning* table = currentGemmTuning();
  std::map<std::string, std::optional<GemmCandidate>> before;  // what the table held for each shape changed here
  for (const auto& [key, ruleMs] : rule.gemmMs) {
    ++report.shapes;
    report.ruleMs += ruleMs;
    const auto found = fastest.find(key);
    const bool better = found != fastest.end() && found->second.second < requiredGain * ruleMs;
    report.tunedMs += better ? found->second.second : ruleMs;
    if (better) ++report.changed;
    if (!table) continue;
    before[key] = table->find(key);
    if (better) {
      table->set(key, found->second.first);
    } else {
      table->erase(key);
    }
  }
  report.tunedTotalMs = timePlan().totalMs;
  {
    IgnoredGemmTuning ruleOnly;
    report.ruleTotalMs = std::min(rule.totalMs, timePlan().totalMs);
  }
  if (table && report.changed > 0 && report.tunedTotalMs > requiredTotalGain * report.ruleTotalMs) {
    report.reverted = true;
    for (const auto& [key, previous] : before) {
      if (previous) {
        table->set(key, *previous);
      } else {
        table->erase(key);
      }
    }
  }
  if (table) {
    saveCurrentGemmTuning();
    report.path = currentGemmTuningPath();
  }
  report.seconds = clock.seconds();
  return report;
}

}  // namespace glnet
