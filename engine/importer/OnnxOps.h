// The ONNX operators glnet imports, in one table (OnnxOps.cpp): one row per op type with the opsets glnet reads it at,
// the attributes it takes, the Importer member that makes it a graph op, whether it folds at load, and a line of
// description. Importer::importNode looks nodes up here (an op type with no row is refused by name),
// Importer::foldable takes its op list from here, and `glnet_info --ops` prints it (README's op table is
// `glnet_info --ops --markdown`, checked by ctest 'cli.ops_readme'). The rows of pointwise functions without
// attributes and of axis functions come from their kind lists (numbers/PointwiseKinds.h, numbers/AxisKinds.h).
//
// Adding an op of its own: a row here (and its import member in OnnxImporter.h / Onnx.cpp; a constant fold in
// OnnxFolding.cpp's fold() when it folds), then regenerate README's table.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace onnx {
class AttributeProto;
class NodeProto;
}  // namespace onnx

namespace glnet {

namespace onnximport {
class Importer;
}

// When a node of the op becomes a constant at load instead of running on the GPU.
enum class OnnxFolding {
  never,
  constantInputs,  // when all its inputs are constants (shape arithmetic)
  always,          // Shape: the shapes are known for the bound batch
  isConstant,      // Constant: the node is one (imported as such)
};

struct OnnxOp {
  using Attributes = std::map<std::string, const onnx::AttributeProto*>;
  // Builds the node's graph op from the node and its attributes (checked against `attributes`).
  using Import = void (onnximport::Importer::*)(const onnx::NodeProto&, const Attributes&);

  std::string type;
  int firstOpset = 6, lastOpset = 18;  // glnet reads opsets 6 to 18; a row may take fewer
  // The attributes the op takes, imported or folded; any other is refused.
  std::set<std::string> attributes;
  Import import = nullptr;  // none: the op is only folded
  OnnxFolding folding = OnnxFolding::never;
  std::string description;
};

// Every row, sorted by op type.
const std::vector<OnnxOp>& onnxOps();
// The row of an op type, nullptr when glnet does not import it.
const OnnxOp* findOnnxOp(const std::string& type);
// The table as text (op type, opsets, folded/runs, whether glnet_train --net fine-tunes a model holding it,
// description), or as README's Markdown table. Fine-tuning is the trainable-network reader's (convert/OnnxNetwork's
// onnxOpFineTuning, a layer above), so the caller says it.
std::string onnxOpsTable(bool markdown, const std::function<std::string(const std::string&)>& fineTunes);

}  // namespace glnet
