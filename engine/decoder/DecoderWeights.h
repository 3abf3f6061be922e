// The weights of a Hugging Face decoder folder (model.safetensors, or shards listed by model.safetensors.index.json)
// in one layout for every family: each tensor found by its Hugging Face name, checked against the config's shape, and
// linear weights as nn.Linear keeps them, [out, in]. GPT-2's Conv1D weights ([in, out], q, k and v side by side in
// c_attn) are split and transposed into that layout on load.
#pragma once

#include "decoder/DecoderConfig.h"
#include "formats/Safetensors.h"

#include <string>
#include <vector>

namespace glnet {

// A tensor the model does not have (GPT-2's gate, a Llama's biases) is empty: no shape, no values.
struct DecoderLayerWeights {
  HostTensor attentionNorm, attentionNormBias;  // the bias only for GPT-2 (LayerNorm); the Llama family's RMSNorm has a weight only
  HostTensor query, key, value, output;         // [heads·headDim, hidden], [kvHeads·headDim, hidden] twice, [hidden, heads·headDim]
  HostTensor queryBias, keyBias, valueBias, outputBias;
  HostTensor mlpNorm, mlpNormBias;
  HostTensor gate, up, down;  // [intermediate, hidden] twice, [hidden, intermediate]; GPT-2: up = c_fc, down = c_proj, no gate
  HostTensor gateBias, upBias, downBias;
};

struct DecoderWeights {
  HostTensor tokenEmbedding;     // [vocabulary, hidden]
  HostTensor positionEmbedding;  // GPT-2: [maxPositions, hidden]; empty for the Llama family (rotary)
  std::vector<DecoderLayerWeights> layers;
  HostTensor finalNorm, finalNormBias;
  HostTensor lmHead;        // [vocabulary, hidden]; empty when tied (the token embedding serves)
  std::string storedDtype;  // what the files store, e.g. "BF16"; several joined by '+' ("BF16+F32") when mixed
};

// Reads the weights of `folder` for `config` (readDecoderConfig of the same folder). Throws glnet::Error with one line
// naming a missing tensor, one of the wrong shape (with the shape config.json makes), or one the model does not have.
DecoderWeights readDecoderWeights(const std::string& folder, const DecoderConfig& config);

}  // namespace glnet
