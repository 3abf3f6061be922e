#include "convert/OnnxExport.h"

#include "base/AtomicFile.h"
#include "base/check.h"

#include <onnx/onnx_pb.h>

#include <map>
#include <sstream>

namespace glnet {
namespace {

constexpr std::int64_t exportedOpset = 17;

// Builds the graph node by node; tensor names are the layers' (and their parameters' for initializers).
class Exporter {
 public:
  Exporter(const Network& network, onnx::GraphProto& graph) : network_(network), graph_(graph) {}

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

void setShape(onnx::ValueInfoProto& value, const std::vector<std::int64_t>& dims) {
  value.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  onnx::TensorShapeProto* shape = value.mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->add_dim()->set_dim_param("batch");
  for (const std::int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

}  // namespace

void writeOnnx(const Network& network, const std::string& path) {
  if (!network.importedFrom.empty()) throw Error(network.importedFrom + ": an imported ONNX model is exported as it was read; copy the file");
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
      const std::string input = outputOf.at(layer.inputs[0]);
      std::size_t outputRank = rank.at(input);
      std::string out;
      if (layer.kind == "conv") {
        out = exporter.conv(layer.name, input, layer.kernel, layer.stride, layer.padding, layer.groups, layer.activation, layer.name);
      } else if (layer.kind == "dense") {
        out = exporter.dense(layer.name, input, outputRank > 2, layer.activation, layer.name);
        outputRank = 2;
      } else if (layer.kind == "batchnorm") {
        for (const char* suffix : {".weight", ".bias", ".running_mean", ".running_var"}) exporter.initializer(layer.name + suffix);
        onnx::NodeProto& n = exporter.node("BatchNormalization", {input, layer.name + ".weight", layer.name + ".bias",
                                                                  layer.name + ".running_mean", layer.name + ".running_var"}, layer.name);
        Exporter::real(n, "epsilon", layer.epsilon);
        Exporter::real(n, "momentum", 1.0f - layer.momentum);  // ONNX weighs the running value, PyTorch the batch's
        out = layer.name;
      } else if (layer.kind == "relu" || layer.kind == "tanh" || layer.kind == "sigmoid") {
        out = exporter.activation(parseActivation(layer.kind), input, layer.name);
      } else if (layer.kind == "silu") {  // no SiLU op before opset 22: x·sigmoid(x), as PyTorch exports it
        exporter.node("Sigmoid", {input}, layer.name + ".sigmoid");
        out = exporter.node("Mul", {input, layer.name + ".sigmoid"}, layer.name).output(0);
      } else if (layer.kind == "gelu") {  // Gelu is opset 20: x·(1 + erf(x/√2))/2, as PyTorch exports it at 17
        exporter.constant(layer.name + ".sqrt2", 1.41421356f);
        exporter.constant(layer.name + ".one", 1.0f);
        exporter.constant(layer.name + ".half", 0.5f);
        exporter.node("Div", {input, layer.name + ".sqrt2"}, layer.name + ".scaled");
        exporter.node("Erf", {layer.name + ".scaled"}, layer.name + ".erf");
        exporter.node("Add", {layer.name + ".erf", layer.name + ".one"}, layer.name + ".shifted");
        exporter.node("Mul", {input, layer.name + ".shifted"}, layer.name + ".product");
        out = exporter.node("Mul", {layer.name + ".product", layer.name + ".half"}, layer.name).output(0);
      } else if (layer.kind == "hardswish") {
        out = exporter.node("HardSwish", {input}, layer.name).output(0);
      } else if (layer.kind == "add") {
        out = exporter.node("Add", {input, outputOf.at(layer.inputs[1])}, layer.name).output(0);
      } else if (layer.kind == "concat") {
        std::vector<std::string> inputs;
        for (const std::string& name : layer.inputs) inputs.push_back(outputOf.at(name));
        Exporter::integer(exporter.node("Concat", inputs, layer.name), "axis", 1);
        out = layer.name;
      } else if (layer.kind == "dropout") {  // training_mode defaults to false: the identity when run
        exporter.constant(layer.name + ".ratio", layer.rate);
        out = exporter.node("Dropout", {input, layer.name + ".ratio"}, layer.name).output(0);
      } else if (layer.kind == "maxpool" || layer.kind == "avgpool") {
        out = exporter.pool(layer.kind == "maxpool" ? "MaxPool" : "AveragePool", input, layer.kernel, layer.stride, layer.padding, layer.name);
      } else if (layer.kind == "globalavgpool") {
        out = exporter.node("GlobalAveragePool", {input}, layer.name).output(0);
      } else {
        GLNET_ASSERT(layer.kind == "flatten", "every kind of layer is exported");
        Exporter::integer(exporter.node("Flatten", {input}, layer.name), "axis", 1);
        out = layer.name;
        outputRank = 2;
      }
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
