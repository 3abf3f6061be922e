#include "decoder/DecoderState.h"

#include "base/check.h"
#include "base/ExactInteger.h"
#include "base/log.h"
#include "graph/Ops.h"
#include "ops/Pointwise.h"

#include <algorithm>
#include <cmath>

namespace glnet {

bool sameSampling(const SamplingSettings& a, const SamplingSettings& b) {
  return a.temperature == b.temperature && a.topK == b.topK && a.topP == b.topP && a.seed == b.seed;
}

namespace {

std::uint32_t contextOf(const DecoderConfig& config, std::uint32_t positions) {
  return positions ? positions : std::min(config.maxPositions, Decoder::defaultContextLimit);
}

// Each sequence's cache begins on a multiple of 64 positions' bytes, so that a prompt's pass binds its sequence's cache
// at an offset every device accepts (GL's storage offset alignment is at most 256 bytes).
CacheShape cacheShapeOf(const DecoderConfig& config, std::uint32_t contextPositions) {
  return {config.heads, config.kvHeads, config.headDim, (contextPositions + 63) / 64 * 64};
}

// The most sequences whose caches a decode step binds at once (one buffer per layer, indexed by uint) and whose rows
// one Gemv dispatch takes.
std::uint32_t sequencesFitting(const Limits& limits, const CacheShape& cache) {
  const std::uint64_t bytes = floatBytes(cache.layerFloats());
  const std::uint64_t byBinding = static_cast<std::uint64_t>(limits.maxStorageBlockBytes) / bytes;
  const std::uint64_t byIndex = (std::uint64_t{1} << 32) / cache.layerFloats();
  return static_cast<std::uint32_t>(std::min<std::uint64_t>({Decoder::largestBatch, gemvRowLimit(), byBinding, byIndex}));
}

}  // namespace

std::uint32_t Decoder::sequencesThatFit(const Limits& limits, const DecoderConfig& config, std::uint32_t contextPositions) {
  return sequencesFitting(limits, cacheShapeOf(config, contextOf(config, contextPositions)));
}

Decoder::State::State(const Context& context, DecoderConfig given, std::uint32_t positions, WeightStorage weights, std::uint32_t count)
    : context(context), config(std::move(given)), sequenceCount(count), storage(weights), llama(config.family == DecoderFamily::llama) {
  contextPositions = contextOf(config, positions);
  if (contextPositions > largestContext) {
    throw Error("a context of " + std::to_string(contextPositions) + " positions is more than glnet's " + std::to_string(largestContext) +
                " (" + optionName("max-context") + ")");
  }
  if (config.vocabulary > largestExactInteger) {
    throw Error("a vocabulary of " + std::to_string(config.vocabulary) + " tokens is more than the " + std::to_string(largestExactInteger) +
                " ids glnet holds exactly as floats");
  }
  if (!llama && contextPositions > config.maxPositions) {
    throw Error("a context of " + std::to_string(contextPositions) + " positions is more than this GPT-2 model's " +
                std::to_string(config.maxPositions) + " learned positions");
  }
  if (count == 0 || count > largestBatch) {
    throw UsageError("a decoder takes 1 to " + std::to_string(largestBatch) + " sequences at once, not " + std::to_string(count));
  }
  cache = cacheShapeOf(config, contextPositions);
  const std::uint32_t fitting = sequencesFitting(context.limits(), cache);
  if (count > fitting) {
    const std::string each = "a KV cache of " + std::to_string(contextPositions) + " positions (" +
                             std::to_string(floatBytes(cache.layerFloats()) >> 20) + " MiB per layer)";
    throw DeviceLimitError(fitting == 0 ? "this device cannot bind " + each + ": lower " + optionName("max-context")
                                        : "this device decodes at most " + std::to_string(fitting) + " sequences of " + each +
                                              " at once, not " + std::to_string(count) + ": lower " + optionName("max-batch") + " or " +
                                              optionName("max-context"));
  }
  sequences.resize(count);
}

void Decoder::State::apply(Plan& plan, const Op& op, const std::vector<GpuTensor>& in, const BufferView& out, const Buffer& scratch) {
  std::vector<Shape> shapes;
  for (const GpuTensor& tensor : in) shapes.push_back(tensor.shape);
  GpuTensor output{out, op.outputShape(shapes)};
  if (op.workspaceBytes(shapes) > 0) output.workspace = BufferView(scratch, 0, op.workspaceBytes(shapes));
  op.forward(programs, plan, in, output);
}

// `stepPass`: a decode step's Gemv reads the norm and the gate of one row as it reads x, so one sequence needs neither
// buffer.
DecoderPassBuffers Decoder::State::passBuffers(std::uint32_t rows, std::uint32_t logitRows, bool stepPass) const {
  const std::size_t hidden = config.hidden, inner = config.intermediate;
  DecoderPassBuffers b;
  b.ids = Buffer(floatBytes(rows));
  b.x = Buffer(floatBytes(rows * hidden));
  b.xAlternate = Buffer(floatBytes(rows * hidden));
  if (!stepPass || rows > 1) b.normed = Buffer(floatBytes(rows * hidden));
  b.qkv = Buffer(floatBytes(std::size_t{rows} * cache.qkvWidth()));
  b.attention = Buffer(floatBytes(std::size_t{rows} * config.heads * config.headDim));
  b.hidden = Buffer(floatBytes(rows * inner * (llama ? 2 : 1)));
  if (llama && (!stepPass || rows > 1)) b.gated = Buffer(floatBytes(rows * inner));
  b.logits = Buffer(floatBytes(std::size_t{logitRows} * config.vocabulary));
  return b;
}

Decoder::State::Ops Decoder::State::ops() const {
  const auto epsilon = static_cast<float>(config.normEpsilon);
  return {llama ? axisOp(AxisKind::rmsNormalization, 1, 2, true, epsilon) : axisOp(AxisKind::layerNormalization, 1, 2, true, epsilon),
          denseOp(Activation::none), denseOp(Activation::none, Pointwise{PointwiseKind::geluTanh}), denseResidualOp()};
}

std::vector<GpuTensor> Decoder::State::normInputs(const BufferView& x, std::uint32_t rows, const Buffer& gamma, const Buffer& beta) const {
  const Shape row{config.hidden};
  std::vector<GpuTensor> in{{x, {rows, config.hidden}}, {gamma, row}};
  if (!llama) in.push_back({beta, row});
  return in;
}

BufferView Decoder::State::cacheOf(const DecoderLayerBuffers& layer, std::uint32_t sequence) const {
  const std::size_t bytes = floatBytes(cache.layerFloats());
  GLNET_ASSERT(bytes * sequence % static_cast<std::size_t>(std::max(1, context.limits().storageBufferOffsetAlignment)) == 0,
               "a sequence's cache starts at an aligned offset");
  return BufferView(layer.cache, bytes * sequence, bytes);
}

namespace {

// Records a pass over `rows` rows of one sequence whose ids are in b.ids, from position 0, into `caches` (one per
// layer); `attend` records each layer's attention from b.qkv and the layer's cache into b.attention. The logits of the
// last `logitRows` rows.
template <class Attend>
void recordPromptPass(Decoder::State& s, Plan& plan, DecoderPassBuffers& b, std::uint32_t rows, std::uint32_t logitRows,
                      const std::vector<BufferView>& caches, const Attend& attend) {
  const Decoder::State::Ops o = s.ops();
  const DecoderConfig& config = s.config;
  const bool llama = s.llama;
  const std::uint32_t hidden = config.hidden, inner = config.intermediate, width = s.cache.qkvWidth();
  const std::uint32_t attentionWidth = config.heads * config.headDim;
  const Shape rowsByHidden{rows, hidden};
  // Scratch: the largest workspace any op of the pass asks for.
  std::size_t scratch = 0;
  const auto need = [&](const Op& op, const std::vector<Shape>& shapes) { scratch = std::max(scratch, op.workspaceBytes(shapes)); };
  need(*o.projection, {rowsByHidden, {width, hidden}, {width}});
  need(*o.residual, {{rows, attentionWidth}, {hidden, attentionWidth}, {hidden}, rowsByHidden});
  need(llama ? *o.projection : *o.projectionGelu, {rowsByHidden, {inner * (llama ? 2 : 1), hidden}, {inner * (llama ? 2 : 1)}});
  need(*o.residual, {{rows, inner}, {hidden, inner}, {hidden}, rowsByHidden});
  need(*o.projection, {{logitRows, hidden}, {config.vocabulary, hidden}, {config.vocabulary}});
  scratch = std::max(scratch, attend.scratchBytes());
  b.scratch = Buffer(std::max<std::size_t>(scratch, sizeof(float)));

  const RowPositions fromStart;
  plan.record(tokenEmbedding(s.programs, b.ids, s.tokenTable, s.positionTable, llama ? 0 : config.maxPositions, b.x, rows, hidden,
                             config.vocabulary, fromStart));
  for (std::size_t l = 0; l < s.layers.size(); ++l) {
    DecoderLayerBuffers& layer = s.layers[l];
    s.apply(plan, *o.norm, s.normInputs(b.x, rows, layer.attentionNorm, layer.attentionNormBias), b.normed, b.scratch);
    s.apply(plan, *o.projection, {{b.normed, rowsByHidden}, {layer.qkv.full, {width, hidden}}, {layer.qkvBias, {width}}}, b.qkv, b.scratch);
    plan.record(appendToCache(s.programs, b.qkv, caches[l], llama, s.cosines, s.sines, s.cache, rows, fromStart));
    attend(plan, b, caches[l]);
    s.apply(plan, *o.residual,
            {{b.attention, {rows, attentionWidth}}, {layer.output.full, {hidden, attentionWidth}}, {layer.outputBias, {hidden}}, {b.x, rowsByHidden}},
            b.xAlternate, b.scratch);
    s.apply(plan, *o.norm, s.normInputs(b.xAlternate, rows, layer.mlpNorm, layer.mlpNormBias), b.normed, b.scratch);
    const std::uint32_t upRows = inner * (llama ? 2 : 1);
    s.apply(plan, llama ? *o.projection : *o.projectionGelu, {{b.normed, rowsByHidden}, {layer.up.full, {upRows, hidden}}, {layer.upBias, {upRows}}},
            b.hidden, b.scratch);
    if (llama) plan.record(swiGlu(s.programs, b.hidden, b.gated, rows, inner));
    s.apply(plan, *o.residual,
            {{llama ? b.gated : b.hidden, {rows, inner}}, {layer.down.full, {hidden, inner}}, {layer.downBias, {hidden}}, {b.xAlternate, rowsByHidden}},
            b.x, b.scratch);
  }
  // The final norm and the head on the last row only where that is all generation needs (a prompt's last row, copied
  // to the start of a buffer: a binding's offset must be aligned, a row's need not be).
  BufferView last = b.x;
  if (logitRows < rows) {
    GLNET_ASSERT(logitRows == 1, "a pass keeps the logits of every row or of its last");
    last = BufferView(b.xAlternate, 0, floatBytes(hidden));
    s.apply(plan, *sliceOp({rows - 1, 0}, {1, 1}, {1, hidden}), {{b.x, rowsByHidden}}, last, b.scratch);
  }
  const BufferView lastNormed(b.normed, 0, floatBytes(std::size_t{logitRows} * hidden));
  s.apply(plan, *o.norm, s.normInputs(last, logitRows, s.finalNorm, s.finalNormBias), lastNormed, b.scratch);
  s.apply(plan, *o.projection,
          {{lastNormed, {logitRows, hidden}}, {config.tiedEmbeddings ? s.tokenTable : s.lmHead.full, {config.vocabulary, hidden}},
           {BufferView(s.zeros, 0, floatBytes(config.vocabulary)), {config.vocabulary}}},
          b.logits, b.scratch);
}

// A prompt's causal attention over its sequence's cache's first `rows` positions: the fused kernel reading Q from the
// fused projection and K and V from the cache in place.
struct PromptAttention {
  Decoder::State& state;
  std::uint32_t rows;
  std::shared_ptr<const Op> op;
  PromptAttention(Decoder::State& s, std::uint32_t rows) : state(s), rows(rows) {
    const CacheShape& c = s.cache;
    AttentionSettings settings;
    settings.scale = static_cast<float>(1 / std::sqrt(static_cast<double>(c.headSize)));
    settings.causal = true;
    settings.queryView = AttentionSettings::View{{1, c.heads, rows, c.headSize}, {rows * c.qkvWidth(), c.headSize, c.qkvWidth(), 1}, 0};
    const auto perHead = c.context * c.headSize;
    settings.keyView = AttentionSettings::View{{1, c.kvHeads, rows, c.headSize}, {c.kvHeads * perHead, perHead, c.headSize, 1}, 0};
    settings.valueView = AttentionSettings::View{{1, c.kvHeads, rows, c.headSize}, {c.kvHeads * perHead, perHead, c.headSize, 1}, c.kvHeads * perHead};
    settings.output = AttentionSettings::sequenceBeforeHeads;
    op = attentionOp(settings);
  }
  std::vector<Shape> shapes() const {
    const Shape cacheShape{static_cast<std::uint32_t>(state.cache.layerFloats())};
    return {{rows * state.cache.qkvWidth()}, cacheShape, cacheShape};
  }
  std::size_t scratchBytes() const { return op->workspaceBytes(shapes()); }
  void operator()(Plan& plan, DecoderPassBuffers& b, const BufferView& layerCache) const {
    const std::vector<Shape> s = shapes();
    state.apply(plan, *op, {{b.qkv, s[0]}, {layerCache, s[1]}, {layerCache, s[2]}}, b.attention, b.scratch);
  }
};

}  // namespace

void Decoder::State::buildPrefill(std::uint32_t rows, bool allLogits, std::uint32_t sequence, const SamplingSettings& sampling) {
  prefill = Prefill{};
  const std::uint32_t logitRows = allLogits ? rows : 1;
  prefill.buffers = passBuffers(rows, logitRows);
  Plan plan(context.limits());
  const int draw = plan.addParameter();
  std::vector<BufferView> caches;
  for (const DecoderLayerBuffers& layer : layers) caches.push_back(cacheOf(layer, sequence));
  recordPromptPass(*this, plan, prefill.buffers, rows, logitRows, caches, PromptAttention(*this, rows));
  if (!allLogits) recordChoice(plan, prefill.buffers.logits, 0, sequence, sampling, draw);
  prefill.rows = rows;
  prefill.sequence = sequence;
  prefill.allLogits = allLogits;
  prefill.sampling = sampling;
  prefill.plan = std::move(plan);
}

void Decoder::State::recordChoice(Plan& plan, const Buffer& logits, std::uint32_t logitsRow, std::uint32_t row, const SamplingSettings& sampling,
                                  int drawParameter, std::uint32_t rows) {
  NextTokenShape shape;
  shape.rows = rows;
  shape.vocabulary = config.vocabulary;
  shape.logitsOffset = logitsRow * config.vocabulary;
  shape.idsOffset = row;
  shape.floatOffset = row;
  const NextTokenOp choose(programs);
  // Each row its own part of the workspace.
  const std::size_t part = chooserScratch.bytes() / sequenceCount;
  GLNET_ASSERT(part >= choose.workspaceBytes(NextTokenShape{1, config.vocabulary}), "the chooser's workspace holds one row of logits per sequence");
  plan.record(choose(logits, chosen, step.ids, BufferView(chooserScratch, part * row, part * rows), shape, sampling,
                     Uniform::fromParameter(NextTokenOp::stepLocation, drawParameter)));
}

std::uint32_t Decoder::State::readChosen(std::uint32_t sequence) {
  std::uint32_t id = 0;
  chosen.download(&id, sizeof id, sizeof id * sequence);
  return id;
}

void Decoder::State::checkIds(const std::vector<std::uint32_t>& ids) const {
  if (ids.empty()) throw Error("the prompt holds no token");
  if (ids.size() > contextPositions) {
    throw Error("the prompt's " + std::to_string(ids.size()) + " tokens do not fit the context of " + std::to_string(contextPositions) +
                " positions (--max-context)");
  }
  for (const std::uint32_t id : ids) {
    if (id >= config.vocabulary) throw Error("token id " + std::to_string(id) + " is outside the model's vocabulary of " + std::to_string(config.vocabulary));
  }
}

void Decoder::State::checkSequence(std::uint32_t sequence) const {
  if (sequence >= sequenceCount) {
    throw Error("sequence " + std::to_string(sequence) + " is not one of the decoder's " + std::to_string(sequenceCount));
  }
}

void Decoder::State::runPrompt(const std::vector<std::uint32_t>& ids, bool allLogits, std::uint32_t sequence, const SamplingSettings& sampling) {
  checkIds(ids);
  const auto rows = static_cast<std::uint32_t>(ids.size());
  if (!prefill.plan || prefill.rows != rows || prefill.allLogits != allLogits || prefill.sequence != sequence ||
      !sameSampling(prefill.sampling, sampling)) {
    prefill.plan.reset();  // a recording that fails leaves no plan bound to buffers it replaced
    buildPrefill(rows, allLogits, sequence, sampling);
  }
  prefill.buffers.ids.upload(std::vector<float>(ids.begin(), ids.end()));
  Sequence& s = sequences[sequence];
  s.draws = 0;
  if (!allLogits) prefill.plan->setParameter(0, ++s.draws);
  prefill.plan->run();
  s.position = rows;
}

Decoder::Decoder(const Context& context, DecoderConfig config, const DecoderWeights& weights, std::uint32_t contextPositions,
                 WeightStorage storage, std::uint32_t sequences)
    : state_(std::make_unique<State>(context, std::move(config), contextPositions, storage, sequences)) {
  State& s = *state_;
  s.uploadWeights(weights);
  s.step = s.passBuffers(sequences, sequences, true);
  s.step.scratch = Buffer(std::max(DecodeAttention::workspaceBytes(s.cache, sequences), sizeof(float)));
  s.positions = Buffer(sequences * sizeof(std::uint32_t));
  s.chosen = Buffer(sequences * sizeof(std::uint32_t));
  NextTokenShape oneRow;
  oneRow.vocabulary = s.config.vocabulary;
  // Rows' parts of the workspace start at aligned offsets.
  const auto alignment = static_cast<std::size_t>(std::max(4, context.limits().storageBufferOffsetAlignment));
  const std::size_t part = (NextTokenOp(s.programs).workspaceBytes(oneRow) + alignment - 1) / alignment * alignment;
  s.chooserScratch = Buffer(part * sequences);
  const DecoderConfig& c = s.config;
  log::info("decoder: " + c.architecture + ", " + std::to_string(c.layers) + " layers, " + std::to_string(s.gpuWeightBytes >> 20) +
            " MiB of weights on the GPU (" + kindName(storage) + " for the decode step: " + std::to_string(s.stepWeightBytes >> 20) +
            " MiB read per token), a cache of " + std::to_string(s.contextPositions) + " positions" +
            (sequences > 1 ? " for each of " + std::to_string(sequences) + " sequences" : "") + " (" +
            std::to_string((s.cache.layerFloats() * sequences * c.layers * sizeof(float)) >> 20) + " MiB)");
}

Decoder::~Decoder() = default;
Decoder::Decoder(Decoder&&) noexcept = default;

const DecoderConfig& Decoder::config() const { return state_->config; }
std::uint32_t Decoder::context() const { return state_->contextPositions; }
std::uint32_t Decoder::sequences() const { return state_->sequenceCount; }
std::uint32_t Decoder::position(std::uint32_t sequence) const {
  state_->checkSequence(sequence);
  return state_->sequences[sequence].position;
}
std::size_t Decoder::weightBytes() const { return state_->stepWeightBytes; }
WeightStorage Decoder::weightStorage() const { return state_->storage; }

std::vector<float> Decoder::logits(const std::vector<std::uint32_t>& ids) {
  State& s = *state_;
  s.sequences[0].decoding = false;  // the cache holds these ids now, with no chosen token to feed
  s.runPrompt(ids, true, 0, SamplingSettings{});
  std::vector<float> values(ids.size() * std::size_t{s.config.vocabulary});
  s.prefill.plan->read(s.prefill.buffers.logits, values.data(), floatBytes(values.size()));
  return values;
}

std::uint32_t Decoder::start(const std::vector<std::uint32_t>& prompt, const SamplingSettings& sampling, std::uint32_t sequence) {
  State& s = *state_;
  s.checkSequence(sequence);
  sampling.check();
  State::Sequence& started = s.sequences[sequence];
  started.decoding = false;
  s.runPrompt(prompt, false, sequence, sampling);
  const std::uint32_t token = s.readChosen(sequence);
  if (token >= s.config.vocabulary) {
    throw Error("the model's logits after the prompt hold a NaN (or, sampling, an infinity): no token can be chosen");
  }
  started.sampling = sampling;
  started.decoding = true;
  return token;
}

void Decoder::end(std::uint32_t sequence) {
  state_->checkSequence(sequence);
  state_->sequences[sequence].decoding = false;
}

std::vector<std::uint32_t> Decoder::step() { return state_->runStep(nullptr); }

namespace {

std::uint32_t onlyFirst(const Decoder& decoder, const std::vector<std::uint32_t>& ids) {
  if (ids[0] >= decoder.config().vocabulary) {
    throw Error("the model's logits at position " + std::to_string(decoder.position() - 1) +
                " hold a NaN (or, sampling, an infinity): no token can be chosen");
  }
  return ids[0];
}

}  // namespace

std::uint32_t Decoder::next() {
  state_->checkOnlyFirst();
  return onlyFirst(*this, state_->runStep(nullptr));
}

std::uint32_t Decoder::profiledNext(std::vector<std::pair<std::string, double>>& dispatchMilliseconds) {
  state_->checkOnlyFirst();
  return onlyFirst(*this, state_->runStep(&dispatchMilliseconds));
}

std::size_t Decoder::stepDispatches() const { return state_->lastStep ? state_->lastStep->dispatchCount() : 0; }
std::size_t Decoder::stepBarriers() const { return state_->lastStep ? state_->lastStep->barrierCount() : 0; }

}  // namespace glnet
