// Decoder's weights uploaded once (Decoder.h): norms and biases as float32, each dense layer's weight as float32 for the
// prompt's pass and packed 16-bit for the decode step where the storage says so, q/k/v and a Llama's gate and up
// stacked into one layer each, and the rotary angles' tables.
#include "decoder/DecoderState.h"

#include "base/check.h"

#include <algorithm>
#include <cmath>

namespace glnet {
namespace {

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

}  // namespace

Buffer Decoder::State::upload(const std::vector<float>& values) {
  gpuWeightBytes += floatBytes(values.size());
  stepWeightBytes += floatBytes(values.size());
  return Buffer::of(values);
}

DecoderMatrix Decoder::State::uploadMatrix(const std::vector<float>& values, bool prefillReads) {
  DecoderMatrix matrix;
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

void Decoder::State::uploadWeights(const DecoderWeights& weights) {
  const DecoderConfig& c = config;
  const std::size_t hidden = c.hidden, inner = c.intermediate, headSize = c.headDim;
  tokenTable = Buffer::of(weights.tokenEmbedding.values);
  gpuWeightBytes += tokenTable.bytes();
  if (!llama) positionTable = upload(weights.positionEmbedding);
  finalNorm = upload(weights.finalNorm);
  finalNormBias = llama ? Buffer(sizeof(float)) : upload(weights.finalNormBias);
  // Tied: the prompt's pass reads the token table as its head; the step too, or the table's packed copy.
  if (!c.tiedEmbeddings) {
    lmHead = uploadMatrix(weights.lmHead.values);
  } else if (storage != WeightStorage::fp32) {
    lmHead = uploadMatrix(weights.tokenEmbedding.values, false);
  } else {
    stepWeightBytes += tokenTable.bytes();
  }
  if (llama) {
    auto [cosineTable, sineTable] = rotaryTables(c, contextPositions);
    cosines = Buffer::of(cosineTable);
    sines = Buffer::of(sineTable);
  } else {
    cosines = Buffer(sizeof(float));
    sines = Buffer(sizeof(float));
  }
  checkGemvInputs(c.hidden, "config.json's hidden size");
  checkGemvInputs(c.intermediate, "config.json's intermediate size");
  checkGemvInputs(c.heads * c.headDim, "config.json's heads times head size");
  const std::size_t qWidth = c.heads * headSize, kvWidth = c.kvHeads * headSize;
  zeros = Buffer::of(std::vector<float>(std::max<std::size_t>(c.vocabulary, hidden), 0.0f));
  for (const DecoderLayerWeights& w : weights.layers) {
    DecoderLayerBuffers layer;
    layer.attentionNorm = upload(w.attentionNorm);
    layer.attentionNormBias = llama ? Buffer(sizeof(float)) : upload(w.attentionNormBias);
    layer.qkv = uploadMatrix(stacked({{&w.query, qWidth * hidden}, {&w.key, kvWidth * hidden}, {&w.value, kvWidth * hidden}}));
    layer.qkvBias = upload(stacked({{&w.queryBias, qWidth}, {&w.keyBias, kvWidth}, {&w.valueBias, kvWidth}}));
    layer.output = uploadMatrix(w.output.values);
    layer.outputBias = upload(stacked({{&w.outputBias, hidden}}));
    layer.mlpNorm = upload(w.mlpNorm);
    layer.mlpNormBias = llama ? Buffer(sizeof(float)) : upload(w.mlpNormBias);
    if (llama) {
      layer.up = uploadMatrix(stacked({{&w.gate, inner * hidden}, {&w.up, inner * hidden}}));
      layer.upBias = upload(stacked({{&w.gateBias, inner}, {&w.upBias, inner}}));
    } else {
      layer.up = uploadMatrix(w.up.values);
      layer.upBias = upload(stacked({{&w.upBias, inner}}));
    }
    layer.down = uploadMatrix(w.down.values);
    layer.downBias = upload(stacked({{&w.downBias, hidden}}));
    layer.cache = Buffer(floatBytes(cache.layerFloats() * sequenceCount));
    layers.push_back(std::move(layer));
  }
}

}  // namespace glnet
