#include "ops/Winograd.h"

#include "gl/check.h"
#include "ops/Groups.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace glnet {
namespace {

ConvAlgorithm forcedAlgorithm = ConvAlgorithm::automatic;
std::uint32_t forcedImagesPerChunk = 0;

ConvAlgorithm algorithmFromEnvironment() {
  const char* value = std::getenv("GLNET_CONV_ALGORITHM");
  if (!value || !*value || std::strcmp(value, "auto") == 0) return ConvAlgorithm::automatic;
  if (std::strcmp(value, "gemm") == 0) return ConvAlgorithm::implicitGemm;
  if (std::strcmp(value, "winograd") == 0) return ConvAlgorithm::winograd;
  throw Error(std::string("GLNET_CONV_ALGORITHM is '") + value + "'; it takes auto, gemm or winograd");
}

std::size_t roundedTo256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }
std::uint64_t paddedTiles(const ConvShape& s) { return (WinogradConvOp::tiles(s) + 3) / 4 * 4; }

// The transformed tiles of `images` images: V then M.
std::size_t chunkScratchBytes(ConvShape s, std::uint32_t images) {
  s.batch = images;
  const std::size_t perPosition = static_cast<std::size_t>(paddedTiles(s)) * sizeof(float);
  return roundedTo256(16 * s.channels * perPosition) + 16 * s.outChannels * perPosition;
}

std::vector<ShaderDefine> geometry(const ConvShape& s, int mode) {
  std::vector<ShaderDefine> defines = convGeometryDefines(s);
  defines.push_back({"WINOGRAD_MODE", std::to_string(mode)});
  return defines;
}

constexpr int depthLocation = 11;  // Winograd.glsl's gemmDepth

}  // namespace

ForcedConvAlgorithm::ForcedConvAlgorithm(ConvAlgorithm algorithm, std::uint32_t imagesPerChunk)
    : previous_(forcedAlgorithm), previousImages_(forcedImagesPerChunk) {
  forcedAlgorithm = algorithm;
  forcedImagesPerChunk = imagesPerChunk;
}
ForcedConvAlgorithm::~ForcedConvAlgorithm() {
  forcedAlgorithm = previous_;
  forcedImagesPerChunk = previousImages_;
}

bool WinogradConvOp::chosen(const ConvShape& s) {
  if (!fits(s)) return false;
  const ConvAlgorithm algorithm = forcedAlgorithm != ConvAlgorithm::automatic ? forcedAlgorithm : algorithmFromEnvironment();
  if (algorithm != ConvAlgorithm::automatic) return algorithm == ConvAlgorithm::winograd;
  // Measured on the H100 (bench/NOTES-conv.md), every 3x3 layer of resnet18, resnet50 and densenet121 at batches 1
  // and 64: with 64 input channels the transforms' memory traffic outweighs the products saved (56x56x64 at batch
  // 64: 0.58 -> 0.67 ms); with 128 and more Winograd is faster (28x28x128: 0.56 -> 0.48 ms, 7x7x512: 0.55 ->
  // 0.34, densenet's 128 -> 32: 0.60-0.90x) once its 16 GEMMs have enough outputs to fill the GPU (tiles x output
  // channels of 25 088 and more won, 12 544 and fewer lost: a batch of one at 14x14 or 7x7 stays direct).
  return s.channels >= 128 && tiles(s) * s.outChannels >= 20000;
}

std::uint32_t WinogradConvOp::imagesPerChunk(const ConvShape& s) {
  // Scratch up to 96 MiB or twice the layer's output, whichever is larger (at least one image), the batch split
  // evenly: an inference graph places it in its activation arena while the layer runs, so larger chunks raise the
  // peak (densenet121 at batch 64: 515.7 MiB with its 28x28 layers in two chunks, 613.7 in one, against PyTorch's
  // 613.0), and each further chunk costs three dependent dispatches (densenet121 in chunks of one image: 28.8 ->
  // 46.9 ms on the H100).
  if (forcedImagesPerChunk) return std::min(forcedImagesPerChunk, s.batch);
  const std::size_t output = std::size_t{s.batch} * s.outChannels * s.outHeight() * s.outWidth() * sizeof(float);
  const std::size_t budget = std::max<std::size_t>(2 * output, std::size_t{96} << 20);
  const std::size_t most = std::clamp<std::size_t>(budget / chunkScratchBytes(s, 1), 1, s.batch);
  const std::size_t chunks = (s.batch + most - 1) / most;
  return static_cast<std::uint32_t>((s.batch + chunks - 1) / chunks);
}

std::size_t WinogradConvOp::transformedWeightBytes(const ConvShape& s) {
  return roundedTo256(std::size_t{16} * s.channels * s.outChannels * sizeof(float));
}

std::size_t WinogradConvOp::scratchBytes(const ConvShape& s) { return chunkScratchBytes(s, imagesPerChunk(s)); }

WinogradConvOp::WinogradConvOp(ProgramCache& programs, Activation activation, const Pointwise& after, bool residual)
    : programs_(&programs),
      activation_(activation),
      after_(after),
      residual_(residual),
      products_(programs, "Winograd.glsl", {{"GEMM_A_ALONG_ROWS", "1"}, {"GEMM_B_ALONG_COLUMNS", "1"}}) {}

Dispatch WinogradConvOp::linear(const Program& program, const std::string& label, std::vector<StorageBinding> buffers,
                                const ConvShape& s, std::uint64_t count) const {
  Dispatch d = linearDispatch(program, label, count);
  d.buffers = std::move(buffers);
  d.uniforms = {Uniform::u32(0, s.batch)};
  return d;
}

Dispatch WinogradConvOp::transformWeights(const BufferView& weight, const BufferView& transformed, const ConvShape& s) const {
  GLNET_ASSERT(fits(s), "Winograd's F(2x2, 3x3) takes 3x3 kernels at stride 1");
  GLNET_ASSERT(transformed.room() >= transformedWeightBytes(s), "the transformed weights need their own space");
  return linear(programs_->get("Winograd.glsl", geometry(s, 0)), "conv winograd weights",
                {{1, weight, Access::read}, {3, transformed, Access::write}}, s, std::uint64_t{s.outChannels} * s.channels);
}

std::vector<Dispatch> WinogradConvOp::forward(const BufferView& x, const BufferView& transformed, const BufferView& bias,
                                              const BufferView& y, const ConvShape& s, const BufferView& scratch, bool pooled,
                                              const BufferView* residual) const {
  GLNET_ASSERT(fits(s), "Winograd's F(2x2, 3x3) takes 3x3 kernels at stride 1");
  GLNET_ASSERT(!pooled || (after_.kind == PointwiseKind::identity && !residual_), "a function or a residual is not fused with pooling");
  GLNET_ASSERT(residual_ == (residual != nullptr), "a residual convolution's forward pass takes its residual");
  GLNET_ASSERT(scratch.room() >= scratchBytes(s), "Winograd's transforms need their scratch memory");
  ConvShape chunk = s;
  chunk.batch = imagesPerChunk(s);
  const std::uint64_t stride = paddedTiles(chunk);
  const BufferView inputs(*scratch.buffer, scratch.offset, 16 * s.channels * stride * sizeof(float));
  const BufferView products(*scratch.buffer, scratch.offset + roundedTo256(inputs.bytes), 16 * s.outChannels * stride * sizeof(float));
  const BufferView weights(*transformed.buffer, transformed.offset, std::size_t{16} * s.channels * s.outChannels * sizeof(float));
  const Program& inputProgram = programs_->get("Winograd.glsl", geometry(s, 1));
  // Each position's GEMM has T rows, OC columns and a sum over C; the rule sees the 16 of them as one of 16·T rows.
  const GemmChoice gemm = chooseGemm(16 * stride, s.outChannels, s.channels, false);
  const Program& productProgram = products_.get(*gemm.config, vec4Readable(inputs.offset, stride),
                                                vec4Readable(weights.offset, s.outChannels), false, geometry(s, 2));
  std::vector<ShaderDefine> defines = geometry(s, 3);
  defines.push_back({"ACTIVATION", std::to_string(static_cast<int>(activation_))});
  if (pooled) defines.push_back({"WINOGRAD_POOL", "1"});
  if (residual_) defines.push_back({"WINOGRAD_RESIDUAL", "1"});
  for (ShaderDefine& define : after_.fusedDefines()) defines.push_back(std::move(define));
  const Program& outputProgram = programs_->get("Winograd.glsl", defines, after_.fusedIncludes());
  const std::string function = after_.kind != PointwiseKind::identity ? after_.name() : activationName(activation_);

  std::vector<Dispatch> dispatches;
  for (std::uint32_t first = 0; first < s.batch; first += chunk.batch) {
    ConvShape part = s;
    part.batch = std::min(chunk.batch, s.batch - first);
    const std::uint64_t tiles = WinogradConvOp::tiles(part);
    Dispatch input = linear(inputProgram, "conv winograd input", {{0, x, Access::read}, {3, inputs, Access::write}}, part,
                            tiles * s.channels);
    input.uniforms.push_back(Uniform::u32(1, first));
    dispatches.push_back(input);
    Dispatch product;
    product.program = &productProgram;
    product.label = std::string("conv winograd products ") + gemm.config->name;
    product.buffers = {{0, inputs, Access::read}, {1, weights, Access::read}, {3, products, Access::write}};
    product.uniforms = {Uniform::u32(0, part.batch), Uniform::u32(depthLocation, s.channels)};
    product.groups = {static_cast<std::uint32_t>((tiles + gemm.config->tileRows - 1) / gemm.config->tileRows),
                      (s.outChannels + gemm.config->tileColumns - 1) / gemm.config->tileColumns, 16};
    dispatches.push_back(product);
    Dispatch output = linear(outputProgram, "conv winograd output " + function + (pooled ? " + max pool" : residual ? " + residual" : ""),
                             {{0, products, Access::read}, {2, bias, Access::read}, {3, y, Access::write}}, part, tiles * s.outChannels);
    output.uniforms.push_back(Uniform::u32(1, first));
    if (residual) output.buffers.push_back({4, *residual, Access::read});
    dispatches.push_back(output);
  }
  return dispatches;
}

}  // namespace glnet
