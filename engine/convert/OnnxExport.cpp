#include "convert/OnnxExport.h"

#include "base/AtomicFile.h"
#include "base/check.h"

#include <onnx/onnx_pb.h>

#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

namespace glnet {
namespace {

constexpr std::int64_t exportedOpset = 17;

// Builds the graph node by node; tensor names are the layers' (and their parameters' for initializers).
class Exporter {
 public:
  Exporter(const Network& network, onnx::GraphProto& graph) : network_(network), graph_(graph) {}

  const std::vector<std::int64_t>& parameterShape(const std::string& name) const { return network_.parameters.at(name).shape; }

  void initializer(const std::string& name) {
    const HostTensor& tensor = network_.parameters.at(name);
    onnx::TensorProto* proto = graph_.add_initializer();
    proto->set_name(name);
    proto->set_data_type(onnx::TensorProto::FLOAT);
    for (const std::int64_t d : tensor.shape) proto->add_dims(d);
    proto->set_raw_data(std::string(reinterpret_cast<const char*>(tensor.values.data()), tensor.values.size() * sizeof(float)));
  }

  // A scalar constant as an initializer named `name`.
  void constant(const std::string& name, float value) {
    onnx::TensorProto* proto = graph_.add_initializer();
    proto->set_name(name);
    proto->set_data_type(onnx::TensorProto::FLOAT);
    proto->add_float_data(value);
  }

  // A 1-D int64 constant (shapes, axes) as an initializer named `name`; a scalar when not `vector`.
  void integers(const std::string& name, const std::vector<std::int64_t>& values, bool vector = true) {
    onnx::TensorProto* proto = graph_.add_initializer();
    proto->set_name(name);
    proto->set_data_type(onnx::TensorProto::INT64);
    if (vector) proto->add_dims(static_cast<std::int64_t>(values.size()));
    for (const std::int64_t v : values) proto->add_int64_data(v);
  }

  // A node of `op` reading `inputs`, writing `output`.
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs, const std::string& output) {
    onnx::NodeProto* proto = graph_.add_node();
    proto->set_op_type(op);
    proto->set_name(output);
    for (const std::string& input : inputs) proto->add_input(input);
    proto->add_output(output);
    return *proto;
  }

  static void ints(onnx::NodeProto& node, const std::string& name, const std::vector<std::int64_t>& values) {
    onnx::AttributeProto* attribute = node.add_attribute();
    attribute->set_name(name);
    attribute->set_type(onnx::AttributeProto::INTS);
    for (const std::int64_t v : values) attribute->add_ints(v);
  }
  static void integer(onnx::NodeProto& node, const std::string& name, std::int64_t value) {
    onnx::AttributeProto* attribute = node.add_attribute();
    attribute->set_name(name);
    attribute->set_type(onnx::AttributeProto::INT);
    attribute->set_i(value);
  }
  static void real(onnx::NodeProto& node, const std::string& name, float value) {
    onnx::AttributeProto* attribute = node.add_attribute();
    attribute->set_name(name);
    attribute->set_type(onnx::AttributeProto::FLOAT);
    attribute->set_f(value);
  }

  // The activation after `input` as its own node, or `input` itself for none.
  std::string activation(Activation kind, const std::string& input, const std::string& output) {
    if (kind == Activation::none) return input;
    static const std::map<Activation, const char*> ops = {{Activation::relu, "Relu"}, {Activation::tanh, "Tanh"}, {Activation::sigmoid, "Sigmoid"}};
    node(ops.at(kind), {input}, output);
    return output;
  }

  std::string conv(const std::string& name, const std::string& input, std::uint32_t kernel, std::uint32_t stride, std::uint32_t padding,
                   std::uint32_t groups, Activation act, const std::string& output) {
    initializer(name + ".weight");
    initializer(name + ".bias");
    const std::string convolved = act == Activation::none ? output : output + ".conv";
    onnx::NodeProto& n = node("Conv", {input, name + ".weight", name + ".bias"}, convolved);
    ints(n, "kernel_shape", {kernel, kernel});
    ints(n, "strides", {stride, stride});
    ints(n, "pads", {padding, padding, padding, padding});
    integer(n, "group", groups);
    return activation(act, convolved, output);
  }

  std::string dense(const std::string& name, std::string input, bool flatten, Activation act, const std::string& output) {
    if (flatten) {
      integer(node("Flatten", {input}, output + ".flatten"), "axis", 1);
      input = output + ".flatten";
    }
    initializer(name + ".weight");
    initializer(name + ".bias");
    const std::string product = act == Activation::none ? output : output + ".gemm";
    integer(node("Gemm", {input, name + ".weight", name + ".bias"}, product), "transB", 1);
    return activation(act, product, output);
  }

  // x·Wᵀ + b along the last axis of an input of any rank (PyTorch's Linear, as it exports one on [N, S, E]: MatMul and
  // Add), W [out, in] the parameter `weight`, b `bias`; then the activation.
  std::string linear(const std::string& weight, const std::string& bias, const std::string& input, Activation act, const std::string& output) {
    initializer(weight);
    initializer(bias);
    ints(node("Transpose", {weight}, output + ".weight_t"), "perm", {1, 0});
    node("MatMul", {input, output + ".weight_t"}, output + ".product");
    const std::string sum = act == Activation::none ? output : output + ".sum";
    node("Add", {output + ".product", bias}, sum);
    return activation(act, sum, output);
  }

  std::string pool(const std::string& op, const std::string& input, std::uint32_t kernel, std::uint32_t stride, std::uint32_t padding,
                   const std::string& output) {
    onnx::NodeProto& n = node(op, {input}, output);
    ints(n, "kernel_shape", {kernel, kernel});
    ints(n, "strides", {stride, stride});
    ints(n, "pads", {padding, padding, padding, padding});
    if (op == "AveragePool") integer(n, "count_include_pad", 0);
    return output;
  }

 private:
  const Network& network_;
  onnx::GraphProto& graph_;
};

// How each kind of described layer is written: its nodes from `inputs` (the tensors of the layer's inputs), named after
// the layer; returns the tensor holding its output, and sets `rank` (the input's) to the output's.
using Inputs = std::vector<std::string>;

std::string writeConv(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t&) {
  return e.conv(layer.name, inputs[0], layer.kernel, layer.stride, layer.padding, layer.groups, layer.activation, layer.name);
}

std::string writeDense(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t& rank) {
  const std::string out = e.dense(layer.name, inputs[0], rank > 2, layer.activation, layer.name);
  rank = 2;
  return out;
}

std::string writeLinear(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t&) {
  return e.linear(layer.name + ".weight", layer.name + ".bias", inputs[0], layer.activation, layer.name);
}

// As PyTorch's MultiheadAttention exports, op by op, in the form the importer fuses into one attention again: the
// leading axes of [lead..., S, E] as one batch axis, the projection to Q, K and V, split into heads, softmax(Q·Kᵀ/√D)
// (causal: Where(keep, scores, −inf) with keep the lower triangle, as GPT-2's export) times V, the heads merged and
// projected back, then the leading axes restored. `rank` stays.
std::string writeAttention(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t& rank) {
  const std::string& n = layer.name;
  const std::int64_t width = e.parameterShape(n + ".out_proj.weight")[0], heads = layer.heads, features = width / heads;
  std::string x = inputs[0];
  if (rank > 3) {
    // [lead..., S, E] → [−1, S, E]: S from the input's shape.
    e.node("Shape", {x}, n + ".input_shape");
    e.integers(n + ".sequence_start", {-2});
    e.integers(n + ".sequence_end", {-1});
    e.node("Slice", {n + ".input_shape", n + ".sequence_start", n + ".sequence_end"}, n + ".sequence");
    e.integers(n + ".all_items", {-1});
    e.integers(n + ".width", {width});
    Exporter::integer(e.node("Concat", {n + ".all_items", n + ".sequence", n + ".width"}, n + ".rows_shape"), "axis", 0);
    x = e.node("Reshape", {x, n + ".rows_shape"}, n + ".rows").output(0);
  }
  const std::string qkv = e.linear(n + ".in_proj_weight", n + ".in_proj_bias", x, Activation::none, n + ".qkv");
  e.integers(n + ".split_shape", {0, 0, 3, heads, features});  // 0 keeps the input's size
  e.node("Reshape", {qkv, n + ".split_shape"}, n + ".split");
  Exporter::ints(e.node("Transpose", {n + ".split"}, n + ".parts"), "perm", {2, 0, 3, 1, 4});  // [3, B, H, S, D]
  onnx::NodeProto& parts = e.node("Split", {n + ".parts"}, n + ".q3");
  parts.add_output(n + ".k3");
  parts.add_output(n + ".v3");
  Exporter::integer(parts, "axis", 0);
  e.integers(n + ".first_axis", {0});
  for (const char* part : {"q", "k", "v"}) e.node("Squeeze", {n + "." + part + "3", n + ".first_axis"}, n + "." + part);
  Exporter::ints(e.node("Transpose", {n + ".k"}, n + ".k_t"), "perm", {0, 1, 3, 2});
  e.node("MatMul", {n + ".q", n + ".k_t"}, n + ".products");
  e.constant(n + ".scale", 1.0f / std::sqrt(static_cast<float>(features)));
  std::string scores = e.node("Mul", {n + ".products", n + ".scale"}, n + ".scores").output(0);
  if (inputs.size() == 2) {
    // The key mask [lead..., S] as [B, 1, 1, S], added to every head's and query's scores.
    std::string mask = inputs[1];
    if (rank > 3) {
      e.integers(n + ".mask_middle", {1, 1});
      Exporter::integer(e.node("Concat", {n + ".all_items", n + ".mask_middle", n + ".sequence"}, n + ".mask_shape"), "axis", 0);
      mask = e.node("Reshape", {mask, n + ".mask_shape"}, n + ".key_mask").output(0);
    } else {
      e.integers(n + ".mask_axes", {1, 2});
      mask = e.node("Unsqueeze", {mask, n + ".mask_axes"}, n + ".key_mask").output(0);
    }
    scores = e.node("Add", {scores, mask}, n + ".masked_scores").output(0);
  }
  if (layer.causal) {
    // [S, S] from Q's shape, not the scores': a second reader of the scores would keep the attention from fusing.
    e.node("Shape", {n + ".q"}, n + ".q_shape");
    e.integers(n + ".positions_start", {-2});
    e.integers(n + ".positions_end", {-1});
    e.node("Slice", {n + ".q_shape", n + ".positions_start", n + ".positions_end"}, n + ".positions");
    Exporter::integer(e.node("Concat", {n + ".positions", n + ".positions"}, n + ".square"), "axis", 0);
    onnx::NodeProto& ones = e.node("ConstantOfShape", {n + ".square"}, n + ".ones");
    onnx::AttributeProto* value = ones.add_attribute();
    value->set_name("value");
    value->set_type(onnx::AttributeProto::TENSOR);
    value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    value->mutable_t()->add_dims(1);
    value->mutable_t()->add_float_data(1.0f);
    e.integers(n + ".diagonal", {0});
    Exporter::integer(e.node("Trilu", {n + ".ones", n + ".diagonal"}, n + ".earlier"), "upper", 0);
    Exporter::integer(e.node("Cast", {n + ".earlier"}, n + ".keep"), "to", onnx::TensorProto::BOOL);
    e.constant(n + ".lowest", -std::numeric_limits<float>::infinity());
    scores = e.node("Where", {n + ".keep", scores, n + ".lowest"}, n + ".causal_scores").output(0);
  }
  Exporter::integer(e.node("Softmax", {scores}, n + ".weights"), "axis", -1);
  e.node("MatMul", {n + ".weights", n + ".v"}, n + ".heads");
  Exporter::ints(e.node("Transpose", {n + ".heads"}, n + ".by_position"), "perm", {0, 2, 1, 3});  // [B, S, H, D]
  e.integers(n + ".merge_shape", {0, 0, width});
  e.node("Reshape", {n + ".by_position", n + ".merge_shape"}, n + ".merged");
  if (rank == 3) return e.linear(n + ".out_proj.weight", n + ".out_proj.bias", n + ".merged", Activation::none, n);
  e.linear(n + ".out_proj.weight", n + ".out_proj.bias", n + ".merged", Activation::none, n + ".projected");
  return e.node("Reshape", {n + ".projected", n + ".input_shape"}, n).output(0);
}

std::string writeBatchnorm(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t&) {
  for (const char* suffix : {".weight", ".bias", ".running_mean", ".running_var"}) e.initializer(layer.name + suffix);
  onnx::NodeProto& n = e.node("BatchNormalization", {inputs[0], layer.name + ".weight", layer.name + ".bias", layer.name + ".running_mean",
                                                     layer.name + ".running_var"}, layer.name);
  Exporter::real(n, "epsilon", layer.epsilon);
  Exporter::real(n, "momentum", 1.0f - layer.momentum);  // ONNX weighs the running value, PyTorch the batch's
  return layer.name;
}

// LayerNormalization (opset 17) along the last axis.
std::string writeLayernorm(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t&) {
  for (const char* suffix : {".weight", ".bias"}) e.initializer(layer.name + suffix);
  onnx::NodeProto& n = e.node("LayerNormalization", {inputs[0], layer.name + ".weight", layer.name + ".bias"}, layer.name);
  Exporter::integer(n, "axis", -1);
  Exporter::real(n, "epsilon", layer.epsilon);
  return layer.name;
}

// relu, tanh and sigmoid: Relu, Tanh and Sigmoid.
std::string writeActivation(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t&) {
  return e.activation(parseActivation(layer.kind), inputs[0], layer.name);
}

std::string writeHardswish(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t&) {
  return e.node("HardSwish", {inputs[0]}, layer.name).output(0);
}

// No SiLU op before opset 22: x·sigmoid(x), as PyTorch exports it.
std::string writeSilu(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t&) {
  e.node("Sigmoid", {inputs[0]}, layer.name + ".sigmoid");
  return e.node("Mul", {inputs[0], layer.name + ".sigmoid"}, layer.name).output(0);
}

// Gelu is opset 20: x·(1 + erf(x/√2))/2, as PyTorch exports it at 17; the tanh form as
// x·(1 + tanh(√(2/π)·(x + 0.044715·x·x·x)))/2.
std::string writeGelu(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t&) {
  const std::string& n = layer.name;
  e.constant(n + ".one", 1.0f);
  e.constant(n + ".half", 0.5f);
  if (layer.tanhApproximation) {
    e.constant(n + ".cubic", 0.044715f);
    e.constant(n + ".scale", 0.7978845608f);
    e.node("Mul", {inputs[0], inputs[0]}, n + ".square");
    e.node("Mul", {n + ".square", inputs[0]}, n + ".cube");
    e.node("Mul", {n + ".cube", n + ".cubic"}, n + ".cubic_term");
    e.node("Add", {inputs[0], n + ".cubic_term"}, n + ".polynomial");
    e.node("Mul", {n + ".polynomial", n + ".scale"}, n + ".scaled");
    e.node("Tanh", {n + ".scaled"}, n + ".curve");
  } else {
    e.constant(n + ".sqrt2", 1.41421356f);
    e.node("Div", {inputs[0], n + ".sqrt2"}, n + ".scaled");
    e.node("Erf", {n + ".scaled"}, n + ".curve");
  }
  e.node("Add", {n + ".curve", n + ".one"}, n + ".shifted");
  e.node("Mul", {inputs[0], n + ".shifted"}, n + ".product");
  return e.node("Mul", {n + ".product", n + ".half"}, n).output(0);
}

std::string writeAdd(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t&) {
  return e.node("Add", {inputs[0], inputs[1]}, layer.name).output(0);
}

std::string writeConcat(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t&) {
  Exporter::integer(e.node("Concat", inputs, layer.name), "axis", 1);
  return layer.name;
}

std::string writeMaxpool(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t&) {
  return e.pool("MaxPool", inputs[0], layer.kernel, layer.stride, layer.padding, layer.name);
}

std::string writeAvgpool(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t&) {
  return e.pool("AveragePool", inputs[0], layer.kernel, layer.stride, layer.padding, layer.name);
}

std::string writeGlobalavgpool(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t&) {
  return e.node("GlobalAveragePool", {inputs[0]}, layer.name).output(0);
}

std::string writeFlatten(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t& rank) {
  Exporter::integer(e.node("Flatten", {inputs[0]}, layer.name), "axis", 1);
  rank = 2;
  return layer.name;
}

// [N, C, H, W] → [N, H·W, C] as PyTorch's x.flatten(2).transpose(1, 2) exports: Reshape, Transpose.
std::string writeTokens(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t& rank) {
  e.integers(layer.name + ".shape", {0, 0, -1});
  e.node("Reshape", {inputs[0], layer.name + ".shape"}, layer.name + ".flat");
  Exporter::ints(e.node("Transpose", {layer.name + ".flat"}, layer.name), "perm", {0, 2, 1});
  rank = 3;
  return layer.name;
}

// x + weight [S, E], broadcast over the leading axes.
std::string writePosition(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t&) {
  e.initializer(layer.name + ".weight");
  return e.node("Add", {inputs[0], layer.name + ".weight"}, layer.name).output(0);
}

// Gather of the table's rows by the ids, which ONNX takes as integers.
std::string writeEmbedding(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t& rank) {
  e.initializer(layer.name + ".weight");
  Exporter::integer(e.node("Cast", {inputs[0]}, layer.name + ".ids"), "to", onnx::TensorProto::INT64);
  ++rank;
  return e.node("Gather", {layer.name + ".weight", layer.name + ".ids"}, layer.name).output(0);
}

// Where(Equal(ids, pad), −inf, 0).
std::string writeMask(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t&) {
  e.constant(layer.name + ".pad", static_cast<float>(layer.pad));
  e.constant(layer.name + ".hidden", -std::numeric_limits<float>::infinity());
  e.constant(layer.name + ".seen", 0.0f);
  e.node("Equal", {inputs[0], layer.name + ".pad"}, layer.name + ".padding");
  return e.node("Where", {layer.name + ".padding", layer.name + ".hidden", layer.name + ".seen"}, layer.name).output(0);
}

// x[..., 0, :] as PyTorch exports it: Gather of index 0 along the positions.
std::string writeFirst(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t& rank) {
  e.integers(layer.name + ".index", {0}, false);
  Exporter::integer(e.node("Gather", {inputs[0], layer.name + ".index"}, layer.name), "axis", static_cast<std::int64_t>(rank) - 2);
  --rank;
  return layer.name;
}

// training_mode defaults to false: the identity when run.
std::string writeDropout(Exporter& e, const LayerDescription& layer, const Inputs& inputs, std::size_t&) {
  e.constant(layer.name + ".ratio", layer.rate);
  return e.node("Dropout", {inputs[0], layer.name + ".ratio"}, layer.name).output(0);
}

// One row per LayerKind, in its order: how a layer of the kind is written.
struct Writing {
  LayerKind kind;
  std::string (*write)(Exporter& exporter, const LayerDescription& layer, const Inputs& inputs, std::size_t& rank);
};
constexpr std::array<Writing, layerKindCount> writings{{
    {LayerKind::conv, writeConv},
    {LayerKind::dense, writeDense},
    {LayerKind::linear, writeLinear},
    {LayerKind::attention, writeAttention},
    {LayerKind::batchnorm, writeBatchnorm},
    {LayerKind::layernorm, writeLayernorm},
    {LayerKind::relu, writeActivation},
    {LayerKind::tanh, writeActivation},
    {LayerKind::sigmoid, writeActivation},
    {LayerKind::hardswish, writeHardswish},
    {LayerKind::silu, writeSilu},
    {LayerKind::gelu, writeGelu},
    {LayerKind::add, writeAdd},
    {LayerKind::concat, writeConcat},
    {LayerKind::maxpool, writeMaxpool},
    {LayerKind::avgpool, writeAvgpool},
    {LayerKind::globalavgpool, writeGlobalavgpool},
    {LayerKind::flatten, writeFlatten},
    {LayerKind::tokens, writeTokens},
    {LayerKind::position, writePosition},
    {LayerKind::embedding, writeEmbedding},
    {LayerKind::mask, writeMask},
    {LayerKind::first, writeFirst},
    {LayerKind::dropout, writeDropout},
}};
static_assert(oneRowPerKind(writings), "writings holds one row per LayerKind, in its order");

void setShape(onnx::ValueInfoProto& value, const std::vector<std::int64_t>& dims) {
  value.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  onnx::TensorShapeProto* shape = value.mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->add_dim()->set_dim_param("batch");
  for (const std::int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

}  // namespace

void writeOnnx(const Network& network, const std::string& path) {
  if (network.imported) throw Error(network.imported->path() + ": an imported ONNX model is exported as it was read; copy the file");
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("glnet");
  model.set_producer_version(GLNET_VERSION);
  model.add_opset_import()->set_version(exportedOpset);
  const auto metadata = [&](const std::string& key, const std::string& value) {
    onnx::StringStringEntryProto* entry = model.add_metadata_props();
    entry->set_key(key);
    entry->set_value(value);
  };
  for (const auto& [key, value] : network.usageMetadata()) metadata(key, value);
  onnx::GraphProto& graph = *model.mutable_graph();
  graph.set_name(network.architecture);
  setShape(*graph.add_input(), std::vector<std::int64_t>(network.inputShape.begin(), network.inputShape.end()));
  graph.mutable_input(0)->set_name("images");
  Exporter exporter(network, graph);
  std::string last = "images";
  if (network.description) {
    // Each layer's output keeps the layer's name; an image input is [C, H, W].
    std::map<std::string, std::size_t> rank{{"images", network.inputShape.size() + 1}};
    std::map<std::string, std::string> outputOf{{"input", "images"}};
    for (const LayerDescription& layer : network.description->layers) {
      Inputs inputs;
      for (const std::string& name : layer.inputs) inputs.push_back(outputOf.at(name));
      std::size_t outputRank = rank.at(inputs[0]);
      const std::string out = writings[static_cast<std::size_t>(layerKindOf(layer))].write(exporter, layer, inputs, outputRank);
      outputOf[layer.name] = out;
      rank[out] = outputRank;
      last = out;
    }
  } else {
    std::size_t rank = network.inputShape.size() + 1;
    int pools = 0, flattens = 0;
    for (const LayerSpec& layer : network.layers) {
      switch (layer.kind) {
        case LayerSpec::Kind::conv:
          last = exporter.conv(layer.name, last, layer.kernel, 1, layer.padding, 1, layer.activation, layer.name);
          break;
        case LayerSpec::Kind::pool:
          last = exporter.pool("MaxPool", last, 2, 2, 0, "pool" + std::to_string(++pools));
          break;
        case LayerSpec::Kind::flatten:
          Exporter::integer(exporter.node("Flatten", {last}, "flatten" + std::to_string(++flattens)), "axis", 1);
          last = "flatten" + std::to_string(flattens);
          rank = 2;
          break;
        case LayerSpec::Kind::dense:
          last = exporter.dense(layer.name, last, rank > 2, layer.activation, layer.name);
          rank = 2;
          break;
      }
    }
  }
  // The graph's output is named "logits" (an Identity when the last layer has its own name).
  exporter.node("Identity", {last}, "logits");
  onnx::ValueInfoProto& output = *graph.add_output();
  output.set_name("logits");
  setShape(output, {static_cast<std::int64_t>(network.classes())});
  std::string bytes;
  if (!model.SerializeToString(&bytes)) throw Error(path + ": the ONNX model does not serialize (over 2 GiB?)");
  writeFileAtomically(path, bytes);
}

}  // namespace glnet
