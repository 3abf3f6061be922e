// Bindings of shaders/Conv2D.glsl (convolution and its gradients), shaders/ConvWeightGradient.glsl and shaders/MaxPool.glsl.
#pragma once

#include "numbers/Activation.h"
#include "numbers/ShaderModes.h"
#include "ops/Gemm.h"
#include "ops/GemmTuning.h"
#include "ops/Pointwise.h"
#include "plan/Plan.h"
#include "plan/ProgramCache.h"

#include <optional>

namespace glnet {

struct ConvShape {
  std::uint32_t batch, channels, height, width;  // input [N, C, H, W]
  std::uint32_t outChannels, kernelHeight, kernelWidth;
  std::uint32_t padding;                         // top and bottom, and left and right unless widthPadding says
                                                 // otherwise; 0: valid; (kernel − 1)/2: same
  std::uint32_t stride = 1;
  // Left and right where they differ from top and bottom: the "same" padding of a 1×k or k×1 kernel.
  std::optional<std::uint32_t> widthPadding = std::nullopt;
  std::uint32_t leftPadding() const { return widthPadding.value_or(padding); }
  std::uint32_t outHeight() const { return (height + 2 * padding - kernelHeight) / stride + 1; }
  std::uint32_t outWidth() const { return (width + 2 * leftPadding() - kernelWidth) / stride + 1; }
};

// The layer's geometry as the convolution shaders' defines (CONV_CHANNELS ... CONV_STRIDE), compiled in.
std::vector<ShaderDefine> convGeometryDefines(const ConvShape& s);

class ConvOp {
 public:
  // `after`: an imported model's function applied after the activation in the forward pass; `residual`: the forward
  // pass adds a tensor shaped as Y before the activation; `inputScaled`: it multiplies X's channels by a factor per
  // image and channel as it reads them (a squeeze-excite gate; no padding). Inference only, none with pooling.
  ConvOp(ProgramCache& programs, Activation activation, const Pointwise& after = {}, bool residual = false, bool inputScaled = false);
  // Two dispatches: the weights transposed into the start of `workspace` (OC·C·KH·KW floats), then the convolution,
  // whose GEMM then reads both operands along its tile. `pooled`: followed by 2×2 max pooling with stride 2 (odd
  // edges dropped), y [N, OC, OH/2, OW/2], in the same GEMM, whose rows then run over pooling windows.
  // With a workspace of forwardWorkspaceBytes, three where forwardSplit says so: the GEMM split along its sum into
  // partials after the weights, then their sum with bias, activation and the pooling (a batch of one at 7x7 has 8
  // tiles of 64x64 for 132 multiprocessors).
  std::vector<Dispatch> forward(const BufferView& x, const BufferView& weight, const BufferView& bias, const BufferView& y,
                                const ConvShape& shape, const BufferView& workspace, bool pooled = false,
                                const BufferView* residual = nullptr, const BufferView* inputScale = nullptr) const;
  // A 1x1 kernel at stride 1 without padding, over planes of a multiple of 4 pixels: the GEMM's A is X itself, read
  // as a plain matrix in vec4 runs rather than gathered (unpooled only: pooling needs the gathered rows). On the H100
  // at batch 64 that made resnet50's 1x1 layers of 56x56 to 14x14 faster by 5-30 % (with 8x8 blocks); on 7x7 planes
  // (scalar reads) 10-30 % slower (bench/NOTES-conv.md).
  static bool readsPlainRows(const ConvShape& s) {
    return s.kernelHeight == 1 && s.kernelWidth == 1 && s.stride == 1 && s.padding == 0 && s.leftPadding() == 0 &&
           std::uint64_t{s.height} * s.width % 4 == 0;
  }
  // The forward GEMM's configuration and split. Plain rows take the rule's choice for a loaded operand where it has
  // blocks larger than 4x4; otherwise (and for gathered rows) the choice among the 4x4 configurations weighed as
  // gathered, whose splits fit convolutions of few tiles (at batch 1). A measured choice (forced or tuned) is kept
  // under the gathered shape.
  static GemmChoice forwardGemm(const ConvShape& s, bool pooled, bool splittable) {
    const std::uint64_t pixels = std::uint64_t{s.batch} * s.outHeight() * s.outWidth();
    const std::uint64_t depth = std::uint64_t{s.channels} * s.kernelHeight * s.kernelWidth;
    const GemmChoice gathered = chooseGemm(pixels, s.outChannels, depth, splittable, GemmOperand::gathered);
    if (pooled || !readsPlainRows(s) || gathered.measured) return gathered;
    GemmChoice loaded = [&] {
      const IgnoredGemmTuning ruleOnly;  // a tuning of this key is a dense layer's, never measured for a convolution
      return chooseGemm(pixels, s.outChannels, depth, splittable, GemmOperand::loaded);
    }();
    loaded.tuningKey = gathered.tuningKey;  // one shape, one tuning: whichever operand the rule weighs it as
    return loaded.config->gathersRuns() ? gathered : loaded;
  }
  static SplitK forwardSplit(const ConvShape& s, bool pooled = false) { return forwardGemm(s, pooled, true).split; }
  // Enough for the pooled and the unpooled pass.
  static std::size_t forwardWorkspaceBytes(const ConvShape& s) {
    const std::uint64_t pixels = std::uint64_t{s.batch} * s.outHeight() * s.outWidth();
    return rearrangedWeightBytes(s) + std::max(forwardSplit(s, false).workspaceBytes(pixels, s.outChannels),
                                               forwardSplit(s, true).workspaceBytes(pixels, s.outChannels));
  }
  static std::size_t transposedWeightBytes(const ConvShape& s) {
    return std::size_t{s.outChannels} * s.channels * s.kernelHeight * s.kernelWidth * sizeof(float);
  }
  // The same rounded up to 256 bytes, the largest storage buffer offset alignment GL allows, so that what
  // follows them in a workspace can be bound.
  static std::size_t rearrangedWeightBytes(const ConvShape& s) { return boundableBytes(transposedWeightBytes(s)); }
  // The weights rearranged into `workspace`, phase by phase of the stride, each [OC·taps, C] (so that the GEMM reads
  // them along its tile, as the forward pass does); a GEMM per phase (inputGradientPhases: one at stride 1); and
  // when inputGradientGemm splits them, the sum of their split-K partials, which follow the weights in the workspace
  // (inputGradientWorkspaceBytes in all).
  // The gradients read dZ, the gradient of the pre-activation (activationGradientInPlace makes it of dY).
  std::vector<Dispatch> inputGradient(const BufferView& dz, const BufferView& weight, const BufferView& dx,
                                      const ConvShape& shape, bool accumulate, const BufferView& workspace) const;
  // A phase of the stride: the input pixels (ih, iw) with ih ≡ row and iw ≡ column modulo the stride, `rows` of
  // them over the batch, whose gradient sums dZ over the kernel offsets that reach them, `depth` = OC·those offsets.
  // At a stride of 2 a 3x3 kernel's four phases take 1, 2, 2 and 4 offsets: dX costs what the forward pass does,
  // where dZ spread out to stride 1 multiplied 4× as many values, three quarters of them zeros.
  struct InputGradientPhase {
    std::uint32_t row, column;
    std::uint64_t rows, depth;
  };
  static std::vector<InputGradientPhase> inputGradientPhases(const ConvShape& s);
  // One configuration and split for every phase, chosen for their mean (N·H·W / stride² rows, a sum of
  // OC·KH·KW / stride²), so that their partial sums fill the same slices of one workspace in dX's layout.
  static GemmChoice inputGradientGemm(const ConvShape& s) {
    const std::uint64_t phases = std::uint64_t{s.stride} * s.stride;
    return chooseGemm((std::uint64_t{s.batch} * s.height * s.width + phases - 1) / phases, s.channels,
                      (std::uint64_t{s.outChannels} * s.kernelHeight * s.kernelWidth + phases - 1) / phases, true, GemmOperand::gathered);
  }
  static SplitK inputGradientSplit(const ConvShape& s) { return inputGradientGemm(s).split; }
  // Rounded up to 256 bytes, so that dW's workspace can follow it.
  static std::size_t inputGradientWorkspaceBytes(const ConvShape& s) {
    const std::size_t partials = inputGradientSplit(s).workspaceBytes(std::uint64_t{s.batch} * s.height * s.width, s.channels);
    return rearrangedWeightBytes(s) + boundableBytes(partials);
  }
  // Where pixelWeightGradient gives tiles (and the workspace is there): two dispatches, ConvWeightGradient.glsl's
  // partial sums of dW (and of db, given db) and their sum. Otherwise on the GEMM core, split along the batch and
  // pixels (two dispatches) when weightGradientSplit says so, with its workspace. Given db (written or added like
  // dW), the bias gradient too: when the GEMM is split, as one more column of it (B's column of ones) whose sums the
  // split-K sum writes to db, which saves a pass over dZ; otherwise by biasGradient.
  std::vector<Dispatch> weightGradient(const BufferView& dz, const BufferView& x, const BufferView& dw,
                                       const ConvShape& shape, bool accumulate, const std::optional<BufferView>& workspace,
                                       const std::optional<BufferView>& db = std::nullopt) const;
  // ConvWeightGradient.glsl's tiles and split (dW and db straight from the pixels of X and dZ) where it takes the
  // weight gradient: kernels of 3 to 9 offsets, at most 3x3, over 8 or more input channels, at any stride, within
  // the device's limits; elsewhere (a first layer's 1 to 3 channels, 1x1 and larger kernels) the GEMM core does.
  struct PixelWeightGradient {
    std::uint32_t outChannelTile, channelTile, bandRows, bandColumns;
    std::uint32_t splits, bandsPerSlice;
    // 4 output channels each (8 ran slower on the H100: bench/results/2026-12-06-conv-dw-from-pixels-nvidia-h100/).
    std::uint32_t invocations() const { return outChannelTile / 4 * channelTile; }
    std::uint64_t sharedBytes(const ConvShape& s) const;
    // The partial sums: a slice of dW and db per split.
    static std::size_t workspaceBytes(const ConvShape& s, std::uint32_t splits) {
      return std::size_t{splits} * (std::size_t{s.outChannels} * s.channels * s.kernelHeight * s.kernelWidth + s.outChannels) * sizeof(float);
    }
  };
  static std::optional<PixelWeightGradient> pixelWeightGradient(const ConvShape& s);
  static SplitK weightGradientSplit(const ConvShape& s, bool withBias) {
    return chooseGemm(s.outChannels, std::uint64_t{s.channels} * s.kernelHeight * s.kernelWidth + (withBias ? 1 : 0),
                      std::uint64_t{s.batch} * s.outHeight() * s.outWidth(), true, GemmOperand::gathered)
        .split;
  }
  static std::size_t weightGradientWorkspaceBytes(const ConvShape& s) {
    if (const std::optional<PixelWeightGradient> tiles = pixelWeightGradient(s)) return PixelWeightGradient::workspaceBytes(s, tiles->splits);
    const std::uint64_t columns = std::uint64_t{s.channels} * s.kernelHeight * s.kernelWidth;
    return std::max(weightGradientSplit(s, false).workspaceBytes(s.outChannels, columns),
                    weightGradientSplit(s, true).workspaceBytes(s.outChannels, columns + 1));
  }
  // dY ⊙= act'(Y) in place: dY becomes the dZ that the gradients read; none for Activation::none.
  std::optional<Dispatch> activationGradientInPlace(const BufferView& dy, const BufferView& y, const ConvShape& shape) const;
  Dispatch biasGradient(const BufferView& dz, const BufferView& db, const ConvShape& shape, bool accumulate) const;

 private:
  // Conv2D.glsl's transposeWeights or weightsForInputGradient: the weights rearranged into `target`, one invocation per weight.
  Dispatch rearrangeWeights(ConvMode mode, const char* label, const BufferView& weight, const BufferView& target,
                            const ConvShape& shape) const;
  std::vector<Dispatch> weightGradientFromPixels(const PixelWeightGradient& tiles, const BufferView& dz, const BufferView& x,
                                             const BufferView& dw, const ConvShape& shape, bool accumulate,
                                             const BufferView& workspace, const std::optional<BufferView>& db) const;
  Dispatch dispatch(const Program& program, const std::string& label, std::vector<StorageBinding> buffers,
                    const ConvShape& shape, bool accumulate, std::array<std::uint32_t, 3> groups) const;
  Activation activation_;
  Pointwise after_;
  bool residual_;
  bool inputScaled_;
  ProgramCache* programs_;
  GemmPrograms forward_;
  GemmPrograms plainRowsForward_;
  GemmPrograms inputGradient_;
  GemmPrograms weightGradient_;
  GemmPrograms weightAndBiasGradient_;
  SplitSumOp splitSum_;
  SplitBiasActivationOp finishForward_;
};

class MaxPoolOp {
 public:
  explicit MaxPoolOp(ProgramCache& programs);
  // 2×2, stride 2 over `planes` planes of height × width; argmax receives the input index of each maximum.
  Dispatch forward(const BufferView& x, const BufferView& y, const BufferView& argmax, std::uint32_t planes,
                   std::uint32_t height, std::uint32_t width) const;
  Dispatch backward(const BufferView& dy, const BufferView& argmax, const BufferView& dx, std::uint32_t planes,
                    std::uint32_t height, std::uint32_t width, bool accumulate) const;

 private:
  const Program& forward_;
  const Program& backward_;
};

}  // namespace glnet
