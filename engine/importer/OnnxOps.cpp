// The table of the ONNX operators glnet imports (OnnxOps.h).
#include "importer/OnnxOps.h"

#include "importer/OnnxImporter.h"

#include <algorithm>
#include <cstdio>

namespace glnet {

using onnximport::Importer;

namespace {

OnnxOp row(std::string type, std::set<std::string> attributes, OnnxOp::Import import, OnnxFolding folding, bool trains, std::string description) {
  OnnxOp op;
  op.type = std::move(type);
  op.attributes = std::move(attributes);
  op.import = import;
  op.folding = folding;
  op.trains = trains;
  op.description = std::move(description);
  return op;
}

std::string opsets(const OnnxOp& op) { return std::to_string(op.firstOpset) + "-" + std::to_string(op.lastOpset); }

std::string load(const OnnxOp& op) {
  switch (op.folding) {
    case OnnxFolding::always: return "folded";
    case OnnxFolding::isConstant: return "constant";
    case OnnxFolding::constantInputs: return op.import ? "runs; folded on constants" : "folded on constants";
    case OnnxFolding::never: break;
  }
  return "runs";
}

}  // namespace

const std::vector<OnnxOp>& onnxOps() {
  static const std::vector<OnnxOp> table = [] {
    const OnnxFolding never = OnnxFolding::never, constants = OnnxFolding::constantInputs;
    const std::set<std::string> window{"kernel_shape", "strides", "pads", "dilations", "ceil_mode", "auto_pad", "storage_order", "count_include_pad"};
    const std::set<std::string> reduce{"axes", "keepdims", "noop_with_empty_axes"};
    std::vector<OnnxOp> ops{
        row("Add", {}, &Importer::importBinary, constants, true,
            "a + b, broadcast as NumPy does; a constant row after a dense layer joins its bias, a residual runs in the convolution before it"),
        row("AveragePool", window, &Importer::importPool, never, true, "1-D and 2-D average pooling: pads, ceil mode, dilations, count_include_pad"),
        row("BatchNormalization", {"epsilon", "momentum", "training_mode", "spatial"}, &Importer::importBatchNormalization, never, true,
            "inference batch normalization, folded into the Conv or Gemm before it where it can be"),
        row("Cast", {"to", "saturate"}, &Importer::importIdentity, constants, false, "to float on the GPU (the identity); any type when folded"),
        row("Celu", {"alpha"}, &Importer::importPointwise, never, false, "pointwise celu"),
        row("Clip", {"min", "max"}, &Importer::importPointwise, never, false, "pointwise clip; bounds as attributes (opset < 11) or constant inputs"),
        row("Concat", {"axis"}, &Importer::importConcat, constants, true, "tensors joined along an axis"),
        row("Constant", {"value"}, &Importer::importConstant, OnnxFolding::isConstant, true, "a constant, held on the host"),
        row("ConstantOfShape", {"value"}, nullptr, constants, false, "a constant of a folded shape"),
        row("Conv", {"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"}, &Importer::importConv, never, true,
            "1-D and 2-D convolution: strides, dilations, groups, depthwise, any padding, auto_pad"),
        row("Div", {}, &Importer::importBinary, constants, false, "a / b, broadcast"),
        row("Dropout", {"seed", "ratio", "training_mode"}, &Importer::importIdentity, never, true, "the identity (inference; no mask output)"),
        row("Elu", {"alpha"}, &Importer::importPointwise, never, false, "pointwise elu"),
        row("Equal", {}, nullptr, constants, false, "a == b of constants"),
        row("Expand", {}, &Importer::importExpand, constants, false, "broadcast to a constant shape"),
        row("Flatten", {"axis"}, &Importer::importReshape, never, true, "a 2-D view"),
        row("Gather", {"axis"}, &Importer::importGather, constants, false, "with constant indices: slices of an axis"),
        row("Gelu", {"approximate"}, &Importer::importPointwise, never, false, "pointwise gelu, exact or tanh (ONNX's opset 20 op, read at any opset)"),
        row("Gemm", {"alpha", "beta", "transA", "transB"}, &Importer::importProduct, never, true, "a dense layer: Y = alpha·A·op(B) + beta·C, B constant"),
        row("GlobalAveragePool", {}, &Importer::importGlobalPool, never, true, "the mean over the spatial axes"),
        row("GlobalMaxPool", {}, &Importer::importGlobalPool, never, false, "the maximum over the spatial axes"),
        row("HardSigmoid", {"alpha", "beta"}, &Importer::importPointwise, never, false, "pointwise hard sigmoid"),
        row("Identity", {}, &Importer::importIdentity, never, true, "the identity"),
        row("LayerNormalization", {"axis", "epsilon", "stash_type"}, &Importer::importLayerNormalization, never, false,
            "layer normalization over the axes from axis on"),
        row("LeakyRelu", {"alpha"}, &Importer::importPointwise, never, false, "pointwise leaky relu"),
        row("LogSoftmax", {"axis"}, &Importer::importSoftmax, never, true, "log-softmax (opset 13 on: along one axis; before: over the axes from axis on)"),
        row("MatMul", {}, &Importer::importProduct, never, false, "a dense layer when B is a constant matrix, else a batched, broadcast product"),
        row("Max", {}, &Importer::importVariadic, never, false, "the maximum of any number of inputs, broadcast"),
        row("MaxPool", window, &Importer::importPool, never, true, "1-D and 2-D max pooling: pads, ceil mode, dilations (no indices output)"),
        row("Mean", {}, &Importer::importVariadic, never, false, "the mean of any number of inputs, broadcast"),
        row("Min", {}, &Importer::importVariadic, never, false, "the minimum of any number of inputs, broadcast"),
        row("Mul", {}, &Importer::importBinary, constants, false,
            "a · b, broadcast; a per-channel gate scales the convolution's input; x·sigmoid(x) is one SiLU op (and fine-tunes)"),
        row("Pad", {"mode", "pads", "value"}, &Importer::importPad, never, false, "constant padding"),
        row("Pow", {}, &Importer::importPointwise, never, false, "pointwise pow with a constant scalar exponent, else broadcast"),
        row("PRelu", {}, &Importer::importBinary, never, false, "x < 0 ? slope·x : x, slope broadcast"),
        row("Range", {}, nullptr, constants, false, "a range of constants"),
        row("ReduceL1", reduce, &Importer::importReduce, never, false, "Σ|x| over adjacent axes"),
        row("ReduceL2", reduce, &Importer::importReduce, never, false, "sqrt(Σx²) over adjacent axes"),
        row("ReduceLogSum", reduce, &Importer::importReduce, never, false, "log Σx over adjacent axes"),
        row("ReduceLogSumExp", reduce, &Importer::importReduce, never, false, "log Σ exp x over adjacent axes"),
        row("ReduceMax", reduce, &Importer::importReduce, never, false, "the maximum over adjacent axes"),
        row("ReduceMean", reduce, &Importer::importReduce, never, false, "the mean over adjacent axes"),
        row("ReduceMin", reduce, &Importer::importReduce, never, false, "the minimum over adjacent axes"),
        row("ReduceProd", reduce, &Importer::importReduce, never, false, "Πx over adjacent axes"),
        row("ReduceSum", reduce, &Importer::importReduce, never, false, "Σx over adjacent axes (axes as an input from opset 13)"),
        row("ReduceSumSquare", reduce, &Importer::importReduce, never, false, "Σx² over adjacent axes"),
        row("Reshape", {"allowzero"}, &Importer::importReshape, constants, false, "a view in a constant shape"),
        row("Selu", {"alpha", "gamma"}, &Importer::importPointwise, never, false, "pointwise selu"),
        row("Shape", {"start", "end"}, nullptr, OnnxFolding::always, false, "the shape, known for the bound batch"),
        row("Shrink", {"bias", "lambd"}, &Importer::importPointwise, never, false, "pointwise shrink"),
        row("Slice", {"starts", "ends", "axes"}, &Importer::importSlice, constants, false, "constant starts, ends, axes and steps, clamped as NumPy does"),
        row("Softmax", {"axis"}, &Importer::importSoftmax, never, true,
            "softmax (opset 13 on: along one axis; before: over the axes from axis on); fine-tunes as the last node"),
        row("Split", {"axis", "split", "num_outputs"}, &Importer::importSplit, never, false, "slices along an axis"),
        row("Squeeze", {"axes"}, &Importer::importReshape, constants, false, "a view without axes of 1"),
        row("Sub", {}, &Importer::importBinary, constants, false, "a - b, broadcast"),
        row("Sum", {}, &Importer::importVariadic, never, false, "the sum of any number of inputs, broadcast"),
        row("ThresholdedRelu", {"alpha"}, &Importer::importPointwise, never, false, "pointwise thresholded relu"),
        row("Transpose", {"perm"}, &Importer::importTranspose, never, false, "axes permuted"),
        row("Unsqueeze", {"axes"}, &Importer::importReshape, constants, false, "a view with axes of 1 inserted"),
        row("Where", {}, nullptr, constants, false, "c ? a : b of constants"),
    };
    // The pointwise functions without attributes, as pointwiseOf maps them; glnet_train --net fine-tunes four.
    const std::set<std::string> finetuned{"Relu", "Sigmoid", "Tanh", "HardSwish"};
    for (const auto& [type, kind] : Importer::plainPointwise()) {
      ops.push_back(row(type, {}, &Importer::importPointwise, never, finetuned.count(type) > 0, "pointwise " + Pointwise{kind}.name()));
    }
    std::sort(ops.begin(), ops.end(), [](const OnnxOp& a, const OnnxOp& b) { return a.type < b.type; });
    return ops;
  }();
  return table;
}

const OnnxOp* findOnnxOp(const std::string& type) {
  const std::vector<OnnxOp>& ops = onnxOps();
  const auto found = std::lower_bound(ops.begin(), ops.end(), type, [](const OnnxOp& op, const std::string& t) { return op.type < t; });
  return found != ops.end() && found->type == type ? &*found : nullptr;
}

std::string onnxOpsTable(bool markdown) {
  std::string text = markdown ? "| ONNX op | opsets | at load | fine-tunes | what glnet runs |\n|---|---|---|---|---|\n"
                              : "ONNX op              opsets  at load                    fine-tunes  what glnet runs\n";
  for (const OnnxOp& op : onnxOps()) {
    const std::string trains = op.trains ? "yes" : "no";
    if (markdown) {
      text += "| `" + op.type + "` | " + opsets(op) + " | " + load(op) + " | " + trains + " | " + op.description + " |\n";
    } else {
      char line[96];
      std::snprintf(line, sizeof line, "%-20s %-7s %-26s %-11s ", op.type.c_str(), opsets(op).c_str(), load(op).c_str(), trains.c_str());
      text += line + op.description + "\n";
    }
  }
  return text;
}

}  // namespace glnet
