#include "formats/OnnxProto.h"

#include "gl/FileInput.h"
#include "gl/check.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

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
  const std::string file = (std::filesystem::path(path).parent_path() / relative).string();
  const std::string bytes = readRegularFile(file, largestOnnxBytes);
  if (offset > bytes.size() || (hasLength && length > bytes.size() - offset)) {
    throw Error(path + ": tensor " + tensor.name() + ": its external data runs past the end of " + file);
  }
  return bytes.substr(offset, hasLength ? length : std::string::npos);
}

}  // namespace

onnx::ModelProto readOnnxModelProto(const std::string& path) {
  const std::string bytes = readRegularFile(path, largestOnnxBytes);
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) throw Error(path + ": not an ONNX model (the protobuf does not parse)");
  const std::int64_t opset = onnxOpset(model);
  if (opset == 0) throw Error(path + ": the model imports no opset of the default ONNX domain");
  if (opset < 6 || opset > 18) throw Error(path + ": opset " + std::to_string(opset) + "; glnet reads opsets 6 to 18");
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
