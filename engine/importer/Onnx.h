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
  // Per input and axis: the name the file gives a symbolic dimension ("batch", "sequence"; "?" where it gives none),
  // empty for a fixed one. Each symbolic dimension takes the value bound to it.
  std::vector<std::vector<std::string>> inputSymbols;
  // Per input: its element type as NumPy names it (onnxElementName): float32; uint8 (images that the model's own Cast
  // and arithmetic convert); int64, int32 or bool (token ids, masks). The GPU holds every value as a float32: integers
  // exactly up to largestExactInteger (narrowed where they are read, and refused beyond), booleans as 0 and 1.
  std::vector<std::string> inputTypes;
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
  // A model already read from `path` (and checked by readOnnxModelProto), perhaps changed since.
  ParsedOnnx(std::string path, onnx::ModelProto model);
  const std::string& path() const { return path_; }
  const onnx::ModelProto& proto() const { return *proto_; }

 private:
  std::string path_;
  std::shared_ptr<const onnx::ModelProto> proto_;
};

// One shape per graph input (initializers aside), in the model's order.
using InputShapes = std::vector<Shape>;

// Builds the graph of `model` for inputs of `shapes`: each the input's rank, its fixed dimensions as the file gives
// them, and a symbolic dimension named twice (a batch, a sequence length) the same wherever it appears. Shape
// arithmetic on them folds at load, so the graph holds only the tensor work of these shapes. Throws glnet::Error
// naming the file and input or node.
OnnxModel readOnnx(const ParsedOnnx& model, const InputShapes& shapes);
// The same for `batch` images (where the model's batch dimension is symbolic; a fixed batch must equal it): every
// symbolic first dimension takes `batch`, every other symbolic dimension 1. Batch 0 takes the model's own: its fixed
// batch, or 1 where it is symbolic.
OnnxModel readOnnx(const ParsedOnnx& model, std::uint32_t batch);
// The same for the file at `path`, read and parsed for this one batch size.
OnnxModel readOnnx(const std::string& path, std::uint32_t batch);

}  // namespace glnet
