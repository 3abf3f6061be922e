// The table of the ONNX operators glnet imports (OnnxOps.h).
#include "importer/OnnxOps.h"

#include "importer/OnnxImporter.h"

#include <algorithm>
#include <cstdio>

namespace glnet {

using onnximport::Importer;

namespace {

OnnxOp row(std::string type, std::set<std::string> attributes, OnnxOp::Import import, OnnxFolding folding, std::string description,
           int firstOpset = 6) {
  OnnxOp op;
  op.firstOpset = firstOpset;
  op.type = std::move(type);
  op.attributes = std::move(attributes);
  op.import = import;
  op.folding = folding;
  op.description = std::move(description);
  return op;
}

// A row of an op that ONNX added after opset 6.
OnnxOp since(int opset, OnnxOp op) {
  op.firstOpset = opset;
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
    std::vector<OnnxOp> ops{
        row("Add", {}, &Importer::importBinary, constants,
            "a + b, broadcast as NumPy does; a constant row after a dense layer joins its bias, a residual runs in the convolution before it"),
        row("And", {}, &Importer::importBinary, constants, "a and b of booleans (nonzero is true), broadcast: 0 or 1"),
        row("AveragePool", window, &Importer::importPool, never, "1-D and 2-D average pooling: pads, ceil mode, dilations, count_include_pad"),
        row("BatchNormalization", {"epsilon", "momentum", "training_mode", "spatial"}, &Importer::importBatchNormalization, never,
            "inference batch normalization, folded into the Conv or Gemm before it where it can be"),
        row("Cast", {"to", "saturate"}, &Importer::importIdentity, constants, "the identity on the GPU, but a real cast to an integer truncates and a number cast to bool tests for nonzero; any type when folded"),
        row("Celu", {"alpha"}, &Importer::importPointwise, never, "pointwise celu"),
        row("Clip", {"min", "max"}, &Importer::importPointwise, never, "pointwise clip; bounds as attributes (opset < 11) or constant inputs"),
        row("Concat", {"axis"}, &Importer::importConcat, constants, "tensors joined along an axis"),
        row("Constant", {"value"}, &Importer::importConstant, OnnxFolding::isConstant, "a constant, held on the host"),
        row("ConstantOfShape", {"value"}, nullptr, constants, "a constant of a folded shape"),
        row("Conv", {"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"}, &Importer::importConv, never,
            "1-D and 2-D convolution: strides, dilations, groups, depthwise, any padding, auto_pad"),
        row("Div", {}, &Importer::importBinary, constants, "a / b, broadcast"),
        row("Dropout", {"seed", "ratio", "training_mode"}, &Importer::importIdentity, never, "the identity (inference; no mask output)"),
        since(12, row("Einsum", {"equation"}, &Importer::importEinsum, constants,
                       "products of two operands (each letter once per term; 'bhid,bhjd->bhij', 'bij,bjk->bik', ...) as a batched matmul "
                       "between transposes; any equation when folded")),
        row("Elu", {"alpha"}, &Importer::importPointwise, never, "pointwise elu"),
        row("Equal", {}, &Importer::importBinary, constants, "a == b, broadcast: 0 or 1 (false where either is NaN)"),
        row("Expand", {}, &Importer::importExpand, constants, "broadcast to a constant shape"),
        row("Flatten", {"axis"}, &Importer::importReshape, never, "a 2-D view"),
        row("Gather", {"axis"}, &Importer::importGather, constants,
            "along any axis, indices computed or constant (an embedding lookup); a computed index outside its axis gives NaN"),
        since(11, row("GatherND", {"batch_dims"}, &Importer::importGatherND, constants,
                      "index rows into the leading axes, with batch axes; a computed index outside its axis gives NaN")),
        row("Gelu", {"approximate"}, &Importer::importPointwise, never, "pointwise gelu, exact or tanh (ONNX's opset 20 op, read at any opset)"),
        row("Gemm", {"alpha", "beta", "transA", "transB"}, &Importer::importProduct, never, "a dense layer: Y = alpha·A·op(B) + beta·C, B constant"),
        row("GlobalAveragePool", {}, &Importer::importGlobalPool, never, "the mean over the spatial axes"),
        row("GlobalMaxPool", {}, &Importer::importGlobalPool, never, "the maximum over the spatial axes"),
        row("Greater", {}, &Importer::importBinary, constants, "a > b, broadcast: 0 or 1 (false where either is NaN)"),
        row("GreaterOrEqual", {}, &Importer::importBinary, constants, "a >= b, broadcast: 0 or 1 (false where either is NaN)", 12),
        row("HardSigmoid", {"alpha", "beta"}, &Importer::importPointwise, never, "pointwise hard sigmoid"),
        row("Identity", {}, &Importer::importIdentity, never, "the identity"),
        row("IsInf", {"detect_negative", "detect_positive"}, &Importer::importPointwise, constants, "1 where x is an infinity it detects, else 0", 10),
        row("IsNaN", {}, &Importer::importPointwise, constants, "1 where x is NaN, else 0", 9),
        row("LayerNormalization", {"axis", "epsilon", "stash_type"}, &Importer::importLayerNormalization, never,
            "layer normalization over the axes from axis on"),
        row("LeakyRelu", {"alpha"}, &Importer::importPointwise, never, "pointwise leaky relu"),
        row("Less", {}, &Importer::importBinary, constants, "a < b, broadcast: 0 or 1 (false where either is NaN)"),
        row("LessOrEqual", {}, &Importer::importBinary, constants, "a <= b, broadcast: 0 or 1 (false where either is NaN)", 12),
        row("MatMul", {}, &Importer::importProduct, never, "a dense layer when B is a constant matrix, else a batched, broadcast product"),
        row("Max", {}, &Importer::importVariadic, never, "the maximum of any number of inputs, broadcast"),
        row("MaxPool", window, &Importer::importPool, never, "1-D and 2-D max pooling: pads, ceil mode, dilations (no indices output)"),
        row("Mean", {}, &Importer::importVariadic, never, "the mean of any number of inputs, broadcast"),
        row("Min", {}, &Importer::importVariadic, never, "the minimum of any number of inputs, broadcast"),
        row("Mod", {"fmod"}, &Importer::importBinary, constants,
            "the remainder, broadcast: fmod = 0 with the divisor's sign (Python's %; integers), fmod = 1 with the dividend's (C's fmod)", 10),
        row("Mul", {}, &Importer::importBinary, constants,
            "a · b, broadcast; a per-channel gate scales the convolution's input; x·sigmoid(x) is one SiLU op (and fine-tunes)"),
        row("Not", {}, &Importer::importPointwise, constants, "not x of booleans (nonzero is true): 0 or 1"),
        row("Or", {}, &Importer::importBinary, constants, "a or b of booleans (nonzero is true), broadcast: 0 or 1"),
        row("Pad", {"mode", "pads", "value"}, &Importer::importPad, never, "constant padding"),
        row("Pow", {}, &Importer::importPointwise, never, "pointwise pow with a constant scalar exponent, else broadcast"),
        row("PRelu", {}, &Importer::importBinary, never, "x < 0 ? slope·x : x, slope broadcast"),
        row("Range", {}, nullptr, constants, "a range of constants"),
        row("Reshape", {"allowzero"}, &Importer::importReshape, constants, "a view in a constant shape"),
        since(11, row("ScatterND", {"reduction"}, &Importer::importScatterND, constants,
                      "updates written at constant index rows (reduction none; each place once on the GPU)")),
        row("Selu", {"alpha", "gamma"}, &Importer::importPointwise, never, "pointwise selu"),
        row("Shape", {"start", "end"}, nullptr, OnnxFolding::always, "the shape, known for the bound batch"),
        row("Shrink", {"bias", "lambd"}, &Importer::importPointwise, never, "pointwise shrink"),
        row("Slice", {"starts", "ends", "axes"}, &Importer::importSlice, constants, "constant starts, ends, axes and steps, clamped as NumPy does; any rank when folded"),
        row("Split", {"axis", "split", "num_outputs"}, &Importer::importSplit, never, "slices along an axis"),
        row("Squeeze", {"axes"}, &Importer::importReshape, constants, "a view without axes of 1"),
        row("Sub", {}, &Importer::importBinary, constants, "a - b, broadcast"),
        row("Sum", {}, &Importer::importVariadic, never, "the sum of any number of inputs, broadcast"),
        row("ThresholdedRelu", {"alpha"}, &Importer::importPointwise, never, "pointwise thresholded relu"),
        row("Transpose", {"perm"}, &Importer::importTranspose, constants, "axes permuted"),
        since(14, row("Trilu", {"upper"}, &Importer::importTrilu, constants, "the upper or lower triangle of the last two axes from diagonal k, zeros elsewhere")),
        row("Unsqueeze", {"axes"}, &Importer::importReshape, constants, "a view with axes of 1 inserted"),
        row("Where", {}, &Importer::importWhere, constants, "c ? a : b, broadcast three ways (c nonzero is true); a NaN passes where chosen", 9),
        row("Xor", {}, &Importer::importBinary, constants, "a xor b of booleans (nonzero is true), broadcast: 0 or 1"),
    };
    // The pointwise functions without attributes, as pointwiseOf maps them, and the axis functions with an ONNX op
    // type: rows of their kind lists (numbers/PointwiseKinds.h, numbers/AxisKinds.h).
    for (const auto& [type, kind] : Importer::plainPointwise()) {
      ops.push_back(row(type, {}, &Importer::importPointwise, never, "pointwise " + Pointwise{kind}.name()));
    }
    for (const AxisOnnxOp& op : axisOnnxOps()) {
      if (op.form == AxisOnnxForm::axis) {
        ops.push_back(row(op.type, {"axis"}, &Importer::importAlongAxis, never, op.description));
      } else if (op.form == AxisOnnxForm::axes) {
        ops.push_back(row(op.type, {"axes", "keepdims", "noop_with_empty_axes"}, &Importer::importReduce, never, op.description));
      }
    }
    // Every pointwise function and MatMul folds where all its inputs are constants.
    for (OnnxOp& op : ops) {
      if (op.import == &Importer::importPointwise || op.type == "MatMul") op.folding = constants;
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

std::string onnxOpsTable(bool markdown, const std::function<std::string(const std::string&)>& fineTunes) {
  std::string text = markdown ? "| ONNX op | opsets | at load | fine-tunes | what glnet runs |\n|---|---|---|---|---|\n"
                              : "ONNX op              opsets  at load                    fine-tunes  what glnet runs\n";
  for (const OnnxOp& op : onnxOps()) {
    const std::string trains = fineTunes(op.type);
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
