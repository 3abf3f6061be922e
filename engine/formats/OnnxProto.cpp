#include "formats/OnnxProto.h"

#include "base/FileInput.h"
#include "base/check.h"

#include <onnx/defs/schema.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

namespace glnet {
namespace onnxformat {

std::string describe(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::int64_t integer(const Attributes& attributes, const std::string& name, std::int64_t otherwise) {
  const auto found = attributes.find(name);
  return found == attributes.end() ? otherwise : found->second->i();
}

double real(const Attributes& attributes, const std::string& name, double otherwise) {
  const auto found = attributes.find(name);
  return found == attributes.end() ? otherwise : found->second->f();
}

std::vector<std::int64_t> integers(const Attributes& attributes, const std::string& name) {
  const auto found = attributes.find(name);
  if (found == attributes.end()) return {};
  return {found->second->ints().begin(), found->second->ints().end()};
}

std::string varianceProblem(const std::vector<double>& variance, double epsilon) {
  for (std::size_t c = 0; c < variance.size(); ++c) {
    if (!(variance[c] + epsilon > 0)) return "var + epsilon is not positive for channel " + std::to_string(c);
  }
  return "";
}

}  // namespace onnxformat

namespace {

using onnxformat::describe;

// A tensor stored beside the model (the format's external data: location, offset, length), read with the
// same checks as the model file: a regular file in the model's directory, the range inside it.
std::string externalData(const onnx::TensorProto& tensor, const std::string& path) {
  std::string location;
  std::uint64_t offset = 0, length = 0;
  bool hasLength = false;
  for (const onnx::StringStringEntryProto& entry : tensor.external_data()) {
    try {
      if (entry.key() == "location") location = entry.value();
      if (entry.key() == "offset") offset = std::stoull(entry.value());
      if (entry.key() == "length") length = std::stoull(entry.value()), hasLength = true;
    } catch (const std::exception&) {
      throw Error(path + ": tensor " + tensor.name() + " has a bad external_data " + entry.key());
    }
  }
  const std::filesystem::path relative(location);
  if (location.empty() || relative.is_absolute() ||
      std::any_of(relative.begin(), relative.end(), [](const std::filesystem::path& part) { return part == ".."; })) {
    throw Error(path + ": tensor " + tensor.name() + " names external data '" + location.substr(0, 100) +
                "'; it must be a file beside the model");
  }
  // The text alone does not keep the data beside the model: a symbolic link there (or a folder of links) may lead
  // anywhere. The real path of the data must lie in the real folder of the model.
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path folder = fs::weakly_canonical(fs::absolute(path).parent_path(), error);
  const fs::path real = error ? fs::path() : fs::weakly_canonical(folder / relative, error);
  const fs::path inside = error ? fs::path() : real.lexically_relative(folder);
  if (error || inside.empty() || *inside.begin() == ".." || inside == ".") {
    throw Error(path + ": tensor " + tensor.name() + " names external data '" + location.substr(0, 100) +
                "', which leads outside the model's folder (a symbolic link); it must be a file beside the model");
  }
  const std::string file = real.string();
  const std::string bytes = readRegularFile(file, largestOnnxBytes);
  if (offset > bytes.size() || (hasLength && length > bytes.size() - offset)) {
    throw Error(path + ": tensor " + tensor.name() + ": its external data runs past the end of " + file);
  }
  return bytes.substr(offset, hasLength ? length : std::string::npos);
}

const char* attributeTypeName(int type) {
  switch (type) {
    case onnx::AttributeProto::FLOAT: return "a float";
    case onnx::AttributeProto::INT: return "an integer";
    case onnx::AttributeProto::STRING: return "a string";
    case onnx::AttributeProto::TENSOR: return "a tensor";
    case onnx::AttributeProto::GRAPH: return "a graph";
    case onnx::AttributeProto::FLOATS: return "a list of floats";
    case onnx::AttributeProto::INTS: return "a list of integers";
    case onnx::AttributeProto::STRINGS: return "a list of strings";
    default: return "of another type";
  }
}

// ONNX's own rules for a graph, as onnx.checker checks them, before either reader trusts it: every value is named
// once (graph inputs, initializers, node outputs), every node reads only values defined before it (topological
// order, hence no cycle), and every node of the default domain takes its op schema's inputs, outputs and
// attributes at this opset, each attribute of the schema's type, the required ones given. A reader that met a name
// twice would silently keep one of them, and one that skipped a node of a cycle would lose it.
void checkGraph(const onnx::ModelProto& model, std::int64_t opset, const std::string& path) {
  const onnx::GraphProto& graph = model.graph();
  std::set<std::string> defined, inputs, initializers, produced;
  for (const onnx::ValueInfoProto& input : graph.input()) {
    if (input.name().empty()) throw Error(path + ": a graph input has no name");
    if (!inputs.insert(input.name()).second) throw Error(path + ": two graph inputs are named '" + input.name() + "'");
  }
  for (const onnx::TensorProto& initializer : graph.initializer()) {
    if (!initializers.insert(initializer.name()).second) throw Error(path + ": two initializers are named '" + initializer.name() + "'");
  }
  defined = inputs;
  defined.insert(initializers.begin(), initializers.end());  // older exporters list initializers as inputs too
  for (const onnx::NodeProto& node : graph.node()) produced.insert(node.output().begin(), node.output().end());
  // The schemas of the ONNX release glnet is built with; a newer opset's ops may take more inputs and attributes.
  const int known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at(onnx::ONNX_DOMAIN).second;
  for (const onnx::NodeProto& node : graph.node()) {
    const auto refuse = [&](const std::string& why) {
      throw Error(path + ": node '" + (node.name().empty() && node.output_size() ? node.output(0) : node.name()) + "' (" + node.op_type() +
                  ", opset " + std::to_string(opset) + "): " + why);
    };
    for (const std::string& name : node.input()) {
      if (name.empty() || defined.count(name)) continue;
      refuse("input '" + name + "' is " +
             (produced.count(name) ? "made by this node or a later one; ONNX nodes come in topological order, without cycles"
                                   : "made by no node, initializer or graph input"));
    }
    for (const std::string& name : node.output()) {
      if (!name.empty() && !defined.insert(name).second) {
        refuse("its output '" + name + "' is already defined (by " +
               (inputs.count(name) ? "a graph input" : initializers.count(name) ? "an initializer" : "another node") + "); ONNX names each value once");
      }
    }
    if (!node.domain().empty() && node.domain() != "ai.onnx") continue;
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(opset), onnx::ONNX_DOMAIN);
    if (!schema) continue;  // no op of ONNX at this opset: the readers refuse it by name
    const bool current = opset <= known;
    if (current && (node.input_size() < schema->min_input() || node.input_size() > schema->max_input())) {
      refuse(std::to_string(node.input_size()) + " inputs; the op takes " + std::to_string(schema->min_input()) +
             (schema->max_input() == schema->min_input() ? "" : " to " + std::to_string(std::min(schema->max_input(), 1 << 20))));
    }
    if (current && (node.output_size() < schema->min_output() || node.output_size() > schema->max_output())) {
      refuse(std::to_string(node.output_size()) + " outputs; the op gives " + std::to_string(schema->min_output()) +
             (schema->max_output() == schema->min_output() ? "" : " to " + std::to_string(std::min(schema->max_output(), 1 << 20))));
    }
    std::set<std::string> given;
    for (const onnx::AttributeProto& attribute : node.attribute()) {
      if (!given.insert(attribute.name()).second) refuse("attribute " + attribute.name() + " is given twice");
      const auto found = schema->attributes().find(attribute.name());
      if (found == schema->attributes().end()) {
        if (current) refuse("attribute " + attribute.name() + " is not one the op takes at this opset");
        continue;
      }
      if (attribute.type() != static_cast<int>(found->second.type)) {
        refuse("attribute " + attribute.name() + " must be " + attributeTypeName(static_cast<int>(found->second.type)) + ", not " +
               attributeTypeName(attribute.type()));
      }
    }
    for (const auto& [name, attribute] : schema->attributes()) {
      if (attribute.required && !given.count(name)) refuse("the required attribute " + name + " is missing");
    }
  }
  for (const onnx::ValueInfoProto& output : graph.output()) {
    if (!defined.count(output.name())) throw Error(path + ": the graph output '" + output.name() + "' is made by no node, initializer or graph input");
  }
}

}  // namespace

onnx::ModelProto readOnnxModelProto(const std::string& path) {
  const std::string bytes = readRegularFile(path, largestOnnxBytes);
  if (bytes.empty()) throw Error(path + ": the file is empty; no ONNX model");
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) throw Error(path + ": not an ONNX model (the protobuf does not parse)");
  const std::int64_t opset = onnxOpset(model);
  if (opset == 0) throw Error(path + ": the model imports no opset of the default ONNX domain");
  if (opset < 6 || opset > 18) throw Error(path + ": opset " + std::to_string(opset) + "; glnet reads opsets 6 to 18");
  checkGraph(model, opset, path);
  return model;
}

std::int64_t onnxOpset(const onnx::ModelProto& model) {
  std::int64_t opset = 0;
  for (const onnx::OperatorSetIdProto& set : model.opset_import()) {
    if (set.domain().empty() || set.domain() == "ai.onnx") opset = set.version();
  }
  return opset;
}

OnnxConstant readOnnxTensor(const onnx::TensorProto& tensor, const std::string& path) {
  OnnxConstant constant;
  for (const std::int64_t d : tensor.dims()) {
    if (d < 0 || d > (std::int64_t{1} << 32)) throw Error(path + ": tensor " + tensor.name() + " has a dimension of " + std::to_string(d));
    constant.shape.push_back(d);
  }
  std::size_t count = 1;
  for (const std::int64_t d : constant.shape) {
    if (d != 0 && count > (std::size_t{1} << 31) / static_cast<std::size_t>(d)) throw Error(path + ": tensor " + tensor.name() + " is too large");
    count *= static_cast<std::size_t>(d);
  }
  std::string external;
  const std::string* raw = tensor.has_raw_data() ? &tensor.raw_data() : nullptr;
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    external = externalData(tensor, path);
    raw = &external;
  }
  // The data must hold exactly the shape's elements, checked before anything is allocated for them.
  const auto element = [&](std::size_t bytes, int typedValues) {
    if (raw && raw->size() != count * bytes) {
      throw Error(path + ": tensor " + tensor.name() + " holds " + std::to_string(raw->size()) + " bytes for shape " +
                  describe(constant.shape));
    }
    if (!raw && static_cast<std::size_t>(typedValues) != count) throw Error(path + ": tensor " + tensor.name() + " has the wrong number of values");
    constant.values.resize(count);
  };
  switch (tensor.data_type()) {
    case onnx::TensorProto::FLOAT:
      element(4, tensor.float_data_size());
      for (std::size_t i = 0; i < count; ++i) {
        float v;
        if (raw) std::memcpy(&v, raw->data() + 4 * i, 4); else v = tensor.float_data(static_cast<int>(i));
        constant.values[i] = v;
      }
      break;
    case onnx::TensorProto::DOUBLE:
      element(8, tensor.double_data_size());
      for (std::size_t i = 0; i < count; ++i) {
        double v;
        if (raw) std::memcpy(&v, raw->data() + 8 * i, 8); else v = tensor.double_data(static_cast<int>(i));
        constant.values[i] = v;
      }
      break;
    case onnx::TensorProto::INT64:
      constant.integer = true;
      element(8, tensor.int64_data_size());
      for (std::size_t i = 0; i < count; ++i) {
        std::int64_t v;
        if (raw) std::memcpy(&v, raw->data() + 8 * i, 8); else v = tensor.int64_data(static_cast<int>(i));
        constant.values[i] = static_cast<double>(v);
      }
      break;
    case onnx::TensorProto::INT32:
      constant.integer = true;
      element(4, tensor.int32_data_size());
      for (std::size_t i = 0; i < count; ++i) {
        std::int32_t v;
        if (raw) std::memcpy(&v, raw->data() + 4 * i, 4); else v = tensor.int32_data(static_cast<int>(i));
        constant.values[i] = v;
      }
      break;
    case onnx::TensorProto::BOOL:  // a training-mode Dropout's training_mode; stored as int32_data when not raw
      constant.integer = true;
      element(1, tensor.int32_data_size());
      for (std::size_t i = 0; i < count; ++i) constant.values[i] = (raw ? static_cast<unsigned char>((*raw)[i]) : tensor.int32_data(static_cast<int>(i))) != 0;
      break;
    default:
      throw Error(path + ": tensor " + tensor.name() + " has ONNX data type " + std::to_string(tensor.data_type()) +
                  "; glnet reads float, double, int32, int64 and bool constants");
  }
  return constant;
}

}  // namespace glnet
