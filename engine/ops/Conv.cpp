#include "ops/Conv.h"

#include "base/check.h"
#include "numbers/ShaderModes.h"
#include "plan/Groups.h"

#include <algorithm>

namespace glnet {
namespace {

std::vector<ShaderDefine> convDefines(Activation activation, ConvMode mode, std::vector<ShaderDefine> layout = {}) {
  layout.push_back(kindDefine(mode));
  layout.push_back(kindDefine(activation));
  return layout;
}

constexpr int depthLocation = 11;  // Conv2D.glsl's gemmDepth


// dW's geometry, and its implicit im2col operand gathered in runs of 4 (GEMM_B_GATHER) on the configurations the
// rule weighs for a convolution (GemmConfig::gathersRuns: 4×4 blocks). On the H100 the runs made conv2 of the
// MNIST CNN at batch 100 faster (dW 0.231 -> 0.198 ms); larger blocks lose with gathered operands.
std::vector<ShaderDefine> weightGradientDefines(const ConvShape& s, const GemmConfig& config) {
  std::vector<ShaderDefine> defines = convGeometryDefines(s);
  if (config.gathersRuns()) defines.push_back({"GEMM_B_GATHER", "1"});
  return defines;
}

// The defines of the GEMMs whose A is the implicit im2col matrix (forward and dX): gathered in runs, or for a
// pointwise forward pass (ConvOp::readsPlainRows) read as a plain matrix, X's planes.
enum class RowSource { gathered, plain };
std::vector<ShaderDefine> rowDefines(RowSource source, Activation activation, ConvMode mode, const Pointwise& after = {}, bool residual = false,
                                     bool inputScaled = false) {
  std::vector<ShaderDefine> defines = convDefines(activation, mode, {{"GEMM_A_ALONG_ROWS", "1"}, {"GEMM_B_ALONG_COLUMNS", "1"}});
  defines.push_back(source == RowSource::gathered ? ShaderDefine{"GEMM_A_GATHER", "1"} : ShaderDefine{"CONV_PLAIN_ROWS", "1"});
  if (residual) defines.push_back({"CONV_RESIDUAL", "1"});
  if (inputScaled) defines.push_back({"CONV_INPUT_SCALE", "1"});
  for (ShaderDefine& define : after.fusedDefines()) defines.push_back(std::move(define));
  return defines;
}

// Every convolution shader reads its geometry's names from ConvGeometry.glsl; `more`: the other files it includes.
std::vector<std::string> geometryIncluded(std::vector<std::string> more = {}) {
  more.insert(more.begin(), "ConvGeometry.glsl");
  return more;
}

}  // namespace

std::vector<ShaderDefine> convGeometryDefines(const ConvShape& s) {
  return {{"CONV_CHANNELS", std::to_string(s.channels) + "u"},
          {"CONV_HEIGHT", std::to_string(s.height) + "u"},
          {"CONV_WIDTH", std::to_string(s.width) + "u"},
          {"CONV_OUT_CHANNELS", std::to_string(s.outChannels) + "u"},
          {"CONV_KERNEL_HEIGHT", std::to_string(s.kernelHeight) + "u"},
          {"CONV_KERNEL_WIDTH", std::to_string(s.kernelWidth) + "u"},
          {"CONV_PADDING", std::to_string(s.padding)},
          {"CONV_PADDING_WIDTH", std::to_string(s.leftPadding())},
          {"CONV_STRIDE", std::to_string(s.stride)}};
}

ConvOp::ConvOp(ProgramCache& programs, Activation activation, const Pointwise& after, bool residual, bool inputScaled)
    : activation_(activation),
      after_(after),
      residual_(residual),
      inputScaled_(inputScaled),
      programs_(&programs),
      forward_(programs, "Conv2D.glsl", rowDefines(RowSource::gathered, activation, ConvMode::forward, after, residual, inputScaled),
               geometryIncluded(after.fusedIncludes())),
      plainRowsForward_(programs, "Conv2D.glsl", rowDefines(RowSource::plain, activation, ConvMode::forward, after, residual, inputScaled),
                        geometryIncluded(after.fusedIncludes())),
      inputGradient_(programs, "Conv2D.glsl", rowDefines(RowSource::gathered, Activation::none, ConvMode::inputGradient), geometryIncluded()),
      weightGradient_(programs, "Conv2D.glsl", convDefines(Activation::none, ConvMode::weightGradient), geometryIncluded()),
      weightAndBiasGradient_(programs, "Conv2D.glsl", convDefines(Activation::none, ConvMode::weightGradient, {{"CONV_BIAS_COLUMN", "1"}}),
                             geometryIncluded()),
      splitSum_(programs),
      finishForward_(programs, activation, after, residual) {}

Dispatch ConvOp::dispatch(const Program& program, const std::string& label, std::vector<StorageBinding> buffers,
                          const ConvShape& s, bool accumulate, std::array<std::uint32_t, 3> groups) const {
  Dispatch d;
  d.program = &program;
  d.label = label;
  d.buffers = std::move(buffers);
  d.uniforms = {Uniform::u32(0, s.batch), Uniform::u32(10, accumulate ? 1u : 0u)};
  d.groups = groups;
  return d;
}

Dispatch ConvOp::rearrangeWeights(ConvMode mode, const char* label, const BufferView& weight, const BufferView& target,
                                  const ConvShape& s) const {
  std::vector<ShaderDefine> defines = convGeometryDefines(s);
  defines.push_back(kindDefine(mode));
  const Program& program = programs_->get("Conv2D.glsl", defines, geometryIncluded());
  Dispatch d = dispatch(program, label, {{1, weight, Access::read}, {3, target, Access::write}}, s, false, {});
  d.invocations = std::uint64_t{s.outChannels} * s.channels * s.kernelHeight * s.kernelWidth;
  d.linear = true;
  return d;
}

std::vector<Dispatch> ConvOp::forward(const BufferView& x, const BufferView& weight, const BufferView& bias, const BufferView& y,
                                      const ConvShape& s, const BufferView& workspace, bool pooled, const BufferView* residual,
                                      const BufferView* inputScale) const {
  GLNET_ASSERT(!pooled || (s.outHeight() >= 2 && s.outWidth() >= 2 && s.stride == 1), "2×2 pooling needs a stride-1 output of at least 2×2");
  GLNET_ASSERT(!pooled || (after_.kind == PointwiseKind::identity && !residual_), "a function or a residual is not fused with pooling");
  GLNET_ASSERT(residual_ == (residual != nullptr), "a residual convolution's forward pass takes its residual");
  GLNET_ASSERT(inputScaled_ == (inputScale != nullptr), "a convolution of scaled inputs takes their scale");
  GLNET_ASSERT(!inputScaled_ || (!pooled && s.padding == 0 && s.leftPadding() == 0), "scaled inputs are read without padding, unpooled");
  const std::uint64_t pixels = std::uint64_t{s.batch} * s.outHeight() * s.outWidth();
  const std::uint64_t depth = std::uint64_t{s.channels} * s.kernelHeight * s.kernelWidth;
  GLNET_ASSERT(workspace.room() >= transposedWeightBytes(s), "the transposed conv weights need their own space");
  const BufferView transposedWeight(*workspace.buffer, workspace.offset, transposedWeightBytes(s));
  const Dispatch t = rearrangeWeights(ConvMode::transposeWeights, "conv weights transposed", weight, transposedWeight, s);
  const bool splittable = workspace.room() >= forwardWorkspaceBytes(s);
  const bool plainRows = !pooled && readsPlainRows(s);
  const GemmChoice split = forwardGemm(s, pooled, splittable);
  const bool splitting = split.split.splits > 1;
  // Pooled and unsplit, each pooling window is a run of 4 rows (its pixels), and the output pixels of dropped odd
  // edges none; split, the partials cover every pixel and their sum pools.
  const bool poolInGemm = pooled && !splitting;
  const std::uint64_t rows = poolInGemm ? std::uint64_t{s.batch} * (s.outHeight() / 2) * (s.outWidth() / 2) * 4 : pixels;
  GemmChoice gemm = split;
  if (poolInGemm) {
    // Measured (forced or tuned) under the unpooled shape's key: the same configuration, whole, timed under that key.
    gemm = split.measured ? gemmWith(*split.config, rows, s.outChannels, depth, false, GemmOperand::gathered)
                          : chooseGemm(rows, s.outChannels, depth, false, GemmOperand::gathered);
    gemm.tuningKey = split.tuningKey;
  }
  std::vector<ShaderDefine> defines = convGeometryDefines(s);
  const BufferView partials(*workspace.buffer, workspace.offset + rearrangedWeightBytes(s), gemm.split.workspaceBytes(rows, s.outChannels));
  // Unpooled, planes of a multiple of 4 pixels are stored in vec4 runs where every tensor it stores or adds allows.
  const std::uint64_t plane = std::uint64_t{s.outHeight()} * s.outWidth();
  const bool storesRuns = !pooled && vec4Readable(splitting ? partials.offset : y.offset, plane) &&
                          (!residual || splitting || vec4Readable(residual->offset, plane));
  if (poolInGemm) defines.insert(defines.end(), {{"CONV_POOL", "1"}, {"GEMM_STORE_RUNS", "1"}});
  if (storesRuns) defines.push_back({"GEMM_STORE_RUNS", "1"});
  const std::string function = after_.kind != PointwiseKind::identity ? after_.name() : activationName(activation_);
  const std::string label = "conv " + function + (pooled ? " + max pool " : residual ? " + residual " : " ") +
                            (inputScale ? "of scaled input " : "") + (plainRows ? "pointwise " : "") + gemm.config->name;
  const bool vec4X = plainRows && vec4Readable(x.offset, std::uint64_t{s.height} * s.width);
  const GemmPrograms& programs = plainRows ? plainRowsForward_ : forward_;
  Dispatch d = dispatch(programs.get(*gemm.config, vec4X, vec4Readable(transposedWeight.offset, s.outChannels), splitting, defines),
                        splitting ? label + " split-K" : label,
                        {{0, x, Access::read}, {1, transposedWeight, Access::read}, {2, bias, Access::read},
                         {3, splitting ? partials : y, Access::write}},
                        s, false, gemm.groups);
  if (residual && !splitting) d.buffers.push_back({4, *residual, Access::read});
  if (inputScale) d.buffers.push_back({5, *inputScale, Access::read});
  d.uniforms.push_back(Uniform::u32(depthLocation, static_cast<std::uint32_t>(depth)));
  if (!splitting) return taggedWith(gemm, {t, d});
  d.uniforms.push_back(Uniform::u32(15, gemm.split.chunk));
  if (pooled) {
    return taggedWith(gemm, {t, d, finishForward_.pooled(partials, bias, y, s.batch, s.outChannels, s.outHeight(), s.outWidth(),
                                                         gemm.split.splits)});
  }
  return taggedWith(gemm, {t, d, finishForward_(partials, bias, y, static_cast<std::uint32_t>(rows * s.outChannels), s.outChannels,
                                                gemm.split.splits, s.outHeight() * s.outWidth(), residual)});
}

std::vector<ConvOp::InputGradientPhase> ConvOp::inputGradientPhases(const ConvShape& s) {
  std::vector<InputGradientPhase> phases;
  for (std::uint32_t row = 0; row < s.stride; ++row) {
    for (std::uint32_t column = 0; column < s.stride; ++column) {
      const std::uint32_t tapRows = (s.kernelHeight + s.stride - 1 - (row + s.padding) % s.stride) / s.stride;
      const std::uint32_t tapColumns = (s.kernelWidth + s.stride - 1 - (column + s.leftPadding()) % s.stride) / s.stride;
      const std::uint64_t pixels = std::uint64_t{(s.height + s.stride - 1 - row) / s.stride} * ((s.width + s.stride - 1 - column) / s.stride);
      phases.push_back({row, column, s.batch * pixels, std::uint64_t{s.outChannels} * tapRows * tapColumns});
    }
  }
  return phases;
}

std::vector<Dispatch> ConvOp::inputGradient(const BufferView& dz, const BufferView& weight, const BufferView& dx, const ConvShape& s, bool accumulate,
                                            const BufferView& workspace) const {
  const GemmChoice gemm = inputGradientGemm(s);
  const bool splitting = gemm.split.splits > 1;
  const std::uint64_t pixels = std::uint64_t{s.batch} * s.height * s.width;
  const std::size_t weightBytes = rearrangedWeightBytes(s);
  GLNET_ASSERT(workspace.room() >= weightBytes + gemm.split.workspaceBytes(pixels, s.channels),
               "the convolution's input gradient needs workspace for its weights and partial sums");
  const BufferView rearranged(*workspace.buffer, workspace.offset, weightBytes);
  const BufferView partials(*workspace.buffer, workspace.offset + weightBytes, gemm.split.workspaceBytes(pixels, s.channels));
  std::vector<Dispatch> dispatches{
      rearrangeWeights(ConvMode::weightsForInputGradient, "conv weights rearranged for dX", weight, rearranged, s)};
  // The phases write disjoint pixels of dX (and of each slice of the partial sums, laid out alike): no barrier
  // between them, so that a small layer's phases fill the GPU together.
  const std::uint64_t pixelPhases = s.stride > 1 ? (std::uint64_t{s.height} << 40 | std::uint64_t{s.width} << 16 | s.stride) : 0;
  for (const InputGradientPhase& phase : inputGradientPhases(s)) {
    // Added, a phase that no kernel offset reaches adds nothing; written, it writes its zeros (a sum of depth 0).
    if (phase.rows == 0 || (phase.depth == 0 && accumulate && !splitting)) continue;
    std::vector<ShaderDefine> defines = convGeometryDefines(s);
    defines.insert(defines.end(), {{"CONV_PHASE_ROW", std::to_string(phase.row)}, {"CONV_PHASE_COLUMN", std::to_string(phase.column)}});
    const Program& program = inputGradient_.get(*gemm.config, false, vec4Readable(rearranged.offset, s.channels), splitting, defines);
    const std::string phaseName = s.stride > 1 ? " phase " + std::to_string(phase.row) + "," + std::to_string(phase.column) : "";
    Dispatch d = dispatch(program, std::string("conv dX ") + gemm.config->name + phaseName + (splitting ? " split-K" : ""),
                          {{0, dz, Access::read}, {2, rearranged, Access::read},
                           {3, splitting ? partials : dx, splitting ? Access::write : accumulate ? Access::readWrite : Access::write,
                            RangePart{pixelPhases, phase.row * s.stride + phase.column}}},
                          s, splitting ? false : accumulate,
                          {static_cast<std::uint32_t>((phase.rows + gemm.config->tileRows - 1) / gemm.config->tileRows), gemm.groups[1],
                           gemm.groups[2]});
    d.uniforms.push_back(Uniform::u32(depthLocation, static_cast<std::uint32_t>(phase.depth)));
    // Every phase fills the same slices of the partial sums: its own sum cut into as many chunks.
    if (splitting) d.uniforms.push_back(Uniform::u32(15, static_cast<std::uint32_t>(SplitK::chunkFor(phase.depth, gemm.split.splits))));
    dispatches.push_back(std::move(d));
  }
  if (splitting) dispatches.push_back(splitSum_(partials, dx, static_cast<std::uint32_t>(pixels * s.channels), gemm.split.splits, accumulate));
  return taggedWith(gemm, std::move(dispatches));
}

std::uint64_t ConvOp::PixelWeightGradient::sharedBytes(const ConvShape& s) const {
  const std::uint64_t patch = std::uint64_t{(bandRows - 1) * s.stride + s.kernelHeight} * ((bandColumns - 1) * s.stride + s.kernelWidth);
  return sizeof(float) * channelTile * patch + 16ull * bandRows * bandColumns * (outChannelTile / 4 + 1);
}

std::optional<ConvOp::PixelWeightGradient> ConvOp::pixelWeightGradient(const ConvShape& s) {
  const std::uint32_t offsets = s.kernelHeight * s.kernelWidth;
  if (s.channels < 8 || offsets < 3 || s.kernelHeight > 3 || s.kernelWidth > 3) return std::nullopt;
  PixelWeightGradient d{};
  d.outChannelTile = s.outChannels <= 16 ? 16 : s.outChannels <= 32 ? 32 : 64;
  d.channelTile = 16;
  // Bands of about 64 pixels: whole rows where they are at most 32 pixels wide, else rows cut into even segments.
  const std::uint32_t across = (s.outWidth() + 31) / 32;
  d.bandColumns = (s.outWidth() + across - 1) / across;
  d.bandRows = std::clamp(64 / d.bandColumns, 1u, s.outHeight());
  const Limits& limits = currentLimits();
  const auto fits = [&] {
    return d.invocations() <= static_cast<std::uint64_t>(limits.maxWorkGroupInvocations) &&
           d.sharedBytes(s) <= static_cast<std::uint64_t>(limits.maxSharedMemoryBytes);
  };
  while (!fits() && d.channelTile > 4) d.channelTile /= 2;
  while (!fits() && d.bandRows > 1) d.bandRows /= 2;
  if (!fits()) return std::nullopt;
  // About 4 groups on each multiprocessor of the GPU the GEMM rule models, each slice at least 8 bands
  // (a group's stores of its partial sums cost about as much as loading a band, and every slice is read again by the
  // sum), and the partial sums within 64 MiB.
  const std::uint64_t tiles = std::uint64_t{(s.outChannels + d.outChannelTile - 1) / d.outChannelTile} *
                              ((s.channels + d.channelTile - 1) / d.channelTile);
  const std::uint64_t bands = std::uint64_t{s.batch} * ((s.outHeight() + d.bandRows - 1) / d.bandRows) * across;
  const std::uint64_t wantedGroups = 4 * modelledMultiprocessors;
  const std::uint64_t sliceBytes = PixelWeightGradient::workspaceBytes(s, 1);
  const std::uint64_t splits = std::max<std::uint64_t>(
      1, std::min({(wantedGroups + tiles - 1) / tiles, (bands + 7) / 8, (std::uint64_t{64} << 20) / sliceBytes}));
  d.bandsPerSlice = static_cast<std::uint32_t>((bands + splits - 1) / splits);
  d.splits = static_cast<std::uint32_t>((bands + d.bandsPerSlice - 1) / d.bandsPerSlice);
  return d;
}

std::vector<Dispatch> ConvOp::weightGradientFromPixels(const PixelWeightGradient& d, const BufferView& dz, const BufferView& x,
                                                   const BufferView& dw, const ConvShape& s, bool accumulate,
                                                   const BufferView& workspace, const std::optional<BufferView>& db) const {
  std::vector<ShaderDefine> defines = convGeometryDefines(s);
  defines.insert(defines.end(), {{"OC_TILE", std::to_string(d.outChannelTile)},
                                 {"C_TILE", std::to_string(d.channelTile)},
                                 {"BAND_ROWS", std::to_string(d.bandRows)},
                                 {"BAND_COLUMNS", std::to_string(d.bandColumns)},
                                 {"INVOCATIONS", std::to_string(d.invocations())}});
  if (db) defines.push_back({"WITH_BIAS", "1"});
  Dispatch partial;
  partial.program = &programs_->get("ConvWeightGradient.glsl", defines, geometryIncluded());
  partial.label = std::string(db ? "conv dW+db" : "conv dW") + " from pixels";
  partial.buffers = {{0, dz, Access::read}, {1, x, Access::read}, {2, workspace, Access::write}};
  partial.uniforms = {Uniform::u32(0, s.batch), Uniform::u32(15, d.bandsPerSlice)};
  partial.groups = {(s.outChannels + d.outChannelTile - 1) / d.outChannelTile, (s.channels + d.channelTile - 1) / d.channelTile, d.splits};
  const auto count = static_cast<std::uint32_t>(std::uint64_t{s.outChannels} * s.channels * s.kernelHeight * s.kernelWidth);
  if (db) return {partial, splitSum_(workspace, dw, count, *db, s.outChannels, d.splits, accumulate)};
  return {partial, splitSum_(workspace, dw, count, d.splits, accumulate)};
}

std::vector<Dispatch> ConvOp::weightGradient(const BufferView& dz, const BufferView& x, const BufferView& dw, const ConvShape& s, bool accumulate,
                                             const std::optional<BufferView>& workspace, const std::optional<BufferView>& db) const {
  if (const std::optional<PixelWeightGradient> tiles = pixelWeightGradient(s); tiles && workspace) {
    GLNET_ASSERT(workspace->room() >= PixelWeightGradient::workspaceBytes(s, tiles->splits), "dW's partial sums need their workspace");
    return weightGradientFromPixels(*tiles, dz, x, dw, s, accumulate, *workspace, db);
  }
  const std::uint64_t columns = std::uint64_t{s.channels} * s.kernelHeight * s.kernelWidth;
  const std::uint64_t depth = std::uint64_t{s.batch} * s.outHeight() * s.outWidth();
  const bool splittable = workspace.has_value();
  const std::uint64_t pixels = std::uint64_t{s.outHeight()} * s.outWidth();
  const bool vec4A = vec4Readable(dz.offset, pixels);
  if (db) {
    const GemmChoice gemm = chooseGemm(s.outChannels, columns + 1, depth, splittable, GemmOperand::gathered);
    if (gemm.split.splits > 1) {
      const Program& program = weightAndBiasGradient_.get(*gemm.config, vec4A, false, true, weightGradientDefines(s, *gemm.config));
      Dispatch partial = dispatch(program, std::string("conv dW+db ") + gemm.config->name + " split-K",
                                  {{0, dz, Access::read}, {2, x, Access::read}, {3, *workspace, Access::write}},
                                  s, false, gemm.groups);
      partial.uniforms.push_back(Uniform::u32(15, gemm.split.chunk));
      return taggedWith(gemm, {partial, splitSum_(*workspace, dw, static_cast<std::uint32_t>(s.outChannels * columns), *db,
                                                  s.outChannels, gemm.split.splits, accumulate)});
    }
  }
  const GemmChoice gemm = chooseGemm(s.outChannels, columns, depth, splittable, GemmOperand::gathered);
  const bool splitting = gemm.split.splits > 1;
  const Program& program = weightGradient_.get(*gemm.config, vec4A, false, splitting, weightGradientDefines(s, *gemm.config));
  const std::string label = std::string("conv dW ") + gemm.config->name;
  std::vector<Dispatch> dispatches;
  if (!splitting) {
    dispatches.push_back(dispatch(program, label,
                                  {{0, dz, Access::read}, {2, x, Access::read}, {3, dw, accumulate ? Access::readWrite : Access::write}},
                                  s, accumulate, gemm.groups));
  } else {
    Dispatch partial = dispatch(program, label + " split-K",
                                {{0, dz, Access::read}, {2, x, Access::read}, {3, *workspace, Access::write}},
                                s, false, gemm.groups);
    partial.uniforms.push_back(Uniform::u32(15, gemm.split.chunk));
    dispatches.push_back(partial);
    dispatches.push_back(splitSum_(*workspace, dw, static_cast<std::uint32_t>(s.outChannels * columns), gemm.split.splits, accumulate));
  }
  dispatches = taggedWith(gemm, std::move(dispatches));
  if (db) dispatches.push_back(biasGradient(dz, *db, s, accumulate));
  return dispatches;
}

std::optional<Dispatch> ConvOp::activationGradientInPlace(const BufferView& dy, const BufferView& y, const ConvShape& s) const {
  if (activation_ == Activation::none) return std::nullopt;
  const Program& program =
      programs_->get("Conv2D.glsl", convDefines(activation_, ConvMode::outputGradient, convGeometryDefines(s)), geometryIncluded());
  Dispatch d = dispatch(program, std::string("conv ") + activationName(activation_) + " gradient, in place",
                        {{1, y, Access::read}, {3, dy, Access::readWrite}}, s, false, {});
  d.invocations = std::uint64_t{s.batch} * s.outChannels * s.outHeight() * s.outWidth();
  d.linear = true;
  return d;
}

Dispatch ConvOp::biasGradient(const BufferView& dz, const BufferView& db, const ConvShape& s, bool accumulate) const {
  return dispatch(programs_->get("Conv2D.glsl", convDefines(Activation::none, ConvMode::biasGradient, convGeometryDefines(s)), geometryIncluded()),
                  "conv db",
                  {{0, dz, Access::read}, {2, dz, Access::read}, {3, db, accumulate ? Access::readWrite : Access::write}}, s,
                  accumulate, {s.outChannels, 1, 1});
}

MaxPoolOp::MaxPoolOp(ProgramCache& programs)
    : forward_(programs.get("MaxPool.glsl", {kindDefine(MaxPoolMode::forward)})), backward_(programs.get("MaxPool.glsl", {kindDefine(MaxPoolMode::backward)})) {}

Dispatch MaxPoolOp::forward(const BufferView& x, const BufferView& y, const BufferView& argmax, std::uint32_t planes,
                            std::uint32_t height, std::uint32_t width) const {
  Dispatch d;
  d.program = &forward_;
  d.label = "max pool";
  d.buffers = {{0, x, Access::read}, {1, y, Access::write}, {2, argmax, Access::write}};
  d.uniforms = {Uniform::u32(0, planes), Uniform::u32(1, height), Uniform::u32(2, width), Uniform::u32(3, height / 2),
                Uniform::u32(4, width / 2), Uniform::u32(5, 0)};
  d.invocations = std::uint64_t{planes} * (height / 2) * (width / 2);
  d.linear = true;
  return d;
}

Dispatch MaxPoolOp::backward(const BufferView& dy, const BufferView& argmax, const BufferView& dx, std::uint32_t planes,
                             std::uint32_t height, std::uint32_t width, bool accumulate) const {
  Dispatch d;
  d.program = &backward_;
  d.label = "max pool gradient";
  d.buffers = {{0, dy, Access::read}, {2, argmax, Access::read}, {3, dx, accumulate ? Access::readWrite : Access::write}};
  d.uniforms = {Uniform::u32(0, planes), Uniform::u32(1, height), Uniform::u32(2, width), Uniform::u32(3, height / 2),
                Uniform::u32(4, width / 2), Uniform::u32(5, accumulate ? 1u : 0u)};
  d.invocations = std::uint64_t{planes} * height * width;
  d.linear = true;
  return d;
}

}  // namespace glnet
