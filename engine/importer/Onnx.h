// ONNX models, as torch.onnx.export writes them, read with ONNX's own protobuf classes (Debian libonnx-dev)
// and made into a glnet inference graph for a bound batch size. The whole model is checked at load, before
// any GPU work: the graph must meet ONNX's rules (as onnx.checker checks them) and every node's op, opset and
// attributes must be ones glnet runs, or the load fails in one line naming the node, its op, the opset and what is
// wrong or not supported. Weights must be finite and non-empty, and external data must lie in the model's folder. Constants (initializers, Constant nodes) stay
// on the host and are folded into the ops that take them (weights, biases, target shapes).
//
// The ops glnet imports, with their opsets, attributes, import, folding and fine-tuning, are the rows of one table,
// importer/OnnxOps.h (`glnet_info --ops` prints it; README's op table is its Markdown). A pointwise function read only
// by the Conv, Gemm or elementwise op before it runs inside that op's kernel.
#pragma once

#include "formats/OnnxFile.h"
#include "graph/Graph.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
}

namespace glnet {

struct OnnxNodeSummary {
  std::string name, opType;
  std::string glnetOp;  // what it became: an op name, "folded" (a constant), "view" or "identity"
  Shape outputShape;    // empty for folded constants
};

struct OnnxModel {
  Graph graph;
  // Every input and output by name, in the model's order; inputName/input and outputName/output are the first.
  std::vector<std::pair<std::string, Tensor>> inputs, outputs;
  std::string inputName, outputName;
  Tensor input, output;
  std::int64_t opset = 0;
  std::string producer;             // e.g. "pytorch 2.1"
  bool dynamicBatch = false;        // the input's first dimension is symbolic
  std::vector<bool> batchedInputs;  // per input: its first dimension is symbolic (takes the bound batch)
  // Per input: uint8 in the file (images that the model's own Cast and arithmetic convert); glnet holds their values as
  // floats 0 to 255.
  std::vector<bool> byteInputs;
  std::vector<OnnxNodeSummary> nodes;
  std::size_t parameterBytes = 0;
  std::map<std::string, std::string> metadata;  // the model's metadata_props (input_mean, input_std, labels, ...)
  // When the graph ends in a row Softmax: the tensor it takes (the logits), else the output itself.
  Tensor logits;
};

// An ONNX file read, parsed and checked once (readOnnxModelProto); readOnnx binds it to any batch size without reading
// the file again, so a runner, a classifier or a network that meets a new batch size needs no second parse (and a file
// replaced meanwhile cannot change the model halfway; weights kept as external data beside it are read at each binding).
// Copies share the parsed model. Throws glnet::Error naming the file.
class ParsedOnnx {
 public:
  explicit ParsedOnnx(std::string path);
  const std::string& path() const { return path_; }
  const onnx::ModelProto& proto() const { return *proto_; }

 private:
  std::string path_;
  std::shared_ptr<const onnx::ModelProto> proto_;
};

// Builds the graph of `model` for `batch` images (where the model's batch dimension is symbolic; a fixed batch must
// equal it). Batch 0 takes the model's own: its fixed batch, or 1 where it is symbolic. Throws glnet::Error naming the
// file and node.
OnnxModel readOnnx(const ParsedOnnx& model, std::uint32_t batch);
// The same for the file at `path`, read and parsed for this one batch size.
OnnxModel readOnnx(const std::string& path, std::uint32_t batch);

}  // namespace glnet
