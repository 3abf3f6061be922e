// The layer kinds transformers are made of (LayerBuild.h): linear, attention, layernorm, tokens, position, embedding,
// mask and first.
#include "model/LayerBuild.h"

#include "graph/InferenceOps.h"
#include "graph/Ops.h"

namespace glnet {

// A dense layer on each row of the last axis (PyTorch's Linear): [..., in] → [..., outputs].
Tensor buildLinear(const LayerBuild& b) {
  if (b.shape.size() < 2) throw b.refuse("a linear layer reads [N, ..., features], not " + describe(b.shape));
  const std::uint32_t features = b.shape.back(), rows = static_cast<std::uint32_t>(elementCount(b.shape) / features);
  const std::vector<Tensor> wb = b.weightAndBias({b.layer.outputs, features});
  const Tensor x = b.shape.size() == 2 ? b.inputs[0] : b.graph.apply(viewOp({rows, features}), {b.inputs[0]}, b.layer.name + ".rows");
  const Tensor y = b.graph.dense(x, wb[0], wb[1], b.layer.activation);
  if (b.shape.size() == 2) return y;
  Shape out = b.shape;
  out.back() = b.layer.outputs;
  return b.graph.apply(viewOp(out), {y}, b.layer.name);
}

// Multi-head self-attention over the second-to-last axis of [N, ..., S, E] (PyTorch's MultiheadAttention with
// batch_first, its parameters' names): the positions' queries, keys and values projected by one dense layer, attention
// per head, the heads' outputs projected back to E. A second input [N, ..., S] is added to the scores of each key (a
// mask layer's: −inf hides a padded position).
Tensor buildAttention(const LayerBuild& b) {
  const LayerDescription& layer = b.layer;
  if (b.shape.size() < 3) throw b.refuse("attention reads [N, ..., positions, features], not " + describe(b.shape));
  const std::uint32_t width = b.shape.back(), rows = static_cast<std::uint32_t>(elementCount(b.shape) / width);
  if (width % layer.heads != 0) throw b.refuse("its " + std::to_string(width) + " features do not split into " + std::to_string(layer.heads) + " heads");
  // As PyTorch initialises MultiheadAttention: the in-projection Xavier-uniform (fans E and 3E), the output projection
  // as a Linear, both biases zeros.
  const auto parameter = [&](const std::string& suffix, const Shape& shape, Initialisation init, std::size_t fans) {
    return b.parameter(layer.name + suffix, shape, false, init, fans);
  };
  const Tensor inWeight = parameter(".in_proj_weight", {3 * width, width}, Initialisation::xavierUniform, 4 * std::size_t{width});
  const Tensor inBias = parameter(".in_proj_bias", {3 * width}, Initialisation::zeros, width);
  const Tensor outWeight = parameter(".out_proj.weight", {width, width}, Initialisation::uniformFanIn, width);
  const Tensor outBias = parameter(".out_proj.bias", {width}, Initialisation::zeros, width);
  const Tensor x = b.graph.apply(viewOp({rows, width}), {b.inputs[0]}, layer.name + ".rows");
  Shape projected = b.shape;
  projected.back() = 3 * width;
  const Tensor qkv = b.graph.apply(viewOp(projected), {b.graph.dense(x, inWeight, inBias, Activation::none)}, layer.name + ".qkv");
  std::vector<Tensor> attended{qkv};
  if (b.inputs.size() == 2) attended.push_back(b.inputs[1]);  // the key mask
  const Tensor heads = b.graph.apply(selfAttentionOp(layer.heads, layer.causal), attended, layer.name + ".heads");
  const Tensor merged = b.graph.apply(viewOp({rows, width}), {heads}, layer.name + ".merged");
  return b.graph.apply(viewOp(b.shape), {b.graph.dense(merged, outWeight, outBias, Activation::none)}, layer.name);
}

Tensor buildLayernorm(const LayerBuild& b) {
  const std::string& name = b.layer.name;
  if (b.shape.size() < 2) throw b.refuse("layer normalization reads [N, ..., C], not " + describe(b.shape));
  const Shape features{b.shape.back()};
  const Tensor gamma = b.parameter(name + ".weight", features, false, Initialisation::ones, 0);
  const Tensor beta = b.parameter(name + ".bias", features, false, Initialisation::zeros, 0);
  return b.graph.apply(layerNormOp(b.layer.epsilon), {b.inputs[0], gamma, beta}, name);
}

Tensor buildTokens(const LayerBuild& b) {
  if (b.shape.size() != 4) throw b.refuse("tokens reads [N, C, H, W], not " + describe(b.shape));
  return b.graph.apply(tokensOp(), {b.inputs[0]}, b.layer.name);
}

// A learned vector per position added, [N, ..., S, E] + weight [S, E] (a vision transformer's position embedding).
Tensor buildPosition(const LayerBuild& b) {
  if (b.shape.size() < 3) throw b.refuse("a position embedding reads [N, ..., positions, features], not " + describe(b.shape));
  const std::uint32_t positions = b.shape[b.shape.size() - 2], width = b.shape.back();
  const std::uint32_t items = static_cast<std::uint32_t>(elementCount(b.shape) / (std::size_t{positions} * width));
  const Tensor table = b.parameter(b.layer.name + ".weight", {positions, width}, false, Initialisation::zeros, 0);
  const Tensor x = b.graph.apply(viewOp({items, positions * width}), {b.inputs[0]}, b.layer.name + ".items");
  const Tensor row = b.graph.apply(viewOp({positions * width}), {table}, b.layer.name + ".table");
  return b.graph.apply(viewOp(b.shape), {b.graph.apply(biasAddOp(), {x, row})}, b.layer.name);
}


// Token ids [N, S] → [N, S, outputs], a learned row of the table [vocabulary, outputs] per id (PyTorch's Embedding,
// initialised N(0, 1) as it is).
Tensor buildEmbedding(const LayerBuild& b) {
  const Tensor table = b.parameter(b.layer.name + ".weight", {b.layer.vocabulary, b.layer.outputs}, false, Initialisation::normal, 0);
  return b.graph.apply(embeddingOp(), {b.inputs[0], table}, b.layer.name);
}

// Token ids → an additive attention mask over the keys: −inf where the id is the padding id, else 0.
Tensor buildMask(const LayerBuild& b) {
  return b.graph.apply(pointwiseOp({PointwiseKind::paddingMask, static_cast<float>(b.layer.pad)}), {b.inputs[0]}, b.layer.name);
}

// [N, ..., S, E] → [N, ..., E]: the first position's features (BERT's [CLS] summary).
Tensor buildFirst(const LayerBuild& b) {
  if (b.shape.size() < 3) throw b.refuse("first reads [N, ..., positions, features], not " + describe(b.shape));
  return b.graph.apply(firstPositionOp(), {b.inputs[0]}, b.layer.name);
}

namespace {

// The layers of `kind` that read the network's input.
std::vector<const LayerDescription*> onInput(const NetDescription& description, LayerKind kind) {
  std::vector<const LayerDescription*> found;
  for (const LayerDescription& layer : description.layers) {
    if (layerKindOf(layer) == kind && layer.inputs.front() == "input") found.push_back(&layer);
  }
  return found;
}

}  // namespace

std::optional<std::uint32_t> tokenVocabulary(const NetDescription& description) {
  std::optional<std::uint32_t> rows;
  for (const LayerDescription* layer : onInput(description, LayerKind::embedding)) rows = std::min(rows.value_or(layer->vocabulary), layer->vocabulary);
  return rows;
}

bool masksCausalAttention(const NetDescription& description) {
  return std::any_of(description.layers.begin(), description.layers.end(), [](const LayerDescription& layer) {
    return layerKindOf(layer) == LayerKind::attention && layer.causal && layer.inputs.size() == 2;
  });
}

std::optional<std::uint32_t> paddingId(const NetDescription& description) {
  std::optional<std::uint32_t> pad;
  for (const LayerDescription* layer : onInput(description, LayerKind::mask)) {
    if (pad && *pad != layer->pad) throw Error("the mask layers hide different padding ids, " + std::to_string(*pad) + " and " + std::to_string(layer->pad));
    pad = layer->pad;
  }
  return pad;
}

}  // namespace glnet
