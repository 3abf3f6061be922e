#include "ops/Gemm.h"

#include "base/check.h"
#include "ops/GemmTuning.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

namespace glnet {
namespace {

// The rule's model of a large GPU, fitted to every configuration measured on every benchmark shape on the
// H100 (bench/results/2026-11-22-gemm-nvidia-h100.md; the rule's picks take 1.08× the best configuration's
// time, geometric mean): 132 multiprocessors, each running `occupancy` groups of a configuration at once,
// at `efficiency` of the 8×8 block's throughput per output. Times are in multiply-adds of one multiprocessor.
// With an implicit im2col operand (a convolution, GemmOperand::gathered) 4 groups of the 4×4 block share a
// multiprocessor (its registers and shared memory allow it), which decides whether a convolution with few tiles
// splits its sum: on the H100 at batch 1, end to end, resnet50 2.49 -> 1.86 ms, vgg11 1.51 -> 1.36 ms, densenet121
// 4.51 -> 4.01 ms; batch 64 within the spread of its input's upload (bench/results/2026-11-24-batch1-nvidia-h100.md).
struct ThreadBlockModel {
  std::uint32_t threadRows, threadColumns;
  double efficiency;
  std::uint64_t occupancy, gatheredOccupancy;
};
constexpr ThreadBlockModel threadBlockModels[] = {{8, 8, 1.0, 2, 2}, {8, 4, 0.6, 3, 3}, {4, 8, 0.6, 3, 3}, {4, 4, 0.4, 1, 4}};
// A partial sum written and read back, per element and split, and the extra dispatch (about 3 µs).
constexpr double splitElementCost = 16.5;
constexpr double dispatchCost = 3e5;
constexpr std::uint64_t minimumChunk = 64;

const GemmConfig* forcedConfig = nullptr;
bool forcedSplit = true;
std::uint32_t forcedSplits = 0;

const ThreadBlockModel& modelOf(const GemmConfig& c) {
  for (const ThreadBlockModel& model : threadBlockModels) {
    if (model.threadRows == c.threadRows && model.threadColumns == c.threadColumns) return model;
  }
  GLNET_ASSERT(false, "no rule model for a GEMM configuration's thread block");
  return threadBlockModels[0];
}

std::uint64_t ceilDivide(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

SplitK splitInto(std::uint64_t depth, std::uint64_t wanted) {
  if (wanted < 2) return {};
  const std::uint64_t chunk = SplitK::chunkFor(depth, wanted);
  const std::uint64_t splits = ceilDivide(depth, chunk);
  if (splits < 2) return {};
  return {static_cast<std::uint32_t>(splits), static_cast<std::uint32_t>(chunk)};
}

// The busiest multiprocessor runs its groups in rounds of `occupancy`, each round as long as one group's
// tile times its share of the sum; a split adds the pass that sums the partial results.
double cost(const GemmConfig& c, std::uint64_t rows, std::uint64_t columns, std::uint64_t depth, const SplitK& split,
            GemmOperand operand) {
  const ThreadBlockModel& model = modelOf(c);
  const std::uint64_t occupancy = operand == GemmOperand::gathered ? model.gatheredOccupancy : model.occupancy;
  const std::uint64_t groups = ceilDivide(rows, c.tileRows) * ceilDivide(columns, c.tileColumns) * split.splits;
  const std::uint64_t rounds = ceilDivide(ceilDivide(groups, modelledMultiprocessors), occupancy);
  const std::uint64_t share = split.splits > 1 ? split.chunk : ceilDivide(depth, c.tileDepth) * c.tileDepth;
  double total = double(rounds * occupancy) * double(c.tileRows) * c.tileColumns * double(share) / model.efficiency;
  if (operand == GemmOperand::gathered) total *= c.gatheredSlowdown;
  if (split.splits > 1) total += splitElementCost * double(rows * columns) * (split.splits + 1) + dispatchCost;
  return total;
}

GemmChoice finish(const GemmConfig& config, std::uint64_t rows, std::uint64_t columns, const SplitK& split) {
  const std::uint64_t rowTiles = ceilDivide(rows, config.tileRows), columnTiles = ceilDivide(columns, config.tileColumns);
  GLNET_ASSERT(rowTiles <= 0xffffffffu && columnTiles <= 0xffffffffu, "GEMM too large for 32-bit group counts");
  return {&config, split, {static_cast<std::uint32_t>(rowTiles), static_cast<std::uint32_t>(columnTiles), split.splits}, false, {}};
}

// A split into about `wanted` parts, none where the sum is shorter than `wanted` chunks of the smallest size.
SplitK wantedSplit(std::uint64_t depth, std::uint64_t wanted) { return wanted * minimumChunk <= depth ? splitInto(depth, wanted) : SplitK{}; }

// The cheapest split of the sum for this configuration (none when the groups already fill the GPU).
SplitK bestSplit(const GemmConfig& c, std::uint64_t rows, std::uint64_t columns, std::uint64_t depth, GemmOperand operand) {
  SplitK best;
  double bestCost = cost(c, rows, columns, depth, best, operand);
  for (std::uint64_t wanted = 2; wanted * minimumChunk <= depth; wanted *= 2) {
    const SplitK split = wantedSplit(depth, wanted);
    const double splitCost = cost(c, rows, columns, depth, split, operand);
    if (split.splits > 1 && splitCost < bestCost) {
      best = split;
      bestCost = splitCost;
    }
  }
  return best;
}

}  // namespace

std::vector<ShaderDefine> GemmConfig::defines() const {
  return {{"GEMM_TILE_M", std::to_string(tileRows)},    {"GEMM_TILE_N", std::to_string(tileColumns)},
          {"GEMM_TILE_K", std::to_string(tileDepth)},   {"GEMM_THREAD_M", std::to_string(threadRows)},
          {"GEMM_THREAD_N", std::to_string(threadColumns)}, {"GEMM_INVOCATIONS", std::to_string(invocations())}};
}

const std::vector<GemmConfig>& gemmConfigs() {
  // gatheredSlowdown, measured on the H100 at batch 64 (bench/gemm-config-gpu, 2026-11-24): resnet18's 3x3
  // convolutions of 56x56x64 took 0.575 ms with 64x64, 0.945 with 128x32, 0.977 with 64x32 and 1.337 with 256x16;
  // its 7x7 stem 0.735 ms with 64x64 against 1.441 with 256x16, the rule's pick before.
  static const std::vector<GemmConfig> configs{
      {"128x128", 128, 128, 8, 8, 8},  {"128x64", 128, 64, 8, 8, 4},  {"64x128", 64, 128, 16, 4, 8},
      {"64x64", 64, 64, 16, 4, 4},     {"128x32", 128, 32, 16, 4, 4, true, 1.64}, {"256x16", 256, 16, 8, 4, 4, true, 2.33},
      {"64x32", 64, 32, 16, 4, 4, false, 1.70},
      // 16 values of the sum per stage, which the rule weighs nowhere: taken by the tuner, and 128x128k16 by
      // chooseGemmAlongRows where the device has its 40 KiB of shared memory (more than OpenGL 4.3's minimum).
      {"128x128k16", 128, 128, 16, 8, 8, false}, {"128x64k16", 128, 64, 16, 8, 4, false},
  };
  return configs;
}

std::vector<const GemmConfig*> gemmConfigsFitting(const Limits& limits) {
  std::vector<const GemmConfig*> fitting;
  for (const GemmConfig& config : gemmConfigs()) {
    if (config.fits(limits)) fitting.push_back(&config);
  }
  return fitting;
}

const GemmConfig& gemmConfigNamed(const std::string& name) {
  std::string names;
  for (const GemmConfig& config : gemmConfigs()) {
    if (name == config.name) return config;
    names += (names.empty() ? "" : ", ") + std::string(config.name);
  }
  throw Error("unknown GEMM configuration '" + name + "'; GLNET_GEMM_CONFIG takes one of " + names);
}

bool GemmConfig::fits(const Limits& limits) const {
  if (limits.maxWorkGroupInvocations <= 0) return true;  // no device known yet: nothing to check against
  return invocations() <= static_cast<std::uint32_t>(limits.maxWorkGroupInvocations) &&
         invocations() <= static_cast<std::uint32_t>(limits.maxWorkGroupSize[0]) &&
         sharedBytes() <= static_cast<std::uint64_t>(limits.maxSharedMemoryBytes);
}

namespace {

// The forced configuration, when the device can run it.
const GemmConfig& fitting(const GemmConfig& config) {
  const Limits& limits = currentLimits();
  if (!config.fits(limits)) {
    throw Error("GEMM configuration " + std::string(config.name) + " needs " + std::to_string(config.invocations()) +
                " invocations and " + std::to_string(config.sharedBytes()) + " bytes of shared memory; this device allows " +
                std::to_string(limits.maxWorkGroupInvocations) + " and " + std::to_string(limits.maxSharedMemoryBytes));
  }
  return config;
}

}  // namespace

GemmChoice gemmWith(const GemmConfig& config, std::uint64_t rows, std::uint64_t columns, std::uint64_t depth,
                    bool splittable, GemmOperand operand, std::uint32_t splits) {
  SplitK split;
  if (splittable) split = splits > 1 ? wantedSplit(depth, splits) : bestSplit(config, rows, columns, depth, operand);
  return finish(config, rows, columns, split);
}

namespace {

GemmChoice ruledGemm(std::uint64_t rows, std::uint64_t columns, std::uint64_t depth, bool splittable, GemmOperand operand) {
  const Limits& limits = currentLimits();
  const auto admitted = [&](const GemmConfig& c) { return c.fits(limits) && (operand == GemmOperand::loaded || c.gathersRuns()); };
  const bool measuredFit =
      std::any_of(gemmConfigs().begin(), gemmConfigs().end(), [&](const GemmConfig& c) { return c.measured && admitted(c); });
  const GemmConfig* best = nullptr;
  SplitK bestSplitK;
  double bestCost = 0;
  for (const GemmConfig& config : gemmConfigs()) {
    if (!admitted(config) || (measuredFit && !config.measured)) continue;
    const SplitK split = splittable ? bestSplit(config, rows, columns, depth, operand) : SplitK{};
    const double c = cost(config, rows, columns, depth, split, operand);
    if (!best || c < bestCost) {
      best = &config;
      bestSplitK = split;
      bestCost = c;
    }
  }
  if (!best) {
    throw Error("no GEMM configuration fits this device (" + std::to_string(limits.maxWorkGroupInvocations) +
                " invocations, " + std::to_string(limits.maxSharedMemoryBytes) +
                " bytes of shared memory per group; glnet needs at least 128 and 15360)");
  }
  return finish(*best, rows, columns, bestSplitK);
}

// The configuration forced or tuned for this shape, if any.
std::optional<GemmChoice> measuredGemm(std::uint64_t rows, std::uint64_t columns, std::uint64_t depth, bool splittable,
                                       GemmOperand operand, const std::string& key) {
  if (forcedConfig) return gemmWith(fitting(*forcedConfig), rows, columns, depth, splittable && forcedSplit, operand, forcedSplits);
  const char* forced = std::getenv("GLNET_GEMM_CONFIG");
  if (forced && *forced) return gemmWith(fitting(gemmConfigNamed(forced)), rows, columns, depth, splittable, operand);
  const GemmTuning* tuning = currentGemmTuning();
  const std::optional<GemmCandidate> tuned = tuning ? tuning->find(key) : std::nullopt;
  if (!tuned || !tuned->config->fits(currentLimits())) return std::nullopt;
  return gemmWith(*tuned->config, rows, columns, depth, splittable && tuned->split, operand, tuned->splits);
}

}  // namespace

GemmChoice chooseGemm(std::uint64_t rows, std::uint64_t columns, std::uint64_t depth, bool splittable, GemmOperand operand) {
  const std::string key = gemmTuningKey(rows, columns, depth, splittable, operand);
  std::optional<GemmChoice> measured = measuredGemm(rows, columns, depth, splittable, operand, key);
  GemmChoice choice = measured ? *measured : ruledGemm(rows, columns, depth, splittable, operand);
  choice.measured = measured.has_value();
  choice.tuningKey = key;
  return choice;
}

GemmChoice chooseGemmAlongRows(std::uint64_t rows, std::uint64_t columns, std::uint64_t depth) {
  const GemmChoice choice = chooseGemm(rows, columns, depth, false);
  const GemmConfig& deeper = gemmConfigNamed("128x128k16");
  const Limits& limits = currentLimits();
  // Only on a known device: GemmConfig::fits takes every configuration where no device is known yet.
  if (choice.measured || choice.config != &gemmConfigNamed("128x128") || limits.maxSharedMemoryBytes <= 0 || !deeper.fits(limits)) {
    return choice;
  }
  GemmChoice deeperChoice = gemmWith(deeper, rows, columns, depth, false);
  deeperChoice.tuningKey = choice.tuningKey;
  return deeperChoice;
}

ForcedGemmConfig::ForcedGemmConfig(const GemmConfig& config, bool split, std::uint32_t splits)
    : previous_(forcedConfig), previousSplit_(forcedSplit), previousSplits_(forcedSplits) {
  forcedConfig = &config;
  forcedSplit = split;
  forcedSplits = splits;
}
ForcedGemmConfig::~ForcedGemmConfig() {
  forcedConfig = previous_;
  forcedSplit = previousSplit_;
  forcedSplits = previousSplits_;
}

std::vector<Dispatch> taggedWith(const GemmChoice& gemm, std::vector<Dispatch> dispatches) {
  for (Dispatch& dispatch : dispatches) dispatch.tuningKey = gemm.tuningKey;
  return dispatches;
}

Dispatch taggedWith(const GemmChoice& gemm, Dispatch dispatch) {
  dispatch.tuningKey = gemm.tuningKey;
  return dispatch;
}

GemmPrograms::GemmPrograms(ProgramCache& programs, std::string file, std::vector<ShaderDefine> defines, std::vector<std::string> includes)
    : programs_(&programs), file_(std::move(file)), defines_(std::move(defines)), includes_(std::move(includes)) {
  includes_.insert(includes_.begin(), "Gemm.glsl");
}

const Program& GemmPrograms::get(const GemmConfig& config, bool vec4A, bool vec4B, bool splitK,
                                 const std::vector<ShaderDefine>& more) const {
  std::vector<ShaderDefine> defines = defines_;
  defines.insert(defines.end(), more.begin(), more.end());
  for (ShaderDefine& define : config.defines()) defines.push_back(std::move(define));
  if (vec4A) defines.push_back({"GEMM_A_VEC4", "1"});
  if (vec4B) defines.push_back({"GEMM_B_VEC4", "1"});
  if (splitK) defines.push_back({"SPLIT_K", "1"});
  return programs_->get(file_, defines, includes_);
}

}  // namespace glnet
