// Bindings of shaders/Winograd.glsl: Winograd's F(2×2, 3×3) and F(4×4, 3×3) for the 3×3 stride-1 convolutions of
// inference graphs, whose weights are transformed once (an op that prepares) and whose inputs go through scratch
// memory.
#pragma once

#include "numbers/Activation.h"
#include "ops/Conv.h"
#include "ops/Gemm.h"
#include "ops/Pointwise.h"
#include "plan/Plan.h"
#include "plan/ProgramCache.h"

#include <vector>

namespace glnet {

// winograd: Winograd with the rule's tile; winogradF2, winogradF4: with 2×2 or 4×4 output tiles.
enum class ConvAlgorithm { automatic, implicitGemm, winograd, winogradF2, winogradF4 };

// Makes every convolution recorded while it lives take `algorithm` where it fits (tests, and glnet_bench's
// comparisons); the previous one comes back when it ends. Without one, GLNET_CONV_ALGORITHM (auto, gemm, winograd,
// winograd2 or winograd4) decides, else the rule in Winograd.cpp.
// `imagesPerChunk` (0: the rule's) runs Winograd's chunks of images at small sizes too.
class ForcedConvAlgorithm {
 public:
  explicit ForcedConvAlgorithm(ConvAlgorithm algorithm, std::uint32_t imagesPerChunk = 0);
  ~ForcedConvAlgorithm();
  ForcedConvAlgorithm(const ForcedConvAlgorithm&) = delete;
  ForcedConvAlgorithm& operator=(const ForcedConvAlgorithm&) = delete;

 private:
  ConvAlgorithm previous_;
  std::uint32_t previousImages_;
};

class WinogradConvOp {
 public:
  // As ConvOp's: `after` applied after the activation, `residual` added before it.
  WinogradConvOp(ProgramCache& programs, Activation activation, const Pointwise& after = {}, bool residual = false);
  // A 3×3 kernel at stride 1, any padding alike on both axes.
  static bool fits(const ConvShape& s) {
    return s.kernelHeight == 3 && s.kernelWidth == 3 && s.stride == 1 && s.leftPadding() == s.padding;
  }
  // Whether an inference graph whose weights stay put runs the layer this way: the forced algorithm where it
  // fits, else the rule.
  static bool chosen(const ConvShape& s);
  // m of F(m×m, 3×3) for a layer chosen: 2 or 4 (forced, else the rule's).
  static std::uint32_t outputTile(const ConvShape& s);
  // The (m + 2)² positions of a tile's transform: the GEMMs the layer runs.
  static std::uint32_t positions(const ConvShape& s) { return (outputTile(s) + 2) * (outputTile(s) + 2); }
  // U, [P, C, OC] (P the positions), rounded up to 256 bytes (what the layer keeps from its preparation).
  static std::size_t transformedWeightBytes(const ConvShape& s);
  // V [P, C, T'] and M [P, OC, T'] (T' the tiles of a chunk of images rounded up to 4): memory the forward pass
  // alone uses.
  static std::size_t scratchBytes(const ConvShape& s);
  // The images the forward pass transforms at a time (the whole batch where the scratch is small enough).
  static std::uint32_t imagesPerChunk(const ConvShape& s);
  // The m×m output tiles of a layer chosen.
  static std::uint64_t tiles(const ConvShape& s);

  Dispatch transformWeights(const BufferView& weight, const BufferView& transformed, const ConvShape& s) const;
  // Per chunk of images: the input's transform, the P GEMMs and the output's transform (with bias, activation,
  // function, residual, or 2×2 max pooling when `pooled`) into y.
  std::vector<Dispatch> forward(const BufferView& x, const BufferView& transformed, const BufferView& bias, const BufferView& y,
                                const ConvShape& s, const BufferView& scratch, bool pooled, const BufferView* residual) const;

 private:
  Dispatch linear(const Program& program, const std::string& label, std::vector<StorageBinding> buffers, const ConvShape& s,
                  std::uint64_t count) const;
  ProgramCache* programs_;
  Activation activation_;
  Pointwise after_;
  bool residual_;
  GemmPrograms products_;
};

}  // namespace glnet
