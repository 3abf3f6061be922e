// The ONNX importer (readOnnx): one class whose work four files share. Onnx.cpp reads the graph and imports each
// op, OnnxFusion.cpp holds the lookaheads that run a node inside the kernel before it (functions, residual Adds,
// pooling, squeeze-excite gates, a fire module's expansions), OnnxFolding.cpp folds constants at load, and
// OnnxLogic.cpp holds the logic ops (comparisons, And, Or, Xor, Not, IsNaN, IsInf, Mod, Where).
// The ops it imports are the rows of OnnxOps.h's table, which names the import members here. Internal to engine/importer.
#pragma once

#include "importer/Onnx.h"
#include "importer/OnnxOps.h"
#include "formats/OnnxProto.h"
#include "graph/InferenceOps.h"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace glnet::onnximport {

// A constant on the host: an initializer, a Constant node's value, or a folded result.
using Constant = OnnxConstant;
// Folded constants are shapes and small tables; anything larger is no shape arithmetic.
constexpr std::size_t largestFolded = std::size_t{1} << 22;
// A Transpose of a constant moves a weight (a tied embedding read as an LM head): folded up to a large model's table.
constexpr std::size_t largestTransposedConstant = std::size_t{1} << 27;

// What a computed tensor's float32 values stand for (ONNX's element type): casts and integer division on the GPU
// depend on it.
enum class Element { real, integer, boolean };

// A tensor name's value while the graph is built: a constant on the host, or a tensor of the glnet graph.
struct Value {
  bool constant = false;
  Constant host;
  Tensor tensor;
  Element element = Element::real;  // of a tensor
};

using Attributes = OnnxOp::Attributes;
using onnxformat::describe;
using onnxformat::integer;
using onnxformat::integers;
using onnxformat::real;

class Importer {
 public:
  Importer(const ParsedOnnx& model, std::uint32_t batch) : model_(model.proto()), path_(model.path()), batch_(batch) {}
  Importer(const ParsedOnnx& model, InputShapes shapes) : model_(model.proto()), path_(model.path()), shapes_(std::move(shapes)) {}

  OnnxModel run();

 private:
  // The table names the import members.
  friend const std::vector<OnnxOp>& glnet::onnxOps();

  [[noreturn]] void refuse(const onnx::NodeProto& node, const std::string& why) const;

  Constant readTensor(const onnx::TensorProto& tensor) const { return readOnnxTensor(tensor, path_); }

  // Every graph input that is no initializer: float32, uint8, int64, int32 or bool tensors, whose symbolic dimensions
  // take the bound shapes (or the bound batch).
  void readInputs(const onnx::GraphProto& graph);
  // The bound shape of input `index` (the `index`th that is no initializer), whose dimensions the file gives as `dims`;
  // `symbols` gathers the value of each named symbolic dimension, the same wherever it appears.
  Shape boundShape(const onnx::ValueInfoProto& input, std::size_t index, std::map<std::string, std::uint32_t>& symbols);

  const Value& value(const std::string& name, const std::string& user) const;

  // The node's attributes by name, each checked against those the op takes.
  std::map<std::string, const onnx::AttributeProto*> attributes(const onnx::NodeProto& node, const std::set<std::string>& known) const;

  // Input `index` of a node, which must be given (a node's input list is the file's to get wrong).
  const Value& operand(const onnx::NodeProto& node, int index) const;

  Tensor tensorInput(const onnx::NodeProto& node, int index) const;
  const Constant* constantInput(const onnx::NodeProto& node, int index) const;

  // A weight or constant uploaded once; NaN refused, and infinities too unless `infinitiesAllowed` (a constant of
  // arithmetic, such as an attention mask's -inf; a weight that is not finite makes every answer NaN).
  Tensor parameter(const std::string& name, const std::vector<std::int64_t>& shape, const std::vector<double>& values,
                   bool infinitiesAllowed = false);

  void define(const onnx::NodeProto& node, Tensor tensor, const std::string& glnetOp);
  // The node's output is its first input's value under another name (an Identity, a whole Slice, a Pad of nothing).
  void defineAlias(const onnx::NodeProto& node, const Value& value);
  Tensor apply(const onnx::NodeProto& node, std::shared_ptr<const Op> op, const std::vector<Tensor>& inputs, const std::string& glnetOp);

  // A node by its row of the table (onnxOps): folded, or made a graph op by the row's import member.
  void importNode(const onnx::NodeProto& node);

  // A Constant node's value attribute, held on the host.
  void importConstant(const onnx::NodeProto& node, const Attributes& a);
  // Identity, Dropout (inference) and Cast: the input itself, but for a cast to an integer (of a real: truncated) or
  // to a boolean (of a number: whether it is not zero).
  void importIdentity(const onnx::NodeProto& node, const Attributes& a);
  // The element type of what `node` computes: a boolean for comparisons and logic, Cast's target, that of the
  // selected values for Where, else that of its first input (ONNX's ops keep their input's type).
  Element resultElement(const onnx::NodeProto& node) const;
  // A pointwise function (pointwiseOf), x·sigmoid(x) as one SiLU op; Pow with an exponent that is no constant scalar
  // is a broadcast power (importBinary).
  void importPointwise(const onnx::NodeProto& node, const Attributes& a);
  void importGlobalPool(const onnx::NodeProto& node, const Attributes& a);
  void importTranspose(const onnx::NodeProto& node, const Attributes& a);
  void importConcat(const onnx::NodeProto& node, const Attributes& a);
  void importExpand(const onnx::NodeProto& node, const Attributes& a);

  const Shape& shapeOf(Tensor t) const { return graph_.tensor(t).shape; }
  static std::string nameOf(const onnx::NodeProto& node) { return node.name().empty() ? node.output(0) : node.name(); }

  std::int64_t normalizedAxis(const onnx::NodeProto& node, std::int64_t axis, std::size_t rank, bool inclusiveEnd = false) const;

  // A node's input as a GPU tensor: computed, or a constant uploaded as a parameter (once per name).
  Tensor tensorOrConstant(const onnx::NodeProto& node, int index);

  // The node that alone reads `name` (no other node, not a graph output), if any.
  const onnx::NodeProto* soleReader(const std::string& name) const;

  // The pointwise function a node computes, when it is one (Clip's bounds and Pow's exponent must be constants).
  std::optional<Pointwise> pointwiseOf(const onnx::NodeProto& node) const;
  // The op types pointwiseOf maps to a function without attributes (the table's rows for them).
  static const std::map<std::string, PointwiseKind>& plainPointwise();

  // The pointwise node that alone reads the output of `producer` (after a BatchNormalization that folds into it, if
  // `absorbsBatchNorm`: a layer importBatchNormalization folds into), or the Sigmoid and Mul of x·sigmoid(x) (SiLU)
  // that alone read it, marked to run inside the producer's kernel; `accepts` says which functions the kernel can
  // apply. Past a BatchNormalization that does not fold, the function would run before it.
  Pointwise fusedPointwise(const onnx::NodeProto& producer, const std::function<bool(const Pointwise&)>& accepts, bool absorbsBatchNorm = false);
  // The Add that alone reads `producer`'s output and adds to it a tensor already computed and shaped as that output
  // (`shape`), with that tensor: the convolution or dense layer adds it as it stores (a residual connection), marked fused.
  std::optional<std::pair<const onnx::NodeProto*, Tensor>> fusableResidual(const onnx::NodeProto& producer, const Shape& shape);
  // Whether `node` is a Mul of exactly a and b, in either order.
  static bool multiplies(const onnx::NodeProto& node, const std::string& a, const std::string& b);
  // The Sigmoid and the Mul that compute value·sigmoid(value) when they are value's only readers.
  std::pair<const onnx::NodeProto*, const onnx::NodeProto*> siluOf(const std::string& value) const;
  // Whether every integer of an ints attribute (pads, dilations, ...) is v.
  static bool allInts(const onnx::AttributeProto& a, std::int64_t v);
  // A MaxPool that alone reads `producer`'s output (or that of the activation fused into it), with a 2×2 window,
  // stride 2, no padding, no dilation and floor rounding: a stride-1 convolution pools as it stores its output (or as
  // it sums its split), which saves the pooling's pass and the convolution's full-size output (vgg11 has five).
  const onnx::NodeProto* fusablePool(const onnx::NodeProto& producer);
  static std::optional<Activation> asActivation(const Pointwise& f);

  // --- Transformer layers' fusions (OnnxLayerFusion.cpp) ---
  // The Add that alone reads a dense layer's product and adds a finite constant row of its `outputs` values, of rank
  // up to the product's `rank` (nn.Linear on [B, S, H] exported as MatMul + Add), with that row: the layer adds it as
  // its bias, the Add marked fused.
  std::optional<std::pair<const onnx::NodeProto*, const Constant*>> fusableBias(const onnx::NodeProto& product, std::int64_t outputs,
                                                                                 std::size_t rank);
  // The nodes of GELU of x written out as exporters write it (x·0.5·(1 + erf(x/√2)) or GPT-2's
  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), the three products in any order), when they alone read x and each
  // other: the kind, the nodes, and the one whose output is GELU(x).
  struct GeluMatch {
    PointwiseKind kind = PointwiseKind::gelu;
    std::vector<const onnx::NodeProto*> nodes;
    const onnx::NodeProto* result = nullptr;
  };
  std::optional<GeluMatch> geluOf(const std::string& x) const;
  // Marks a match's nodes fused, each taking the value of `value` (GELU's result, computed by the kernel that makes it).
  void fuseGelu(const GeluMatch& match, const std::string& value);
  // A Div, Mul or Pow that begins a GELU chain no kernel took (geluOf of one of its inputs): imported as one pointwise
  // op, the chain's other nodes fused into it. False for any other node.
  bool importsGelu(const onnx::NodeProto& node);
  // The node that alone reads the single output of `node`, itself of one output.
  const onnx::NodeProto* soleSingleReader(const onnx::NodeProto& node) const;
  // A one-element constant's value, also of a Constant node not imported yet (a lookahead runs before the nodes it
  // reads, and exporters put a function's Constant nodes just before it).
  std::optional<double> scalarAhead(const std::string& name) const;
  // Whether `node` (of one output) is x times the one-element constant `factor`, or x divided by 1/factor, in
  // float32's rounding.
  bool scales(const onnx::NodeProto* node, const std::string& x, double factor) const;
  // Whether `node` is an Add of x and a one-element constant 1.
  bool addsOne(const onnx::NodeProto* node, const std::string& x) const;
  // An Add of two computed tensors of one shape (a residual connection) that only a LayerNormalization reads, as its
  // X: recorded in residualSums_ and summed as the normalization reads it (layerNormalizationResidualOp), so that the
  // sum is never stored. False, and nothing done, for any other Add.
  bool sumsIntoNormalization(const onnx::NodeProto& add);
  std::map<std::string, std::pair<Tensor, Tensor>> residualSums_;  // such an Add's output -> its two operands

  // --- Attention (OnnxAttention.cpp) ---
  // A MatMul of two computed tensors that is Q·Kᵀ of scaled dot-product attention as PyTorch exports it (an optional
  // scale, an optional additive mask, Softmax over the keys, SDPA's Where(IsNaN(p), 0, p), the product with V):
  // imported as one fused attentionOp reading Q, K and V in place through the Transposes and scales that made them and
  // writing the heads' merge order where a Transpose follows. Returns why not where the graph differs (empty when
  // fused); the caller then imports the ops one by one.
  std::string importAttention(const onnx::NodeProto& product);
  // The same found from P·V back, where Q·Kᵀ was imported as a batched product because what follows it was not known
  // yet (GPT-2's eager export computes its scale and causal condition after the product): the ops made for the chain
  // are read by nothing then.
  std::string importLateAttention(const onnx::NodeProto& valueProduct);
  // Whether a Where before Softmax fills with -inf or a float at most -1e30 (GPT-2's lowest float), which scores added
  // to it round to.
  bool fillsLowest(const onnx::NodeProto& where) const;
  // Whether a node between Softmax and the product with V passes the probabilities unchanged (in inference).
  bool passesProbabilities(const onnx::NodeProto& node) const;
  // The Transpose of 4 axes that alone reads the product with V, as the heads' merge begins (the op writes in its order
  // at once: [B, S, H, D] as BERT's and GPT-2's exports merge, [S, B, H, D] as PyTorch 2's nn.MultiheadAttention), if any.
  std::vector<const onnx::NodeProto*> headsMerge(const onnx::NodeProto& valueProduct) const;
  // The op's output layout that writes what that Transpose would give.
  static AttentionSettings::Layout mergedLayout(const onnx::NodeProto& transpose);
  // What importAttention found: Q·Kᵀ, ·V, the nodes between and after them that the op runs, the mask, the scale.
  struct AttentionMatch {
    const onnx::NodeProto* product = nullptr;
    const onnx::NodeProto* valueProduct = nullptr;
    std::vector<const onnx::NodeProto*> chain;   // after Q·Kᵀ up to ·V
    std::vector<const onnx::NodeProto*> merged;  // the Transpose after ·V that the op writes in place
    std::string mask;
    double scale = 1;
    bool zeroesEmptyRows = false;  // SDPA's Where(IsNaN(p), 0, p): a row that sees no key gives 0, not NaN
    const onnx::NodeProto* causalWhere = nullptr;  // Where(causal, scores, lowest) before the mask: the op's causal flag
    // Swin's shifted windows: a constant added to the scores viewed as [batch / windows, windows, heads, queries, keys]
    // (that view's shape), after the mask.
    std::string windowMask;
    Shape windowedScores;
  };
  // The fused op of a match, once V and the mask are computed: defines Q·Kᵀ's and ·V's outputs as its output. Returns
  // why not where the op does not take the shapes (a refusal where the ops before it were already skipped).
  std::string buildAttention(const AttentionMatch& match);
  // A match's window mask and the mask before it (none, or a constant that does not vary along the batch) summed into
  // one constant [windows, heads, queries, keys] (1 along an axis neither varies along), which the op reads for batch
  // b at window b mod windows: the window's index in Swin's layout [images, windows]. Empty, or why not.
  std::string joinWindowMask(const AttentionMatch& match, std::optional<Tensor>& joined);
  // The weights and bias of the dense or conv layer computing a tensor, whose output channels lie along `channelAxis`
  // of that tensor (1, or another axis in a view or transpose of the layer's output): a constant scale or shift per
  // channel after it folds into them.
  struct Layer {
    Tensor weight, bias;
    std::uint32_t channelAxis = 1;
    bool functionPastBatchNorm = false;  // a function fused past the BatchNormalization that alone reads the layer
  };
  // A dense layer with neither function nor residual (a projection): its input and the op's operands, to be joined with
  // others reading the same input.
  struct Projection {
    Tensor input;       // as the MatMul reads it, of any rank
    Tensor rows;        // its [rows, in] view, which the dense op reads
    Tensor weight, bias;
    std::uint32_t outputs = 0;
    std::size_t summary = 0;  // its row in result_.nodes
  };
  // A part of a Split along the last axis: its columns from `offset` of its source's rows.
  struct SplitPart {
    Tensor source;
    std::uint32_t offset = 0, width = 0;
  };
  struct JoinedProjections {
    Tensor output;                       // what Q, K and V are read from: the joined dense layer, or the split's source
    std::vector<std::size_t> summaries;  // the joined projections' rows in result_.nodes
    std::string how;                     // for glnet_info
  };
  // Where Q, K and V are each read through views alone (a head split's Reshape, the Transpose the op reads through, a
  // scale), nothing else reading them, from three projections of one input or from the parts of one Split along the
  // last axis: what the op reads them from (a dense layer of the three projections joined, or the split's source) and
  // their views into it in `settings`. `operands`: for each of Q, K and V the names from the op's input back to the
  // tensor it reads in its layout; `readShapes`: that tensor's shape as the op reads it, the 4 axes its layout indexes;
  // `headsJoined`: a rank-3 attention's, read as [1, batch · heads, ...] (viewsOfOneTensor may split that axis).
  std::optional<JoinedProjections> joinedProjections(const std::array<std::vector<std::string>, 3>& operands, const std::array<Shape, 3>& readShapes,
                                                     bool headsJoined, AttentionSettings& settings);
  // Whether permuting `in`'s axes by `axes` leaves every element where it is: a valid permutation that keeps the axes
  // longer than 1 in their order.
  static bool movesNoElement(const std::vector<std::uint32_t>& axes, const Shape& in);
  // Whether a node only gives its computed input another shape, its elements in the same order (Reshape, Squeeze,
  // Unsqueeze, Flatten, a Transpose that moves no element).
  bool keepsElementOrder(const onnx::NodeProto& node) const;
  // Add(X, R) where X is a projection's output given other shapes (keepsElementOrder), each step read by the next
  // alone (readOnlyBy), the projection read under no other name but through nodes fused into it, and R computed in the
  // Add's shape: the layer made again with R as its residual, the Add's value its output in the Add's shape
  // (torchvision's ViT at batch 1: out_proj's Gemm, Reshape and Transpose before the skip connection). The first
  // layer, then read by nothing, is left out of the plan.
  bool addsIntoProjection(const onnx::NodeProto& add);
  // What joinedProjections takes where Q, K and V are each read back through nodes that only index memory anew
  // (Reshape, Squeeze, Unsqueeze, a Transpose no attention absorbed, a Gather of one constant index, a Slice of constant
  // bounds) from one computed tensor, every name on the way read by those nodes alone (torchvision's ViT exported by
  // PyTorch 2: nn.MultiheadAttention's in-projection reshaped, transposed and gathered into Q, K and V; MaxViT's chunk
  // of its in-projection into three Slices): that tensor, and their strided views into it in `settings`. In a rank-3
  // attention (`headsJoined`), a batch · heads axis of two strides (PyTorch 1's [S, B·H, D] at B > 1) is read as the
  // op's batch and heads axes.
  std::optional<JoinedProjections> viewsOfOneTensor(const std::array<std::vector<std::string>, 3>& operands, const std::array<Shape, 3>& readShapes,
                                                    bool headsJoined, AttentionSettings& settings);
  // Whether `node` reads only the shape of its input, known at load: a Shape node, or one whose results (followed
  // `depth` nodes on) only Shape nodes read (GPT-2's head split of K, whose size(-2) the export takes from a transpose
  // of it that nothing else reads).
  bool readsShapeOnly(const onnx::NodeProto& node, int depth) const;
  // Whether only `nodes` (and nodes reading its shape only) read the data of `name`, and it is no graph output.
  bool readOnlyBy(const std::string& name, const std::set<const onnx::NodeProto*>& nodes) const;
  // The value of a one-element constant.
  std::optional<double> scalarConstant(const std::string& name) const;
  // A Mul or Div of a computed tensor by a one-element constant: that tensor's name and the factor.
  std::optional<std::pair<std::string, double>> scaledBy(const onnx::NodeProto& node) const;

  // Gemm (Y = alpha·A·op(B) + beta·C) and MatMul (Y = A·B). A constant B makes a dense layer on the GEMM core
  // (A of any rank: its leading axes are rows); two computed operands make a batched product.
  void importProduct(const onnx::NodeProto& node, const Attributes& a);

  // Add, Sub, Mul, Div, Pow, Max, Min, PRelu, the comparisons, And, Or, Xor and Mod (binaryKindOf) with NumPy
  // broadcasting; constant operands become parameters. A constant
  // row added to a dense layer's output (PyTorch's MatMul + Add) joins the layer's bias instead.
  void importBinary(const onnx::NodeProto& node, const Attributes& a);

  // Whether a channel-scaling Mul (channelScale) is a squeeze-excite gate, [N, C, 1, 1] computed per image, whose
  // output only a 1x1 convolution without padding, which the implicit GEMM runs, reads: that convolution then scales
  // X as it reads it (conv2dOp's inputScaled), which saves the scaled tensor's pass and a dependent dispatch
  // (mobilenet_v3_small has 9 such gates, efficientnet_b0 16).
  bool scalesConvolutionInput(const onnx::NodeProto& node, int side) const;

  // SqueezeNet's fire module at a batch of up to 4 (expandsTogether): a 1x1 convolution and a k x k one with "same"
  // padding of the same tensor, each followed by the same function or none, whose results only one Concat along the
  // channels reads.
  struct Expansion {
    const onnx::NodeProto* point;   // the 1x1 convolution
    const onnx::NodeProto* wide;    // the k x k one
    const onnx::NodeProto* concat;
    bool pointFirst;                // the 1x1 convolution's channels come first in the Concat
    Pointwise function;
    std::vector<const onnx::NodeProto*> functionNodes;
  };
  // A convolution's kernel size when it has one group, stride 1, no dilation, a constant weight [O, C, k, k] with k
  // odd and "same" padding ((k - 1) / 2 on every side); 0 otherwise.
  std::int64_t sameKernel(const onnx::NodeProto& conv) const;
  std::optional<Expansion> expandsTogether(const onnx::NodeProto& node) const;

  // Whether input `side` of a Mul scales the other, computed, input [N, C, spatial...] per channel or per image and
  // channel: shaped [C, 1...], [1, C, 1...] or [N, C, 1...] (a squeeze-excite gate; BatchNorm exported as Mul).
  bool channelScale(const onnx::NodeProto& node, int side);
  // A Mul by a finite constant per output channel of the layer computing its other input, which nothing else reads
  // and no function comes between (ConvNeXt's layer scale, after its block's last Linear and Transpose): folded into
  // that layer's weights and bias.
  bool scalesLayer(const onnx::NodeProto& node);
  // A folded per-channel scale and shift: row c of the layer's weights times factor[c], its bias times factor[c] plus shift[c].
  void foldIntoLayer(const Layer& layer, const std::vector<double>& factor, const std::vector<double>& shift);

  // Sum, Mean, Max and Min of any number of inputs, broadcast: a chain of binary ops (Mean scaled at the end); Max and
  // Min of two are importBinary's.
  void importVariadic(const onnx::NodeProto& node, const Attributes& a);

  // Pads from explicit pads or auto_pad (SAME_UPPER puts the odd one at the end, SAME_LOWER at the start), as
  // [top, left, bottom, right].
  std::array<std::uint32_t, 4> windowPads(const onnx::NodeProto& node, const std::map<std::string, const onnx::AttributeProto*>& a,
                                          const Shape& x, const std::array<std::uint32_t, 2>& kernel, const std::array<std::uint32_t, 2>& strides,
                                          const std::array<std::uint32_t, 2>& dilations) const;
  std::array<std::uint32_t, 2> pair(const onnx::NodeProto& node, const std::map<std::string, const onnx::AttributeProto*>& a,
                                    const std::string& name, std::uint32_t otherwise) const;

  // A 1-D window (Conv1d, MaxPool1d, ...) runs as 2-D over a view [N, C, 1, L]: its attributes gain a leading 1
  // (pads: 0 before and after the new axis).
  static std::map<std::string, onnx::AttributeProto> widened(const std::map<std::string, const onnx::AttributeProto*>& a);
  static std::map<std::string, const onnx::AttributeProto*> pointers(const std::map<std::string, onnx::AttributeProto>& a);
  Tensor asImage(const onnx::NodeProto& node, Tensor x);
  // The output of a window op on asImage's view, back to [N, C, L] when the input was.
  void defineWindow(const onnx::NodeProto& node, Tensor input, Tensor out, const std::string& glnetOp);

  // An Expansion as one k x k convolution into the Concat's tensor: the 1x1 kernel's weights at the centre tap with
  // zeros around it. One dispatch and no copy for each fire module, at k² times the 1x1 layer's multiplies, which
  // a batch this small does not notice.
  void importExpansion(const onnx::NodeProto& node, const Expansion& e);

  // Conv: one group, the same stride along both axes and the same padding on every side run as an implicit GEMM
  // (Conv2D.glsl; split along its sum where it has too few tiles for the GPU); anything else (dilations, groups,
  // depthwise, uneven padding or strides) directly (GroupedConv.glsl).
  void importConv(const onnx::NodeProto& node, const Attributes& a);

  // Inference BatchNormalization, y = scale·(x − mean)/sqrt(var + epsilon) + B per channel: folded into the
  // convolution or dense layer that computes x when nothing else reads it (weights scaled per output channel,
  // bias shifted), else a per-channel multiply and add.
  void importBatchNormalization(const onnx::NodeProto& node, const Attributes& a);

  void importPool(const onnx::NodeProto& node, const Attributes& a);

  // The axis kind whose row in numbers/AxisKinds.h names the node's op type.
  static AxisKind axisKindOf(const onnx::NodeProto& node);
  // The axis kinds of AxisOnnxForm::axis (Softmax, LogSoftmax, ...): from opset 13 along one axis; before, over the
  // axes from `axis` on (the input coerced to 2-D).
  void importAlongAxis(const onnx::NodeProto& node, const Attributes& a);

  // The axis kinds of AxisOnnxForm::axes (ReduceMean, ReduceSum, ...) over adjacent axes (attribute axes, or from
  // opset 18, and 13 for ReduceSum, a constant input).
  void importReduce(const onnx::NodeProto& node, const Attributes& a);

  void importLayerNormalization(const onnx::NodeProto& node, const Attributes& a);

  // Flatten, Reshape, Squeeze and Unsqueeze of a computed tensor: views of the same memory.
  void importReshape(const onnx::NodeProto& node, const Attributes& a);

  // A slice of each axis: start, count and step, clamped as NumPy does.
  struct AxisSlice {
    std::int64_t start = 0, step = 1;
    std::uint32_t count = 0;
  };
  static AxisSlice clampedSlice(std::int64_t dimension, std::int64_t start, std::int64_t end, std::int64_t step);

  Tensor sliceTensor(const onnx::NodeProto& node, Tensor x, const std::vector<AxisSlice>& slices, const std::string& name);

  void importSlice(const onnx::NodeProto& node, const Attributes& a);

  // ---- Regions (OnnxRegions.cpp): Slices and Concats of one tensor as one op of region copies. ----
  // A computed tensor as boxes of one source: each `size` box at `origin` of the tensor holds the source's elements
  // from xOffset along xStrides.
  struct Region {
    std::vector<std::uint32_t> size;
    std::vector<std::int64_t> origin;
    std::int64_t xOffset = 0;
    std::vector<std::int64_t> xStrides;
  };
  struct Regions {
    Tensor source;
    std::vector<Region> boxes;
  };
  // Notes where a Slice's output lies in the tensor it was cut from or, where that tensor is itself noted, in that one's
  // source (torch.roll's Slices of an earlier roll's Concat; Swin's every-other-row Slices of every-other-column ones).
  void noteSliceRegions(const onnx::NodeProto& node, const std::vector<AxisSlice>& slices);
  // A Concat whose inputs are all noted as regions of one source: made as regionsOp on that source, one copy per box
  // (the Slices and any Concat between, read by nothing else, never run), and noted in turn. False where not.
  bool importsConcatOfRegions(const onnx::NodeProto& node, std::uint32_t axis);

  void importSplit(const onnx::NodeProto& node, const Attributes& a);

  void importPad(const onnx::NodeProto& node, const Attributes& a);

  // ---- Indexing (OnnxIndexing.cpp): Gather, GatherND, ScatterND, Trilu, Einsum, and the folds of Slice and Transpose. ----
  // Gather: one constant index of a computed tensor is a slice; otherwise a gather op on the GPU with the data or
  // indices that are constants uploaded (an embedding lookup: a constant table at computed token ids).
  void importGather(const onnx::NodeProto& node, const Attributes& a);
  void importGatherND(const onnx::NodeProto& node, const Attributes& a);
  // ScatterND with constant indices (checked at load, each place once) into computed data or of computed updates.
  void importScatterND(const onnx::NodeProto& node, const Attributes& a);
  void importTrilu(const onnx::NodeProto& node, const Attributes& a);
  // Einsum of two operands as a batched product between transposes and views; other equations refused naming them.
  void importEinsum(const onnx::NodeProto& node, const Attributes& a);
  // The fold of these ops and of Slice and Transpose when all inputs are constants; nullopt for another op.
  std::optional<Constant> foldIndexing(const onnx::NodeProto& node, const Attributes& a);
  // The value of `op` on constants, by its float64 reference (shapes refused as the graph op refuses them).
  Constant foldWithReference(const onnx::NodeProto& node, const std::shared_ptr<const Op>& op, const std::vector<const Constant*>& in,
                             bool integer, std::size_t largest = largestFolded) const;
  // Constant indices, read `dims.size()` to a row (index k of a row along an axis of dims[k]): refused unless whole and
  // within their axis; made non-negative.
  std::vector<std::vector<std::int64_t>> checkedIndices(const onnx::NodeProto& node, const Constant& indices,
                                                        const std::vector<std::int64_t>& dims) const;
  // The dimensions GatherND's index rows run over, its shapes checked.
  std::vector<std::int64_t> gatherNdDims(const onnx::NodeProto& node, const std::vector<std::int64_t>& data,
                                         const std::vector<std::int64_t>& indices, std::int64_t batchDims) const;
  // ScatterND's reduction, and its indices: constant and in range (distinct too where `onGpu`).
  void checkScatterNd(const onnx::NodeProto& node, const Attributes& a, bool onGpu) const;
  // Trilu's k input (0 when absent).
  std::int64_t triluDiagonal(const onnx::NodeProto& node) const;
  // Slice's starts, ends, axes and steps (attributes before opset 10, constant inputs after) for `shape`, clamped.
  std::vector<AxisSlice> sliceSpec(const onnx::NodeProto& node, const Attributes& a, const std::vector<std::int64_t>& shape) const;
  Constant foldSlice(const onnx::NodeProto& node, const Attributes& a) const;
  // Transpose's perm attribute, or the axes reversed.
  static std::vector<std::uint32_t> permutation(const Attributes& a, std::size_t rank);
  // An Einsum equation without spaces: its input terms and output (the letters seen once, sorted, when implicit).
  struct Einsum {
    std::string equation;  // as given, for refusals
    std::vector<std::string> inputs;
    std::string output;
  };
  Einsum parseEinsum(const onnx::NodeProto& node, const Attributes& a) const;
  // Attention written with Einsum (MaxViT's "...id,...jd->...ij", an optional constant mask Add, Softmax over the keys,
  // "...ij,...jd->...id"), from Q·Kᵀ's node: made as the fused op, its chain skipped, when V is computed already and
  // the mask varies along the last three axes only. False leaves the Einsums to run as batched products.
  bool importsEinsumAttention(const onnx::NodeProto& product, const Einsum& e);
  Constant foldEinsum(const onnx::NodeProto& node, const Attributes& a) const;
  // ---- Logic: comparisons, And, Or, Xor, Not, IsNaN, IsInf, Mod and Where (OnnxLogic.cpp) ----
  // Booleans are floats 0 and 1 on the GPU and on the host; any nonzero value reads as true.
  // The broadcast kind of a binary op type of importBinary (Add ... PRelu, the comparisons, And, Or, Xor, and Mod by its
  // fmod attribute).
  static BinaryKind binaryKindOf(const onnx::NodeProto& node, const Attributes& a);
  // Where of computed tensors (constants among its inputs uploaded): c ? x : y, broadcast three ways.
  void importWhere(const onnx::NodeProto& node, const Attributes& a);
  // The comparisons, And, Or, Xor, Mod, Not, IsNaN and IsInf of constants (fold()'s part for them), in float64 by the
  // references the GPU ops are tested against; nullopt for any other op.
  std::optional<Constant> foldLogic(const onnx::NodeProto& node, const Attributes& a) const;

  // Shape arithmetic and other work on constants runs here, at load: a node whose inputs are all constants
  // (or, for Shape, a tensor whose shape is known for the bound batch) becomes a constant itself.
  // Which ops fold, and when, is the table's (OnnxOp::folding).
  bool foldable(const onnx::NodeProto& node, const OnnxOp& op) const;

  // A constant input (a shape, axes, indices, a folded operand): a computed tensor there is refused, never read as empty.
  const Constant& input(const onnx::NodeProto& node, int index) const;
  // A constant's value used as an integer (an index, axis or dimension): refused unless whole and in range,
  // never converted with undefined behaviour.
  std::int64_t whole(const onnx::NodeProto& node, double v) const;
  // A folded constant's shape from values, each dimension from 0 to 2^24, at most largestFolded elements.
  std::vector<std::int64_t> foldedShape(const onnx::NodeProto& node, const std::vector<double>& values) const;

  // The product of some dimensions of a constant, which may be large where another dimension is 0 (no elements,
  // yet loops over the rest would run for ever): refused beyond largestFolded.
  std::size_t boundedProduct(const onnx::NodeProto& node, std::vector<std::int64_t>::const_iterator begin,
                             std::vector<std::int64_t>::const_iterator end) const;

  // The first value of a constant input that must hold at least one.
  double scalar(const onnx::NodeProto& node, int index) const;
  // Axis values, from an attribute (older opsets) or a constant input (newer ones), made non-negative for `rank`.
  std::vector<std::int64_t> axes(const onnx::NodeProto& node, const std::map<std::string, const onnx::AttributeProto*>& a,
                                 int inputIndex, std::int64_t rank) const;

  static std::vector<std::size_t> strides(const std::vector<std::int64_t>& shape);

  // NumPy broadcasting of constants: `combine` over the elements of the broadcast shape.
  Constant broadcast(const onnx::NodeProto& node, const std::vector<const Constant*>& operands,
                     const std::function<double(const std::vector<double>&)>& combine) const;

  // A foldable node's value; `a`: its attributes, checked against its row's.
  Constant fold(const onnx::NodeProto& node, const Attributes& a);

  const onnx::ModelProto& model_;  // parsed once by ParsedOnnx, bound here to one batch size
  std::string path_;
  std::uint32_t batch_ = 0;
  std::optional<InputShapes> shapes_;  // bound input shapes; without them, the batch
  Graph graph_;
  OnnxModel result_;
  std::map<std::string, Value> values_;
  std::map<int, Tensor> softmaxInputs_;                  // softmax output tensor id → its input
  std::map<std::string, int> consumers_;                 // readers of each name: nodes and graph outputs
  std::map<int, Layer> layers_;                          // output tensor id → the dense or conv layer computing it
  std::map<int, Projection> projections_;                // output tensor id (in the MatMul's shape) → its projection
  std::map<int, SplitPart> splitParts_;                  // a Split's output tensor id → where it lies in its source
  std::map<std::string, Regions> regionsOf_;             // a Slice's or Concat's output → the boxes of one source it holds
  std::map<std::string, std::vector<const onnx::NodeProto*>> readers_;  // the nodes reading each name
  std::map<std::string, const onnx::NodeProto*> producers_;             // the node writing each name
  std::set<const onnx::NodeProto*> insideAttention_;                     // nodes a fused attention runs: nothing reads them
  std::map<const onnx::NodeProto*, AttentionMatch> pendingAttention_;    // ·V nodes that make their fused attention
  std::set<const onnx::NodeProto*> fused_;               // pointwise nodes run inside the kernel before them
  std::map<const onnx::NodeProto*, std::string> aliases_;  // a fused node whose result is another name's value
  std::map<std::string, Tensor> scaledInputs_;             // a gate's Mul output -> its scale, applied by the convolution reading it
  std::map<std::string, Tensor> uploaded_;               // constants made parameters, by name
};

}  // namespace glnet::onnximport
