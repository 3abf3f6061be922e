// The decode step of every started sequence (Decoder.h): one row per sequence, recorded for the rows and sampling of the
// started sequences and replayed while those stay, the positions uploaded before each replay.
#include "decoder/DecoderState.h"

#include "base/check.h"

#include <algorithm>
#include <cmath>

namespace glnet {

void Decoder::State::recordStepPass(Plan& plan, std::uint32_t rows, bool singlePass) {
  DecoderPassBuffers& b = step;
  const std::uint32_t hidden = config.hidden, inner = config.intermediate, width = cache.qkvWidth();
  const std::uint32_t attentionWidth = config.heads * config.headDim, upRows = inner * (llama ? 2 : 1);
  const RowPositions perRow{Uniform::u32(0, 0), BufferView(positions)};
  const std::shared_ptr<const Op> norm = ops().norm;
  GemvLayer plain;
  plain.weights = storage;
  plain.rows = rows;
  // A normed layer's input: one row's norm is read fused by the Gemv; several rows are normed first (each group would
  // otherwise compute every row's statistics).
  const auto normed = [&](const BufferView& x, const Buffer& gamma, const Buffer& beta, GemvLayer& layer) -> BufferView {
    if (rows == 1) {
      layer.input = llama ? GemvInput::rmsNorm : GemvInput::layerNorm;
      layer.epsilon = static_cast<float>(config.normEpsilon);
      return x;
    }
    GLNET_ASSERT(norm->workspaceBytes({{rows, hidden}}) == 0, "a norm over rows needs no workspace");
    apply(plan, *norm, normInputs(x, rows, gamma, beta), b.normed, b.scratch);
    return b.normed;
  };
  GemvLayer residual = plain;
  residual.residual = true;
  plan.record(tokenEmbedding(programs, b.ids, tokenTable, positionTable, llama ? 0 : config.maxPositions, b.x, rows, hidden, config.vocabulary,
                             perRow));
  for (DecoderLayerBuffers& layer : layers) {
    GemvLayer projection = plain;
    const BufferView attentionInput = normed(b.x, layer.attentionNorm, layer.attentionNormBias, projection);
    const BufferView gamma1 = layer.attentionNorm, beta1 = layer.attentionNormBias;
    // Without rotary positions the q/k/v layer writes the keys and values into the cache itself.
    const CacheAppend append{layer.cache, cache, positions};
    plan.record(gemv(programs, projection, attentionInput, layer.qkv.forStep(), layer.qkvBias, b.qkv, width, hidden, nullptr, &gamma1, &beta1,
                     llama ? nullptr : &append));
    if (llama) plan.record(appendToCache(programs, b.qkv, layer.cache, true, cosines, sines, cache, rows, perRow));
    plan.record(DecodeAttention::record(programs, b.qkv, layer.cache, b.scratch, b.attention, cache,
                                        static_cast<float>(1 / std::sqrt(static_cast<double>(cache.headSize))), positions, rows,
                                        Uniform::fromParameter(0, splitsParameter), singlePass));
    const BufferView x = b.x, xAlternate = b.xAlternate;
    plan.record(gemv(programs, residual, b.attention, layer.output.forStep(), layer.outputBias, b.xAlternate, hidden, attentionWidth, &x));
    GemvLayer mlp = plain;
    if (!llama) mlp.after = Pointwise{PointwiseKind::geluTanh};
    const BufferView mlpInput = normed(b.xAlternate, layer.mlpNorm, layer.mlpNormBias, mlp);
    const BufferView gamma2 = layer.mlpNorm, beta2 = layer.mlpNormBias;
    plan.record(gemv(programs, mlp, mlpInput, layer.up.forStep(), layer.upBias, b.hidden, upRows, hidden, nullptr, &gamma2, &beta2));
    // One row's gate is read fused; several rows' is made first (fused, each of N outputs would recompute it).
    GemvLayer down = residual;
    BufferView downInput = b.hidden;
    if (llama && rows == 1) down.input = GemvInput::swiGlu;
    if (llama && rows > 1) {
      plan.record(swiGlu(programs, b.hidden, b.gated, rows, inner));
      downInput = b.gated;
    }
    plan.record(gemv(programs, down, downInput, layer.down.forStep(), layer.downBias, b.x, hidden, inner, &xAlternate));
  }
  GemvLayer head = plain;
  const BufferView headInput = normed(b.x, finalNorm, finalNormBias, head);
  const BufferView gamma = finalNorm, beta = finalNormBias;
  plan.record(gemv(programs, head, headInput, config.tiedEmbeddings && storage == WeightStorage::fp32 ? tokenTable : lmHead.forStep(), zeros,
                   b.logits, config.vocabulary, hidden, nullptr, &gamma, &beta));
}

Decoder::State::Composition Decoder::State::currentComposition() const {
  Composition wanted;
  std::uint32_t highest = 0;
  for (std::uint32_t s = 0; s < sequenceCount; ++s) {
    if (sequences[s].decoding) highest = s + 1;
  }
  // Rows in powers of two (up to the sequences), so that few Gemv programs serve every count of sequences.
  wanted.rows = 1;
  while (wanted.rows < highest) wanted.rows *= 2;
  wanted.rows = std::min(wanted.rows, sequenceCount);
  for (std::uint32_t s = 0; s < wanted.rows; ++s) {
    wanted.sampling.push_back(sequences[s].decoding ? std::optional<SamplingSettings>(sequences[s].sampling) : std::nullopt);
  }
  return wanted;
}

namespace {

bool sameComposition(const Decoder::State::Composition& a, const Decoder::State::Composition& b) {
  if (a.rows != b.rows) return false;
  for (std::size_t r = 0; r < a.sampling.size(); ++r) {
    if (a.sampling[r].has_value() != b.sampling[r].has_value()) return false;
    if (a.sampling[r] && !sameSampling(*a.sampling[r], *b.sampling[r])) return false;
  }
  return true;
}

}  // namespace

Decoder::State::StepPlan Decoder::State::buildStep(const Composition& wanted, bool singlePass) {
  Plan plan(context.limits());
  const int splits = plan.addParameter();
  GLNET_ASSERT(splits == splitsParameter, "the key splits are a decode plan's first parameter");
  std::vector<int> draws(wanted.rows, -1);
  for (std::uint32_t r = 0; r < wanted.rows; ++r) {
    if (wanted.sampling[r]) draws[r] = plan.addParameter();
  }
  recordStepPass(plan, wanted.rows, singlePass);
  // Adjacent greedy rows share one choice (its dispatches write the whole id buffers, so each choice waits for the
  // last); a sampled row draws alone, with its own sequence's counter.
  for (std::uint32_t r = 0; r < wanted.rows;) {
    if (!wanted.sampling[r]) {
      ++r;
      continue;
    }
    std::uint32_t rows = 1;
    if (wanted.sampling[r]->greedy()) {
      while (r + rows < wanted.rows && wanted.sampling[r + rows] && wanted.sampling[r + rows]->greedy()) ++rows;
    }
    recordChoice(plan, step.logits, r, r, *wanted.sampling[r], draws[r], rows);
    r += rows;
  }
  return {std::move(plan), std::move(draws)};
}

bool Decoder::State::singlePassFits() const {
  for (const Sequence& s : sequences) {
    if (s.decoding && s.position + 1 > DecodeAttention::chunk(cache)) return false;
  }
  return true;
}

void Decoder::State::checkOnlyFirst() const {
  if (!sequences[0].decoding) throw Error("a decode step continues a generation: start() one first (logits() ends the last one)");
  for (std::uint32_t s = 1; s < sequenceCount; ++s) {
    if (sequences[s].decoding) throw Error("next() decodes sequence 0 alone, and sequence " + std::to_string(s) + " is started: use step()");
  }
}

std::vector<std::uint32_t> Decoder::State::runStep(std::vector<std::pair<std::string, double>>* timed) {
  std::uint32_t mostKeys = 0;
  for (const Sequence& s : sequences) {
    if (!s.decoding) continue;
    if (s.position >= contextPositions) {
      throw Error("the context of " + std::to_string(contextPositions) + " positions is full (" + optionName("max-context") + ")");
    }
    mostKeys = std::max(mostKeys, s.position + 1);
  }
  if (mostKeys == 0) throw Error("a decode step continues a generation: start() one first (logits() ends the last one)");
  const Composition wanted = currentComposition();
  if (!sameComposition(composition, wanted)) {
    lastStep = nullptr;
    shortStep.reset();
    longStep.reset();
    composition = wanted;
  }
  const bool singlePass = singlePassFits();
  std::optional<StepPlan>& recorded = singlePass ? shortStep : longStep;
  if (!recorded) recorded = buildStep(composition, singlePass);
  Plan& plan = recorded->plan;
  lastStep = &plan;

  const std::uint32_t rows = composition.rows;
  std::vector<std::uint32_t> rowPositions(rows, 0);
  for (std::uint32_t r = 0; r < rows; ++r) {
    Sequence& s = sequences[r];
    if (!s.decoding) continue;
    rowPositions[r] = s.position;
    plan.setParameter(recorded->drawParameters[r], ++s.draws);
  }
  positions.upload(rowPositions);
  plan.setParameter(splitsParameter, DecodeAttention::splits(mostKeys, cache));
  if (timed) {
    const std::vector<double> milliseconds = plan.runTimed();
    const std::vector<std::string> labels = plan.labels();
    timed->clear();
    for (std::size_t i = 0; i < milliseconds.size(); ++i) timed->emplace_back(labels[i], milliseconds[i]);
  } else {
    plan.run();
  }
  std::vector<std::uint32_t> ids(rows);
  chosen.download(ids.data(), ids.size() * sizeof(std::uint32_t));
  ids.resize(sequenceCount, noToken);
  for (std::uint32_t r = 0; r < sequenceCount; ++r) {
    Sequence& s = sequences[r];
    if (!s.decoding) {
      ids[r] = noToken;
      continue;
    }
    ++s.position;
    if (ids[r] >= config.vocabulary) {
      ids[r] = config.vocabulary;
      s.decoding = false;
    }
  }
  return ids;
}

}  // namespace glnet
