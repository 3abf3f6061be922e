// What the ONNX reader (Onnx.cpp), the reader of trainable networks (OnnxNetwork.cpp) and the writer share: ONNX's
// protobuf classes, a model file parsed with its opset checked, and its tensors read as numbers.
#pragma once

#include "formats/OnnxFile.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace glnet {

// A tensor's values on the host (an initializer, a Constant node's value, or a constant folded from them).
struct OnnxConstant {
  std::vector<std::int64_t> shape;
  std::vector<double> values;
  bool integer = false;  // int32/int64 data: division truncates, casts round toward zero
  std::size_t elements() const {
    std::size_t count = 1;
    for (const std::int64_t d : shape) count *= static_cast<std::size_t>(d);
    return count;
  }
};

// Reads and parses `path` (at most largestOnnxBytes); throws glnet::Error when it is no ONNX model, its opset of the
// default domain is not 6 to 18, or its graph breaks ONNX's rules (a name defined twice, a node reading what no earlier
// node makes, an attribute of the wrong type or a required one missing): the one check every reader shares.
onnx::ModelProto readOnnxModelProto(const std::string& path);
// The model's opset of the default domain (0: none).
std::int64_t onnxOpset(const onnx::ModelProto& model);
// A float, double, int32, int64 or bool tensor of the model at `path` (external data read from beside it); throws
// glnet::Error naming the tensor when its data does not match its shape.
OnnxConstant readOnnxTensor(const onnx::TensorProto& tensor, const std::string& path);

namespace onnxformat {
std::string describe(const std::vector<std::int64_t>& shape);  // "[1, 3, 224, 224]"
// A node's attributes by name, and their values where given (`otherwise` or empty where not).
using Attributes = std::map<std::string, const onnx::AttributeProto*>;
std::int64_t integer(const Attributes& attributes, const std::string& name, std::int64_t otherwise);
double real(const Attributes& attributes, const std::string& name, double otherwise);
std::vector<std::int64_t> integers(const Attributes& attributes, const std::string& name);
// What is wrong with a BatchNormalization's running variance, empty when nothing: inference divides by
// sqrt(var + epsilon), so it must be positive in every channel, for inference and fine-tuning alike (a fine-tuned model
// would keep the bad channel and its export would be refused).
std::string varianceProblem(const std::vector<double>& variance, double epsilon);
}  // namespace onnxformat

}  // namespace glnet
