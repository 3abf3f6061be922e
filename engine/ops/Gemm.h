// The configurations of shaders/Gemm.glsl, the rule that picks one (and a split of the sum) per GEMM shape,
// and the programs of a shader built on the core, one per configuration and operand alignment.
#pragma once

#include "gl/Limits.h"
#include "ops/SplitK.h"
#include "plan/ProgramCache.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace glnet {

// The multiprocessors of the large GPU the rule below models (the H100), which the other ops' split rules share.
constexpr std::uint64_t modelledMultiprocessors = 132;

// One work-group shape: tileRows × tileColumns outputs per group, tileDepth values of the sum per
// shared-memory stage, threadRows × threadColumns outputs per invocation (multiples of 4).
struct GemmConfig {
  const char* name;
  std::uint32_t tileRows, tileColumns, tileDepth, threadRows, threadColumns;
  // Whether the rule weighs it on every device; the others are taken only where no measured one fits.
  bool measured = true;
  // Its time relative to the rule's model with a gathered operand (GemmOperand::gathered), measured: each stage
  // gathers tileRows rows of A at computed addresses, so taller 4×4-block tiles spend more of it gathering.
  double gatheredSlowdown = 1.0;

  std::uint32_t invocations() const { return (tileRows / threadRows) * (tileColumns / threadColumns); }
  // Whether the rule weighs it for a GEMM over an implicit im2col operand gathered in runs of 4 (GEMM_A_GATHER,
  // GEMM_B_GATHER): blocks of 4×4. On the H100 larger blocks lose with the gathers (conv2's forward pass at batch
  // 10 000: 14.3 ms on 128x64 against 7.3 on 64x64; bench/NOTES-gemm.md rows 16 and 21).
  bool gathersRuns() const { return threadRows * threadColumns <= 16; }
  // Shared memory of the two stages in the larger (padded, K-contiguous) layout of each operand.
  std::uint64_t sharedBytes() const { return 2ull * 16 * (tileRows + tileColumns) * (tileDepth / 4 + 1); }
  bool fits(const Limits& limits) const;
  std::vector<ShaderDefine> defines() const;
};

// Every configuration: those the rule weighs, largest tiles first, then those it does not (the tuner and
// chooseGemmAlongRows take them). Those the rule weighs fit the OpenGL 4.3 minimum limits (1024 invocations, 32 KiB of
// shared memory); 64x32 fits OpenGL ES 3.1's (128 invocations, 16 KiB).
const std::vector<GemmConfig>& gemmConfigs();
// Those that fit `limits` (tests and glnet_bench run each of them in turn).
std::vector<const GemmConfig*> gemmConfigsFitting(const Limits& limits);
// Throws glnet::Error naming the configurations when `name` is none of them.
const GemmConfig& gemmConfigNamed(const std::string& name);

// C[rows × columns] = Σ over depth: the configuration and split-K to run it with.
struct GemmChoice {
  const GemmConfig* config;
  SplitK split;
  std::array<std::uint32_t, 3> groups;  // row tiles along x, column tiles along y, splits along z
  // Measured rather than ruled: a forced configuration or the device's tuning (ops/GemmTuning.h).
  bool measured = false;
  // The shape a tuning of it is kept under; ops give it to their dispatches (Dispatch::tuningKey).
  std::string tuningKey;
};
// A ForcedGemmConfig in scope, else GLNET_GEMM_CONFIG, names the configuration (an error when it does not fit
// the current device's limits); else the device's tuning of this shape (ops/GemmTuning.h) where it fits; otherwise
// the rule in Gemm.cpp, among the configurations that fit.
// Split-K only when `splittable` (the op has a workspace for partial sums).
// GemmOperand::gathered: one operand is an implicit im2col matrix gathered in runs, so the rule weighs only the
// configurations that gather them (gathersRuns); a forced configuration is taken all the same.
enum class GemmOperand { loaded, gathered };
GemmChoice chooseGemm(std::uint64_t rows, std::uint64_t columns, std::uint64_t depth, bool splittable = true,
                      GemmOperand operand = GemmOperand::loaded);
// The same for A and B both stored along their rows and columns (a large dense layer's forward pass on its transposed
// operands, DenseOp::transposesOperands), where the rule's 128x128 takes 16 values of the sum per stage (128x128k16)
// when the device's shared memory holds it: on the H100, BERT-base's four dense layers at 64 x 128 tokens took 0.77
// to 1.00 of 128x128's time (bench/results/2026-11-28-qkv-joined-549a037-nvidia-h100/).
GemmChoice chooseGemmAlongRows(std::uint64_t rows, std::uint64_t columns, std::uint64_t depth);
// The same for one given configuration; `splits` > 1 cuts a splittable sum into about that many parts instead of the
// rule's split (none where the sum is too short for it).
GemmChoice gemmWith(const GemmConfig& config, std::uint64_t rows, std::uint64_t columns, std::uint64_t depth,
                    bool splittable = true, GemmOperand operand = GemmOperand::loaded, std::uint32_t splits = 0);

// Makes every GEMM recorded while it lives use `config` (tests, glnet_bench and its tuning run each configuration
// in turn), with the rule's split of the sum for it, `splits` parts where that is more than 1, or, `split` false, none;
// the previous one, if any, comes back when it ends.
class ForcedGemmConfig {
 public:
  explicit ForcedGemmConfig(const GemmConfig& config, bool split = true, std::uint32_t splits = 0);
  ~ForcedGemmConfig();
  ForcedGemmConfig(const ForcedGemmConfig&) = delete;
  ForcedGemmConfig& operator=(const ForcedGemmConfig&) = delete;

 private:
  const GemmConfig* previous_;
  bool previousSplit_;
  std::uint32_t previousSplits_;
};

// The programs of one shader built on Gemm.glsl: the shader's own defines plus the configuration, vec4
// reads of A and/or B (GEMM_A_VEC4, GEMM_B_VEC4), SPLIT_K and any defines of the call (a layer's geometry),
// compiled on first use.
class GemmPrograms {
 public:
  // `includes`: shader files the program needs besides Gemm.glsl.
  GemmPrograms(ProgramCache& programs, std::string file, std::vector<ShaderDefine> defines, std::vector<std::string> includes = {});
  const Program& get(const GemmConfig& config, bool vec4A, bool vec4B, bool splitK,
                     const std::vector<ShaderDefine>& more = {}) const;

 private:
  ProgramCache* programs_;
  std::string file_;
  std::vector<ShaderDefine> defines_;
  std::vector<std::string> includes_;
};

// The dispatches of one GEMM (with its operands' preparation and its split-K sum, when it has them) tagged with its
// tuning key, so that a tuning times them together.
std::vector<Dispatch> taggedWith(const GemmChoice& gemm, std::vector<Dispatch> dispatches);
Dispatch taggedWith(const GemmChoice& gemm, Dispatch dispatch);

// Whether a matrix bound at byte `offset` with rows `stride` floats apart can be read as aligned vec4 runs.
inline bool vec4Readable(std::size_t offset, std::uint64_t stride) { return offset % 16 == 0 && stride % 4 == 0; }

}  // namespace glnet
