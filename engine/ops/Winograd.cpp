#include "ops/Winograd.h"

#include "base/check.h"
#include "numbers/ShaderModes.h"
#include "plan/Groups.h"

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
  if (std::strcmp(value, "winograd2") == 0) return ConvAlgorithm::winogradF2;
  if (std::strcmp(value, "winograd4") == 0) return ConvAlgorithm::winogradF4;
  throw Error(std::string("GLNET_CONV_ALGORITHM is '") + value + "'; it takes auto, gemm, winograd, winograd2 or winograd4");
}

ConvAlgorithm requestedAlgorithm() {
  return forcedAlgorithm != ConvAlgorithm::automatic ? forcedAlgorithm : algorithmFromEnvironment();
}

std::uint64_t tilesOf(const ConvShape& s, std::uint32_t m) {
  return std::uint64_t{s.batch} * ((s.outHeight() + m - 1) / m) * ((s.outWidth() + m - 1) / m);
}
// The tiles of `images` images of the layer, as its scratch stores them. The tile is the whole layer's choice: a
// chunk of fewer images must not choose again.
std::uint64_t paddedTiles(ConvShape s, std::uint32_t images) {
  const std::uint32_t m = WinogradConvOp::outputTile(s);
  s.batch = images;
  return (tilesOf(s, m) + 3) / 4 * 4;
}

// The transformed tiles of `images` images: V then M.
std::size_t chunkScratchBytes(const ConvShape& s, std::uint32_t images) {
  const std::size_t perPosition = static_cast<std::size_t>(paddedTiles(s, images)) * sizeof(float);
  const std::size_t positions = WinogradConvOp::positions(s);
  return boundableBytes(positions * s.channels * perPosition) + positions * s.outChannels * perPosition;
}

std::vector<ShaderDefine> geometry(const ConvShape& s, WinogradMode mode) {
  std::vector<ShaderDefine> defines = convGeometryDefines(s);
  defines.push_back({"WINOGRAD_TILE", std::to_string(WinogradConvOp::outputTile(s))});
  defines.push_back(kindDefine(mode));
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
  const ConvAlgorithm algorithm = requestedAlgorithm();
  if (algorithm != ConvAlgorithm::automatic) return algorithm != ConvAlgorithm::implicitGemm;
  // Measured on the H100 (bench/NOTES-conv.md), every 3x3 layer of resnet18, resnet50, vgg11 and densenet121 at
  // batches 1 and 64, each forced to the implicit GEMM, F(2x2) and F(4x4): with 64 input and output channels the
  // transforms' memory traffic outweighs the products saved (56x56x64 at batch 64: 0.59 ms direct, 0.79 with
  // F(4x4)); with 64 -> 128 channels and more it no longer does on a large plane (vgg11's 112x112 layer: 4.61 ->
  // 3.06 ms) but still does on a small one (squeezenet1_1's 64 -> 256 at 13x13: 0.151 -> 0.192 ms, its 4x4 tiles
  // covering 16x16); with 128 input channels and more Winograd is faster (batch 64: 28x28x128 0.56 -> 0.42 ms, 7x7x512 0.54 -> 0.33,
  // densenet's 128 -> 32 at 56x56 0.92 -> 0.55) once its GEMMs have enough outputs to fill the GPU (2x2 tiles x
  // output channels of 25 088 and more won, 12 544 and fewer lost: a batch of one at 14x14 or 7x7 stays direct).
  const bool longSum = s.channels >= 128 || (s.channels >= 64 && s.outChannels >= 128 && s.outHeight() >= 56 && s.outWidth() >= 56);
  return longSum && tilesOf(s, 2) * s.outChannels >= 20000;
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

std::uint32_t WinogradConvOp::outputTile(const ConvShape& s) {
  const ConvAlgorithm algorithm = requestedAlgorithm();
  if (algorithm == ConvAlgorithm::winogradF2) return 2;
  if (algorithm == ConvAlgorithm::winogradF4) return 4;
  // F(4x4)'s 36 GEMMs have 2.25 products per output against F(2x2)'s 4 (16 GEMMs over 4 times the tiles), and its
  // transforms move 2.25 floats per output against 4, but each GEMM has a quarter of the rows: measured (as for the
  // rule above), F(4x4) wins where 4x4 tiles x output channels reach 25 088 (batch 64: 28x28x128 0.65 -> 0.42 ms,
  // 14x14x256 0.44 -> 0.33, densenet's 56x56 128 -> 32 0.83 -> 0.55; vgg11's 28x28x512 at batch 1 0.098 ->
  // 0.079) and loses at 8 192 and fewer (batch 1: 28x28x128 0.042 -> 0.048 ms, 7x7x512 0.068 -> 0.101).
  return tilesOf(s, 4) * s.outChannels >= 20000 ? 4 : 2;
}

std::uint64_t WinogradConvOp::tiles(const ConvShape& s) { return tilesOf(s, outputTile(s)); }

std::size_t WinogradConvOp::transformedWeightBytes(const ConvShape& s) {
  return boundableBytes(std::size_t{positions(s)} * s.channels * s.outChannels * sizeof(float));
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
  GLNET_ASSERT(fits(s), "Winograd's convolutions take 3x3 kernels at stride 1");
  GLNET_ASSERT(transformed.room() >= transformedWeightBytes(s), "the transformed weights need their own space");
  return linear(programs_->get("Winograd.glsl", geometry(s, WinogradMode::weights)), "conv winograd F" + std::to_string(outputTile(s)) + " weights",
                {{1, weight, Access::read}, {3, transformed, Access::write}}, s, std::uint64_t{s.outChannels} * s.channels);
}

std::vector<Dispatch> WinogradConvOp::forward(const BufferView& x, const BufferView& transformed, const BufferView& bias,
                                              const BufferView& y, const ConvShape& s, const BufferView& scratch, bool pooled,
                                              const BufferView* residual) const {
  GLNET_ASSERT(fits(s), "Winograd's convolutions take 3x3 kernels at stride 1");
  GLNET_ASSERT(!pooled || (after_.kind == PointwiseKind::identity && !residual_), "a function or a residual is not fused with pooling");
  GLNET_ASSERT(residual_ == (residual != nullptr), "a residual convolution's forward pass takes its residual");
  GLNET_ASSERT(scratch.room() >= scratchBytes(s), "Winograd's transforms need their scratch memory");
  const std::uint32_t images = imagesPerChunk(s), m = outputTile(s);
  const std::uint64_t stride = paddedTiles(s, images);
  const std::uint32_t positions = WinogradConvOp::positions(s);
  const BufferView inputs(*scratch.buffer, scratch.offset, positions * s.channels * stride * sizeof(float));
  const BufferView products(*scratch.buffer, scratch.offset + boundableBytes(inputs.bytes), positions * s.outChannels * stride * sizeof(float));
  const BufferView weights(*transformed.buffer, transformed.offset, std::size_t{positions} * s.channels * s.outChannels * sizeof(float));
  const Program& inputProgram = programs_->get("Winograd.glsl", geometry(s, WinogradMode::input));
  // Each position's GEMM has T rows, OC columns and a sum over C; the rule sees the P of them as one of P·T rows.
  const GemmChoice gemm = chooseGemm(positions * stride, s.outChannels, s.channels, false);
  const Program& productProgram = products_.get(*gemm.config, vec4Readable(inputs.offset, stride),
                                                vec4Readable(weights.offset, s.outChannels), false, geometry(s, WinogradMode::gemms));
  std::vector<ShaderDefine> defines = geometry(s, WinogradMode::output);
  defines.push_back(kindDefine(activation_));
  if (pooled) defines.push_back({"WINOGRAD_POOL", "1"});
  if (residual_) defines.push_back({"WINOGRAD_RESIDUAL", "1"});
  for (ShaderDefine& define : after_.fusedDefines()) defines.push_back(std::move(define));
  const Program& outputProgram = programs_->get("Winograd.glsl", defines, after_.fusedIncludes());
  const std::string function = after_.kind != PointwiseKind::identity ? after_.name() : activationName(activation_);
  const std::string label = "conv winograd F" + std::to_string(m) + " ";

  std::vector<Dispatch> dispatches;
  for (std::uint32_t first = 0; first < s.batch; first += images) {
    ConvShape part = s;
    part.batch = std::min(images, s.batch - first);
    const std::uint64_t tiles = tilesOf(part, m);
    Dispatch input = linear(inputProgram, label + "input", {{0, x, Access::read}, {3, inputs, Access::write}}, part,
                            tiles * s.channels);
    input.uniforms.push_back(Uniform::u32(1, first));
    dispatches.push_back(input);
    Dispatch product;
    product.program = &productProgram;
    product.label = label + "products " + gemm.config->name;
    product.tuningKey = gemm.tuningKey;
    product.buffers = {{0, inputs, Access::read}, {1, weights, Access::read}, {3, products, Access::write}};
    product.uniforms = {Uniform::u32(0, part.batch), Uniform::u32(depthLocation, s.channels)};
    product.groups = {static_cast<std::uint32_t>((tiles + gemm.config->tileRows - 1) / gemm.config->tileRows),
                      (s.outChannels + gemm.config->tileColumns - 1) / gemm.config->tileColumns, positions};
    dispatches.push_back(product);
    Dispatch output = linear(outputProgram, label + "output " + function + (pooled ? " + max pool" : residual ? " + residual" : ""),
                             {{0, products, Access::read}, {2, bias, Access::read}, {3, y, Access::write}}, part, tiles * s.outChannels);
    output.uniforms.push_back(Uniform::u32(1, first));
    if (residual) output.buffers.push_back({4, *residual, Access::read});
    dispatches.push_back(output);
  }
  return dispatches;
}

}  // namespace glnet
