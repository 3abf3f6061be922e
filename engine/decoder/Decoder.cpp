#include "decoder/Decoder.h"

#include "base/check.h"
#include "base/ExactInteger.h"
#include "base/log.h"
#include "graph/InferenceOps.h"
#include "graph/Ops.h"
#include "ops/Pointwise.h"
#include "plan/ProgramCache.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace glnet {
namespace {

std::size_t floatBytes(std::size_t count) { return count * sizeof(float); }

// Rows of the same width one after another (Q, K and V projections as one [H·D + 2·Hkv·D, hidden] weight; biases
// alike), zeros where a part is absent (a model without that bias).
std::vector<float> stacked(const std::vector<std::pair<const HostTensor*, std::size_t>>& parts) {
  std::vector<float> all;
  for (const auto& [tensor, count] : parts) {
    if (tensor->values.empty()) {
      all.insert(all.end(), count, 0.0f);
    } else {
      GLNET_ASSERT(tensor->values.size() == count, "a decoder weight's size was checked against its config");
      all.insert(all.end(), tensor->values.begin(), tensor->values.end());
    }
  }
  return all;
}

// Rotary angles' cosines and sines [context, D/2], computed in float64 from the config's inverse frequencies.
std::pair<std::vector<float>, std::vector<float>> rotaryTables(const DecoderConfig& config, std::uint32_t context) {
  const std::vector<double> frequencies = ropeInverseFrequencies(config);
  const std::size_t half = frequencies.size();
  std::vector<float> cosines(context * half), sines(cosines.size());
  for (std::uint32_t position = 0; position < context; ++position) {
    for (std::size_t i = 0; i < half; ++i) {
      const double angle = position * frequencies[i];
      cosines[position * half + i] = static_cast<float>(std::cos(angle));
      sines[position * half + i] = static_cast<float>(std::sin(angle));
    }
  }
  return {std::move(cosines), std::move(sines)};
}

bool sameSampling(const SamplingSettings& a, const SamplingSettings& b) {
  return a.temperature == b.temperature && a.topK == b.topK && a.topP == b.topP && a.seed == b.seed;
}

// A dense layer's weight: float32 for the prompt's pass (the GEMM of graph/), and packed 16-bit for the decode step when
// the storage is fp16 or bf16 (half the bytes a step reads).
struct Matrix {
  Buffer full, packed;
  const Buffer& forStep() const { return packed.bytes() ? packed : full; }
};

struct LayerBuffers {
  Buffer attentionNorm, attentionNormBias, qkvBias, outputBias, mlpNorm, mlpNormBias, upBias, downBias, cache;
  Matrix qkv, output, up, down;
};

// The activations of one pass of `rows` rows.
struct PassBuffers {
  Buffer ids, x, xAlternate, normed, qkv, attention, hidden, gated, logits, scratch;
};

}  // namespace

struct Decoder::State {
  const Context& context;
  DecoderConfig config;
  std::uint32_t contextPositions;
  CacheShape cache;
  ProgramCache programs;
  Buffer tokenTable, positionTable, finalNorm, finalNormBias, cosines, sines, zeros;
  Matrix lmHead;  // the token table's packed copy when the embeddings are tied and the storage 16-bit
  std::vector<LayerBuffers> layers;
  WeightStorage storage;
  std::size_t gpuWeightBytes = 0;   // every weight buffer
  std::size_t stepWeightBytes = 0;  // what a decode step reads
  std::uint32_t position = 0;
  bool llama;

  // The prefill of the last prompt length (and whether it keeps every row's logits), and the decode step.
  struct Prefill {
    std::uint32_t rows = 0;
    bool allLogits = false;
    PassBuffers buffers;
    std::optional<Plan> plan;
  };
  Prefill prefill;
  PassBuffers step;
  std::optional<Plan> shortStep, longStep;  // see buildStep
  int positionParameter = -1, keysParameter = -1, splitsParameter = -1, drawParameter = -1;
  Buffer chosen;  // the chosen token's id (uint32) for the host
  Buffer chooserScratch;
  SamplingSettings sampling;
  std::uint32_t draws = 0;
  bool decoding = false;  // start() chose a token that next() may feed

  State(const Context& context, DecoderConfig given, std::uint32_t positions, WeightStorage weights)
      : context(context), config(std::move(given)), storage(weights), llama(config.family == DecoderFamily::llama) {
    contextPositions = positions ? positions : std::min(config.maxPositions, defaultContextLimit);
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
    cache = {config.heads, config.kvHeads, config.headDim, contextPositions};
  }

  // A norm's or bias's values, which both passes read as float32.
  Buffer upload(const std::vector<float>& values) {
    gpuWeightBytes += floatBytes(values.size());
    stepWeightBytes += floatBytes(values.size());
    return Buffer::of(values);
  }
  Buffer upload(const HostTensor& tensor) { return upload(tensor.values); }
  Matrix uploadMatrix(const std::vector<float>& values, bool prefillReads = true) {
    Matrix matrix;
    if (prefillReads || storage == WeightStorage::fp32) {
      matrix.full = Buffer::of(values);
      gpuWeightBytes += floatBytes(values.size());
    }
    if (storage != WeightStorage::fp32) {
      matrix.packed = Buffer::of(packWeights(values, storage));
      gpuWeightBytes += matrix.packed.bytes();
    }
    stepWeightBytes += matrix.forStep().bytes();
    return matrix;
  }

  // The op's output written into `out`, its inputs `in`; its scratch from `scratch`.
  void apply(Plan& plan, const Op& op, const std::vector<GpuTensor>& in, const BufferView& out, const Buffer& scratch) {
    std::vector<Shape> shapes;
    for (const GpuTensor& tensor : in) shapes.push_back(tensor.shape);
    GpuTensor output{out, op.outputShape(shapes)};
    if (op.workspaceBytes(shapes) > 0) output.workspace = BufferView(scratch, 0, op.workspaceBytes(shapes));
    op.forward(programs, plan, in, output);
  }

  // `stepPass`: the decode step's Gemv reads its norm and gate as it reads x, so it needs neither buffer.
  PassBuffers passBuffers(std::uint32_t rows, std::uint32_t logitRows, bool stepPass = false) const {
    const std::size_t hidden = config.hidden, inner = config.intermediate;
    PassBuffers b;
    b.ids = Buffer(floatBytes(rows));
    b.x = Buffer(floatBytes(rows * hidden));
    b.xAlternate = Buffer(floatBytes(rows * hidden));
    if (!stepPass) b.normed = Buffer(floatBytes(rows * hidden));
    b.qkv = Buffer(floatBytes(std::size_t{rows} * cache.qkvWidth()));
    b.attention = Buffer(floatBytes(std::size_t{rows} * config.heads * config.headDim));
    b.hidden = Buffer(floatBytes(rows * inner * (llama ? 2 : 1)));
    if (llama && !stepPass) b.gated = Buffer(floatBytes(rows * inner));
    b.logits = Buffer(floatBytes(std::size_t{logitRows} * config.vocabulary));
    return b;
  }

  // The ops of one pass, in order; `attention` records the layer's attention (prefill: fused causal attention over the
  // prompt; decode: over the cache).
  struct Ops {
    std::shared_ptr<const Op> norm, projection, projectionGelu, residual;
  };
  Ops ops() const {
    const auto epsilon = static_cast<float>(config.normEpsilon);
    return {llama ? axisOp(AxisKind::rmsNormalization, 1, 2, true, epsilon) : axisOp(AxisKind::layerNormalization, 1, 2, true, epsilon),
            denseOp(Activation::none), denseOp(Activation::none, Pointwise{PointwiseKind::geluTanh}), denseResidualOp()};
  }

  std::vector<GpuTensor> normInputs(const BufferView& x, std::uint32_t rows, const Buffer& gamma, const Buffer& beta) const {
    const Shape row{config.hidden};
    std::vector<GpuTensor> in{{x, {rows, config.hidden}}, {gamma, row}};
    if (!llama) in.push_back({beta, row});
    return in;
  }

  // Records a pass over `rows` rows whose ids are in b.ids, at positions from `firstPosition`; `attend` records each
  // layer's attention from b.qkv and the layer's cache into b.attention. The logits of the last `logitRows` rows.
  template <class Attend>
  void recordPass(Plan& plan, PassBuffers& b, std::uint32_t rows, std::uint32_t logitRows, const Uniform& firstPosition, const Attend& attend) {
    const Ops o = ops();
    const std::uint32_t hidden = config.hidden, inner = config.intermediate, width = cache.qkvWidth();
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

    plan.record(tokenEmbedding(programs, b.ids, tokenTable, positionTable, llama ? 0 : config.maxPositions, b.x, rows, hidden,
                               config.vocabulary, firstPosition));
    for (LayerBuffers& layer : layers) {
      apply(plan, *o.norm, normInputs(b.x, rows, layer.attentionNorm, layer.attentionNormBias), b.normed, b.scratch);
      apply(plan, *o.projection, {{b.normed, rowsByHidden}, {layer.qkv.full, {width, hidden}}, {layer.qkvBias, {width}}}, b.qkv, b.scratch);
      plan.record(appendToCache(programs, b.qkv, layer.cache, llama, cosines, sines, cache, rows, firstPosition));
      attend(plan, b, layer.cache);
      apply(plan, *o.residual,
            {{b.attention, {rows, attentionWidth}}, {layer.output.full, {hidden, attentionWidth}}, {layer.outputBias, {hidden}}, {b.x, rowsByHidden}},
            b.xAlternate, b.scratch);
      apply(plan, *o.norm, normInputs(b.xAlternate, rows, layer.mlpNorm, layer.mlpNormBias), b.normed, b.scratch);
      const std::uint32_t upRows = inner * (llama ? 2 : 1);
      apply(plan, llama ? *o.projection : *o.projectionGelu, {{b.normed, rowsByHidden}, {layer.up.full, {upRows, hidden}}, {layer.upBias, {upRows}}},
            b.hidden, b.scratch);
      if (llama) plan.record(swiGlu(programs, b.hidden, b.gated, rows, inner));
      apply(plan, *o.residual,
            {{llama ? b.gated : b.hidden, {rows, inner}}, {layer.down.full, {hidden, inner}}, {layer.downBias, {hidden}}, {b.xAlternate, rowsByHidden}},
            b.x, b.scratch);
    }
    // The final norm and the head on the last row only where that is all generation needs (a prompt's last row, copied
    // to the start of a buffer: a binding's offset must be aligned, a row's need not be).
    BufferView last = b.x;
    if (logitRows < rows) {
      GLNET_ASSERT(logitRows == 1, "a pass keeps the logits of every row or of its last");
      last = BufferView(b.xAlternate, 0, floatBytes(hidden));
      apply(plan, *sliceOp({rows - 1, 0}, {1, 1}, {1, hidden}), {{b.x, rowsByHidden}}, last, b.scratch);
    }
    const BufferView lastNormed(b.normed, 0, floatBytes(std::size_t{logitRows} * hidden));
    apply(plan, *o.norm, normInputs(last, logitRows, finalNorm, finalNormBias), lastNormed, b.scratch);
    apply(plan, *o.projection,
          {{lastNormed, {logitRows, hidden}}, {config.tiedEmbeddings ? tokenTable : lmHead.full, {config.vocabulary, hidden}},
           {BufferView(zeros, 0, floatBytes(config.vocabulary)), {config.vocabulary}}},
          b.logits, b.scratch);
  }

  // A prompt's causal attention over the cache's first `rows` positions: the fused kernel reading Q from the fused
  // projection and K and V from the cache in place.
  struct PromptAttention {
    State& state;
    std::uint32_t rows;
    std::shared_ptr<const Op> op;
    PromptAttention(State& s, std::uint32_t rows) : state(s), rows(rows) {
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
    void operator()(Plan& plan, PassBuffers& b, const Buffer& layerCache) const {
      const std::vector<Shape> s = shapes();
      state.apply(plan, *op, {{b.qkv, s[0]}, {layerCache, s[1]}, {layerCache, s[2]}}, b.attention, b.scratch);
    }
  };

  void buildPrefill(std::uint32_t rows, bool allLogits) {
    prefill = Prefill{};
    prefill.rows = rows;
    prefill.allLogits = allLogits;
    const std::uint32_t logitRows = allLogits ? rows : 1;
    prefill.buffers = passBuffers(rows, logitRows);
    Plan plan(context.limits());
    const int draw = plan.addParameter();
    GLNET_ASSERT(draw == drawParameterOf(plan), "the draw counter is a prompt plan's first parameter");
    recordPass(plan, prefill.buffers, rows, logitRows, Uniform::u32(0, 0), PromptAttention(*this, rows));
    if (!allLogits) recordChoice(plan, prefill.buffers);
    prefill.plan = std::move(plan);
  }

  // The next token from the logits' one row, into `chosen` (for the host) and into the decode step's ids (its input).
  void recordChoice(Plan& plan, PassBuffers& b) {
    NextTokenShape shape;
    shape.vocabulary = config.vocabulary;
    const NextTokenOp choose(programs);
    GLNET_ASSERT(chooserScratch.bytes() >= choose.workspaceBytes(shape), "the chooser's workspace is sized for one row of logits");
    plan.record(choose(b.logits, chosen, step.ids, chooserScratch, shape, sampling,
                       Uniform::fromParameter(NextTokenOp::stepLocation, drawParameterOf(plan))));
  }
  // Every plan that chooses a token has the draw counter as a parameter, its first.
  static int drawParameterOf(const Plan&) { return 0; }

  // A decode step's pass over its one row: each dense layer one dispatch of Gemv.glsl with the norm or gate before it
  // fused into its read, the residual added as it writes.
  void recordStepPass(Plan& plan, const Uniform& position, bool singlePass) {
    PassBuffers& b = step;
    const std::uint32_t hidden = config.hidden, inner = config.intermediate, width = cache.qkvWidth();
    const std::uint32_t attentionWidth = config.heads * config.headDim, upRows = inner * (llama ? 2 : 1);
    GemvLayer normed, residual, mlp, down;
    normed.weights = residual.weights = storage;
    normed.input = llama ? GemvInput::rmsNorm : GemvInput::layerNorm;
    normed.epsilon = static_cast<float>(config.normEpsilon);
    residual.residual = true;
    mlp = normed;
    if (!llama) mlp.after = Pointwise{PointwiseKind::geluTanh};
    down = residual;
    if (llama) down.input = GemvInput::swiGlu;
    const auto gammaBeta = [&](const Buffer& gamma, const Buffer& beta) { return std::pair<BufferView, BufferView>{gamma, beta}; };
    plan.record(tokenEmbedding(programs, b.ids, tokenTable, positionTable, llama ? 0 : config.maxPositions, b.x, 1, hidden, config.vocabulary,
                               position));
    for (LayerBuffers& layer : layers) {
      const auto [gamma1, beta1] = gammaBeta(layer.attentionNorm, layer.attentionNormBias);
      // Without rotary positions the q/k/v layer writes the keys and values into the cache itself.
      const CacheAppend append{layer.cache, cache, position};
      plan.record(gemv(programs, normed, b.x, layer.qkv.forStep(), layer.qkvBias, b.qkv, width, hidden, nullptr, &gamma1, &beta1,
                       llama ? nullptr : &append));
      if (llama) plan.record(appendToCache(programs, b.qkv, layer.cache, true, cosines, sines, cache, 1, position));
      plan.record(DecodeAttention::record(programs, b.qkv, layer.cache, b.scratch, b.attention, cache,
                                          static_cast<float>(1 / std::sqrt(static_cast<double>(cache.headSize))),
                                          Uniform::fromParameter(0, keysParameter), Uniform::fromParameter(0, splitsParameter), singlePass));
      const BufferView x = b.x, xAlternate = b.xAlternate;
      plan.record(gemv(programs, residual, b.attention, layer.output.forStep(), layer.outputBias, b.xAlternate, hidden, attentionWidth, &x));
      const auto [gamma2, beta2] = gammaBeta(layer.mlpNorm, layer.mlpNormBias);
      plan.record(gemv(programs, mlp, b.xAlternate, layer.up.forStep(), layer.upBias, b.hidden, upRows, hidden, nullptr, &gamma2, &beta2));
      plan.record(gemv(programs, down, b.hidden, layer.down.forStep(), layer.downBias, b.x, hidden, inner, &xAlternate));
    }
    const auto [gamma, beta] = gammaBeta(finalNorm, finalNormBias);
    plan.record(gemv(programs, normed, b.x, config.tiedEmbeddings && storage == WeightStorage::fp32 ? tokenTable : lmHead.forStep(), zeros, b.logits, config.vocabulary, hidden, nullptr,
                     &gamma, &beta));
  }

  // Two recordings of the step, alike but for the attention: one pass over the cache while it holds at most
  // DecodeAttention::chunk keys, then chunks and their combination. The same parameters in both.
  void buildStep() {
    step = passBuffers(1, 1, true);
    step.scratch = Buffer(std::max(DecodeAttention::workspaceBytes(cache), sizeof(float)));
    for (const bool singlePass : {true, false}) {
      if (!singlePass && contextPositions <= DecodeAttention::chunk(cache)) break;
      Plan plan(context.limits());
      const int draw = plan.addParameter();
      GLNET_ASSERT(draw == drawParameterOf(plan), "the draw counter is a decode plan's first parameter");
      positionParameter = plan.addParameter();
      keysParameter = plan.addParameter();
      splitsParameter = plan.addParameter();
      recordStepPass(plan, Uniform::fromParameter(0, positionParameter), singlePass);
      recordChoice(plan, step);
      (singlePass ? shortStep : longStep) = std::move(plan);
    }
  }
  Plan& stepPlanAt(std::uint32_t keys) { return keys <= DecodeAttention::chunk(cache) || !longStep ? *shortStep : *longStep; }
  const Plan& stepPlanAt(std::uint32_t keys) const { return keys <= DecodeAttention::chunk(cache) || !longStep ? *shortStep : *longStep; }

  std::uint32_t readChosen() {
    std::uint32_t id = 0;
    chosen.download(&id, sizeof id);
    if (id >= config.vocabulary) {
      throw Error("the model's logits at position " + std::to_string(position) + " hold a NaN (or, sampling, an infinity): no token can be chosen");
    }
    return id;
  }

  void checkIds(const std::vector<std::uint32_t>& ids) const {
    if (ids.empty()) throw Error("the prompt holds no token");
    if (ids.size() > contextPositions) {
      throw Error("the prompt's " + std::to_string(ids.size()) + " tokens do not fit the context of " + std::to_string(contextPositions) +
                  " positions (--max-context)");
    }
    for (const std::uint32_t id : ids) {
      if (id >= config.vocabulary) throw Error("token id " + std::to_string(id) + " is outside the model's vocabulary of " + std::to_string(config.vocabulary));
    }
  }

  std::uint32_t decodeStep(std::vector<std::pair<std::string, double>>* timed) {
    if (!decoding) throw Error("a decode step continues a generation: start() one first (logits() ends the last one)");
    if (position >= contextPositions) {
      throw Error("the context of " + std::to_string(contextPositions) + " positions is full (" + optionName("max-context") + ")");
    }
    Plan& plan = stepPlanAt(position + 1);
    plan.setParameter(drawParameterOf(plan), ++draws);
    plan.setParameter(positionParameter, position);
    plan.setParameter(keysParameter, position + 1);
    plan.setParameter(splitsParameter, DecodeAttention::splits(position + 1, cache));
    if (timed) {
      const std::vector<double> milliseconds = plan.runTimed();
      const std::vector<std::string> labels = plan.labels();
      timed->clear();
      for (std::size_t i = 0; i < milliseconds.size(); ++i) timed->emplace_back(labels[i], milliseconds[i]);
    } else {
      plan.run();
    }
    ++position;
    return readChosen();
  }

  void runPrompt(const std::vector<std::uint32_t>& ids, bool allLogits) {
    checkIds(ids);
    const auto rows = static_cast<std::uint32_t>(ids.size());
    if (!prefill.plan || prefill.rows != rows || prefill.allLogits != allLogits) buildPrefill(rows, allLogits);
    prefill.buffers.ids.upload(std::vector<float>(ids.begin(), ids.end()));
    if (!allLogits) prefill.plan->setParameter(0, ++draws);
    prefill.plan->run();
    position = rows;
  }
};

Decoder::Decoder(const Context& context, DecoderConfig config, const DecoderWeights& weights, std::uint32_t contextPositions,
                 WeightStorage storage)
    : state_(std::make_unique<State>(context, std::move(config), contextPositions, storage)) {
  State& s = *state_;
  const DecoderConfig& c = s.config;
  const std::size_t hidden = c.hidden, inner = c.intermediate, headSize = c.headDim;
  s.tokenTable = Buffer::of(weights.tokenEmbedding.values);
  s.gpuWeightBytes += s.tokenTable.bytes();
  if (!s.llama) s.positionTable = s.upload(weights.positionEmbedding);
  s.finalNorm = s.upload(weights.finalNorm);
  s.finalNormBias = s.llama ? Buffer(sizeof(float)) : s.upload(weights.finalNormBias);
  // Tied: the prompt's pass reads the token table as its head; the step too, or the table's packed copy.
  if (!c.tiedEmbeddings) {
    s.lmHead = s.uploadMatrix(weights.lmHead.values);
  } else if (storage != WeightStorage::fp32) {
    s.lmHead = s.uploadMatrix(weights.tokenEmbedding.values, false);
  } else {
    s.stepWeightBytes += s.tokenTable.bytes();
  }
  if (s.llama) {
    auto [cosines, sines] = rotaryTables(c, s.contextPositions);
    s.cosines = Buffer::of(cosines);
    s.sines = Buffer::of(sines);
  } else {
    s.cosines = Buffer(sizeof(float));
    s.sines = Buffer(sizeof(float));
  }
  checkGemvInputs(c.hidden, "config.json's hidden size");
  checkGemvInputs(c.intermediate, "config.json's intermediate size");
  checkGemvInputs(c.heads * c.headDim, "config.json's heads times head size");
  const std::size_t qWidth = c.heads * headSize, kvWidth = c.kvHeads * headSize;
  s.zeros = Buffer::of(std::vector<float>(std::max<std::size_t>(c.vocabulary, hidden), 0.0f));
  for (const DecoderLayerWeights& w : weights.layers) {
    LayerBuffers layer;
    layer.attentionNorm = s.upload(w.attentionNorm);
    layer.attentionNormBias = s.llama ? Buffer(sizeof(float)) : s.upload(w.attentionNormBias);
    layer.qkv = s.uploadMatrix(stacked({{&w.query, qWidth * hidden}, {&w.key, kvWidth * hidden}, {&w.value, kvWidth * hidden}}));
    layer.qkvBias = s.upload(stacked({{&w.queryBias, qWidth}, {&w.keyBias, kvWidth}, {&w.valueBias, kvWidth}}));
    layer.output = s.uploadMatrix(w.output.values);
    layer.outputBias = s.upload(stacked({{&w.outputBias, hidden}}));
    layer.mlpNorm = s.upload(w.mlpNorm);
    layer.mlpNormBias = s.llama ? Buffer(sizeof(float)) : s.upload(w.mlpNormBias);
    if (s.llama) {
      layer.up = s.uploadMatrix(stacked({{&w.gate, inner * hidden}, {&w.up, inner * hidden}}));
      layer.upBias = s.upload(stacked({{&w.gateBias, inner}, {&w.upBias, inner}}));
    } else {
      layer.up = s.uploadMatrix(w.up.values);
      layer.upBias = s.upload(stacked({{&w.upBias, inner}}));
    }
    layer.down = s.uploadMatrix(w.down.values);
    layer.downBias = s.upload(stacked({{&w.downBias, hidden}}));
    layer.cache = Buffer(floatBytes(s.cache.layerFloats()));
    s.layers.push_back(std::move(layer));
  }
  s.chosen = Buffer(sizeof(std::uint32_t));
  NextTokenShape oneRow;
  oneRow.vocabulary = c.vocabulary;
  s.chooserScratch = Buffer(NextTokenOp(s.programs).workspaceBytes(oneRow));
  log::info("decoder: " + c.architecture + ", " + std::to_string(c.layers) + " layers, " + std::to_string(s.gpuWeightBytes >> 20) +
            " MiB of weights on the GPU (" + kindName(storage) + " for the decode step: " + std::to_string(s.stepWeightBytes >> 20) +
            " MiB read per token), a cache of " + std::to_string(s.contextPositions) + " positions (" +
            std::to_string((s.cache.layerFloats() * c.layers * sizeof(float)) >> 20) + " MiB)");
}

Decoder::~Decoder() = default;
Decoder::Decoder(Decoder&&) noexcept = default;

const DecoderConfig& Decoder::config() const { return state_->config; }
std::uint32_t Decoder::context() const { return state_->contextPositions; }
std::uint32_t Decoder::position() const { return state_->position; }
std::size_t Decoder::weightBytes() const { return state_->stepWeightBytes; }
WeightStorage Decoder::weightStorage() const { return state_->storage; }

std::vector<float> Decoder::logits(const std::vector<std::uint32_t>& ids) {
  State& s = *state_;
  s.decoding = false;  // the cache holds these ids now, with no chosen token to feed
  s.runPrompt(ids, true);
  std::vector<float> values(ids.size() * std::size_t{s.config.vocabulary});
  s.prefill.plan->read(s.prefill.buffers.logits, values.data(), floatBytes(values.size()));
  return values;
}

std::uint32_t Decoder::start(const std::vector<std::uint32_t>& prompt, const SamplingSettings& sampling) {
  State& s = *state_;
  sampling.check();
  if (!s.shortStep || !sameSampling(s.sampling, sampling)) {
    // The plans go first: a recording that fails leaves none bound to buffers it replaced, and the next start() records.
    s.shortStep.reset();
    s.longStep.reset();
    s.prefill = State::Prefill{};
    s.sampling = sampling;
    s.buildStep();
  }
  s.draws = 0;
  s.decoding = false;
  s.runPrompt(prompt, false);
  const std::uint32_t token = s.readChosen();
  s.decoding = true;
  return token;
}

std::uint32_t Decoder::next() { return state_->decodeStep(nullptr); }

std::uint32_t Decoder::profiledNext(std::vector<std::pair<std::string, double>>& dispatchMilliseconds) {
  return state_->decodeStep(&dispatchMilliseconds);
}

std::size_t Decoder::stepDispatches() const {
  const State& s = *state_;
  return s.shortStep ? s.stepPlanAt(s.position + 1).dispatchCount() : 0;
}
std::size_t Decoder::stepBarriers() const {
  const State& s = *state_;
  return s.shortStep ? s.stepPlanAt(s.position + 1).barrierCount() : 0;
}

}  // namespace glnet
