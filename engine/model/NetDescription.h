// A network description (glnet_train --net NET.json): the input shape and named layers, each with its kind, its
// attributes and the layers it reads, so that residual branches are expressible. The format is in the README
// ("Your own network"); the built-in networks (lenet5, resnet8) are such descriptions, shipped in nets/.
#pragma once

#include "graph/Graph.h"
#include "numbers/Activation.h"

#include <array>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace glnet {

// The kinds of trainable layers. Each has one row in each of three tables, which fail to compile without it (each
// checks that it holds one row per kind, in this order): kindRows in NetDescription.cpp (its name in descriptions, the
// attributes it takes, the inputs it reads, its parse and build functions), Converter::readings() in
// convert/OnnxNetwork.cpp (the ONNX op read as it, and its reader) and writings in convert/OnnxExport.cpp (its
// writer of ONNX nodes); tests/convert/LayerKindTest.cpp takes an example of each through all three.
enum class LayerKind { conv, dense, linear, attention, batchnorm, layernorm, relu, tanh, sigmoid, hardswish, silu, gelu, add, concat, maxpool, avgpool, globalavgpool, flatten, tokens, position, embedding, mask, first, dropout, count };
constexpr std::size_t layerKindCount = static_cast<std::size_t>(LayerKind::count);
// Whether a table of kinds holds one row per LayerKind, in its order (each such table static_asserts it): a row left
// out leaves a default row of the wrong kind, one too many does not compile.
template <typename Row>
constexpr bool oneRowPerKind(const std::array<Row, layerKindCount>& rows) {
  for (std::size_t k = 0; k < layerKindCount; ++k) {
    if (rows[k].kind != static_cast<LayerKind>(k)) return false;
  }
  return true;
}

struct LayerDescription {
  std::string name;
  std::string kind;  // a LayerKind's name: conv, dense, batchnorm, relu, ...
  std::vector<std::string> inputs;  // earlier layers' names, or "input"; the previous layer when not given
  std::uint32_t outputs = 0;        // conv, dense, linear
  std::uint32_t kernel = 0;         // conv, maxpool, avgpool
  std::uint32_t stride = 1;         // conv (1), maxpool and avgpool (their kernel)
  std::uint32_t padding = 0;        // conv ((kernel − 1)/2), maxpool and avgpool (0)
  std::uint32_t groups = 1;         // conv: input and output channels in this many groups (depthwise: groups = channels)
  Activation activation = Activation::none;  // conv, dense, linear: applied in the same op
  float momentum = 0.1f, epsilon = 1e-5f;    // batchnorm (both), layernorm (epsilon)
  float rate = 0.5f;                         // dropout: the fraction of values dropped while training
  std::uint32_t heads = 0;                   // attention
  bool causal = false;                       // attention: position i attends to positions up to i
  bool tanhApproximation = false;            // gelu: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), "approximate": "tanh"
  std::uint32_t vocabulary = 0;              // embedding: the rows of its table (token ids below this)
  std::uint32_t pad = 0;                     // mask: the padding token's id
};

struct NetDescription {
  std::string name;
  Shape input;  // per image: [channels, height, width] or [features]
  std::vector<LayerDescription> layers;
};

// The kind's name in descriptions ("conv"); the kind of a name, or nothing; the kind of a layer that the parser admitted.
const char* layerKindName(LayerKind kind);
std::optional<LayerKind> findLayerKind(const std::string& name);
LayerKind layerKindOf(const LayerDescription& layer);

// Letters, digits, '_', '.' and '-', at most 128 of them: the names of layers, and of descriptions.
bool isValidLayerName(const std::string& name);

// Throws glnet::Error "`source`: layer 'NAME': what is wrong" (or without the layer for the whole file); checks
// the fields and the references between layers. Shapes are checked when the network is built.
NetDescription parseNetDescription(const std::string& text, const std::string& source);
// The same from a file (at most 16 MiB).
NetDescription readNetDescription(const std::string& path);
// The description as JSON with every attribute spelled out, as model files record it.
std::string toJson(const NetDescription& description);

// The description shipped under this name, or null; and the names there are.
const NetDescription* builtinNet(const std::string& name);
std::vector<std::string> builtinNetNames();

// How the layers get their parameters: called in layer order with each parameter's name ("conv1.weight"), shape,
// whether it is state (batch normalization's running statistics), and its initialisation (PyTorch's defaults).
// uniformFanIn: U(±1/√fanIn), PyTorch's Linear and Conv; xavierUniform: U(±√(6/fanIn)) with fanIn the fan in and out
// together, PyTorch's xavier_uniform_ (MultiheadAttention's in-projection); normal: N(0, 1), PyTorch's Embedding.
enum class Initialisation { uniformFanIn, xavierUniform, normal, ones, zeros };
using ParameterSource = std::function<Tensor(const std::string& name, const Shape& shape, bool state, Initialisation init, std::size_t fanIn)>;

// What a network reading token ids expects of them: the rows of the smallest table among the embedding layers that
// read its input (nothing when none does: it reads images or features), and the padding id of the mask layers that
// read it (nothing when none does). Throws glnet::Error when two mask layers hide different ids.
std::optional<std::uint32_t> tokenVocabulary(const NetDescription& description);
std::optional<std::uint32_t> paddingId(const NetDescription& description);
// Whether a causal attention layer reads a mask: then a sequence that starts with padding leaves its first queries no
// key to see.
bool masksCausalAttention(const NetDescription& description);

// The layers applied to `images` in `graph`; returns the last layer's output. `training`: batch normalization uses the
// batch's statistics. Shape errors name the layer.
Tensor buildLayers(const NetDescription& description, Graph& graph, Tensor images, bool training, const ParameterSource& parameter,
                   const std::string& source);

}  // namespace glnet
