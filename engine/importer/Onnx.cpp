#include "importer/Onnx.h"

#include "importer/OnnxImporter.h"
#include "base/ExactInteger.h"
#include "base/FileInput.h"
#include "base/check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

namespace glnet::onnximport {

OnnxModel Importer::run() {
  const onnx::ModelProto& model = model_;
  result_.opset = onnxOpset(model);
  for (const onnx::StringStringEntryProto& entry : model.metadata_props()) result_.metadata[entry.key()] = entry.value();
  result_.producer = model.producer_name() + (model.producer_version().empty() ? "" : " " + model.producer_version());
  const onnx::GraphProto& graph = model.graph();
  for (const onnx::NodeProto& node : graph.node()) {
    for (const std::string& name : node.output()) producers_[name] = &node;
    for (const std::string& name : node.input()) {
      ++consumers_[name];
      if (readers_[name].empty() || readers_[name].back() != &node) readers_[name].push_back(&node);
    }
  }
  for (const onnx::ValueInfoProto& output : graph.output()) ++consumers_[output.name()];
  for (const onnx::TensorProto& initializer : graph.initializer()) values_[initializer.name()] = {true, readTensor(initializer), {}};
  readInputs(graph);
  // Constant nodes first: they read nothing, and a Clip's bounds must be known when the Conv before it decides
  // whether to fuse it.
  for (const onnx::NodeProto& node : graph.node()) {
    if (node.op_type() == "Constant" && node.input_size() == 0 && (node.domain().empty() || node.domain() == "ai.onnx")) importNode(node);
  }
  for (const onnx::NodeProto& node : graph.node()) {
    if (node.op_type() != "Constant" || node.input_size() != 0 || !(node.domain().empty() || node.domain() == "ai.onnx")) importNode(node);
  }
  if (graph.output_size() < 1) throw Error(path_ + ": the model has no output");
  for (const onnx::ValueInfoProto& port : graph.output()) {
    const Value& output = value(port.name(), "the graph output");
    if (output.constant) throw Error(path_ + ": the output " + port.name() + " is a constant; nothing to run");
    Tensor tensor = output.tensor;
    // A graph output that is an input (Identity) or another output gets a copy of its own.
    const bool taken = std::any_of(result_.outputs.begin(), result_.outputs.end(), [&](const auto& o) { return o.second.id == tensor.id; });
    if (graph_.tensor(tensor).role != TensorRole::computed || taken) tensor = graph_.apply(expandOp(graph_.tensor(tensor).shape), {tensor}, port.name());
    result_.outputs.push_back({port.name(), tensor});
  }
  result_.outputName = result_.outputs[0].first;
  result_.output = result_.outputs[0].second;
  const auto softmax = softmaxInputs_.find(result_.output.id);
  result_.logits = softmax == softmaxInputs_.end() ? result_.output : softmax->second;
  // Ops that a fused kernel made redundant (the Transposes a fused attention reads through) never run.
  std::vector<Tensor> kept{result_.logits};
  for (const auto& output : result_.outputs) kept.push_back(output.second);
  std::vector<int> renumbered;
  result_.graph = graph_.pruned(kept, renumbered);
  // What was uploaded and is still read (a joined projection replaces three).
  result_.parameterBytes = 0;
  for (const TensorNode& t : result_.graph.tensors()) {
    if (t.role == TensorRole::parameter) result_.parameterBytes += t.initial.size() * sizeof(float);
  }
  const auto renumber = [&](Tensor& t) { t.id = renumbered.at(static_cast<std::size_t>(t.id)); };
  for (auto& port : result_.inputs) renumber(port.second);
  for (auto& port : result_.outputs) renumber(port.second);
  for (Tensor* t : {&result_.input, &result_.output, &result_.logits}) renumber(*t);
  return std::move(result_);
}

void Importer::refuse(const onnx::NodeProto& node, const std::string& why) const {
  throw Error(path_ + ": node '" + node.name() + "' (" + node.op_type() + ", opset " + std::to_string(result_.opset) + "): " + why);
}

namespace {

// The NumPy name of the ONNX element types an input may have; empty for the others.
std::string inputTypeName(int type) {
  switch (type) {
    case onnx::TensorProto::FLOAT: return "float32";
    case onnx::TensorProto::UINT8: return "uint8";
    case onnx::TensorProto::INT64: return "int64";
    case onnx::TensorProto::INT32: return "int32";
    case onnx::TensorProto::BOOL: return "bool";
    default: return "";
  }
}

}  // namespace

Shape Importer::boundShape(const onnx::ValueInfoProto& input, std::size_t index, std::map<std::string, std::uint32_t>& symbols) {
  const auto& dims = input.type().tensor_type().shape().dim();
  const bool first = index == 0;
  // The first input's first dimension is the batch, which a scalar does not have.
  if (first && dims.empty() && !shapes_) throw Error(path_ + ": the first input " + input.name() + " is a scalar (shape []); its first dimension must be the batch");
  if (shapes_ && (index >= shapes_->size() || (*shapes_)[index].size() != static_cast<std::size_t>(dims.size()))) {
    throw Error(path_ + ": input " + input.name() + " has " + std::to_string(dims.size()) + " axes" +
                (index < shapes_->size() ? ", not " + std::to_string((*shapes_)[index].size()) : "; no shape was given for it"));
  }
  Shape shape;
  std::vector<std::string>& inputSymbols = result_.inputSymbols.emplace_back();
  for (int i = 0; i < dims.size(); ++i) {
    std::uint32_t bound = 0;
    if (dims[i].has_dim_value()) {
      const std::int64_t d = dims[i].dim_value();
      if (d < 1 || d > (1 << 24)) throw Error(path_ + ": input " + input.name() + " has dimension " + std::to_string(d));
      bound = static_cast<std::uint32_t>(d);
      if (shapes_ && (*shapes_)[index][static_cast<std::size_t>(i)] != bound) {
        throw Error(path_ + ": input " + input.name() + "'s dimension " + std::to_string(i) + " is fixed at " + std::to_string(d) + ", not " +
                    std::to_string((*shapes_)[index][static_cast<std::size_t>(i)]));
      }
      inputSymbols.emplace_back();
    } else {
      const std::string symbol = dims[i].dim_param().empty() ? "?" : dims[i].dim_param();
      inputSymbols.push_back(symbol);
      if (shapes_) {
        bound = (*shapes_)[index][static_cast<std::size_t>(i)];
        if (bound < 1 || bound > (1 << 24)) throw Error(path_ + ": input " + input.name() + "'s dimension " + std::to_string(i) + " bound to " + std::to_string(bound));
      } else {
        bound = i == 0 && batch_ != 0 ? batch_ : 1;
      }
      if (i == 0) result_.dynamicBatch = result_.dynamicBatch || first;
      // A named dimension is one length (input_ids' and attention_mask's "sequence"), whose shape arithmetic the
      // export shares.
      if (symbol != "?") {
        const auto [known, added] = symbols.emplace(symbol, bound);
        if (!added && known->second != bound) {
          throw Error(path_ + ": input " + input.name() + "'s dimension " + std::to_string(i) + " (" + symbol + ") is " + std::to_string(bound) +
                      ", but another input's " + symbol + " is " + std::to_string(known->second));
        }
      }
    }
    shape.push_back(bound);
  }
  if (first && !shapes_ && batch_ != 0 && !shape.empty() && shape[0] != batch_) {
    throw Error(path_ + ": the model's batch is fixed at " + std::to_string(shape[0]) + ", not " + std::to_string(batch_));
  }
  return shape;
}

void Importer::readInputs(const onnx::GraphProto& graph) {
  std::map<std::string, std::uint32_t> symbols;
  for (const onnx::ValueInfoProto& input : graph.input()) {
    if (values_.count(input.name())) continue;  // older exporters list initializers as inputs too
    const int type = input.type().has_tensor_type() ? input.type().tensor_type().elem_type() : 0;
    const std::string typeName = inputTypeName(type);
    if (typeName.empty()) throw Error(path_ + ": input " + input.name() + " is no float32, uint8, int64, int32 or bool tensor");
    if (!input.type().tensor_type().has_shape()) throw Error(path_ + ": input " + input.name() + " has no shape");
    const Tensor tensor = graph_.input(input.name(), boundShape(input, result_.inputs.size(), symbols));
    result_.inputs.push_back({input.name(), tensor});
    result_.inputTypes.push_back(typeName);
    const Element element = type == onnx::TensorProto::BOOL ? Element::boolean
                            : type == onnx::TensorProto::FLOAT || type == onnx::TensorProto::UINT8 ? Element::real : Element::integer;
    values_[input.name()] = {false, {}, tensor, element};
  }
  if (result_.inputs.empty()) throw Error(path_ + ": the model has no input");
  if (shapes_ && shapes_->size() != result_.inputs.size()) {
    throw Error(path_ + ": the model has " + std::to_string(result_.inputs.size()) + " inputs, not " + std::to_string(shapes_->size()));
  }
  result_.inputName = result_.inputs[0].first;
  result_.input = result_.inputs[0].second;
}

const Value& Importer::value(const std::string& name, const std::string& user) const {
  const auto found = values_.find(name);
  if (found == values_.end()) throw Error(path_ + ": " + user + " reads '" + name + "', which no node or initializer makes");
  return found->second;
}

std::map<std::string, const onnx::AttributeProto*> Importer::attributes(const onnx::NodeProto& node, const std::set<std::string>& known) const {
  std::map<std::string, const onnx::AttributeProto*> byName;
  for (const onnx::AttributeProto& attribute : node.attribute()) {
    if (!known.count(attribute.name())) refuse(node, "attribute " + attribute.name() + " is not supported");
    byName[attribute.name()] = &attribute;
  }
  return byName;
}

const Value& Importer::operand(const onnx::NodeProto& node, int index) const {
  if (index >= node.input_size() || node.input(index).empty()) refuse(node, "input " + std::to_string(index) + " is missing");
  return value(node.input(index), "node '" + node.name() + "'");
}

Tensor Importer::tensorInput(const onnx::NodeProto& node, int index) const {
  const Value& v = operand(node, index);
  if (v.constant) refuse(node, "input " + std::to_string(index) + " is a constant where glnet computes a tensor");
  return v.tensor;
}

const Constant* Importer::constantInput(const onnx::NodeProto& node, int index) const {
  if (index >= node.input_size() || node.input(index).empty()) return nullptr;
  const Value& v = value(node.input(index), "node '" + node.name() + "'");
  if (!v.constant) refuse(node, "input " + std::to_string(index) + " must be a constant (an initializer) for glnet so far");
  return &v.host;
}

Tensor Importer::parameter(const std::string& name, const std::vector<std::int64_t>& shape, const std::vector<double>& values,
                           bool infinitiesAllowed) {
  // An empty weight has nothing to run, and a NaN (or an infinite weight) makes every answer NaN: a broken file, said
  // at load by every command alike (glnet_info too, which never runs it).
  for (const std::int64_t d : shape) {
    if (d < 1) throw Error(path_ + ": tensor " + name + " has an empty dimension " + describe(shape) + "; glnet runs no empty tensors");
  }
  if (std::any_of(values.begin(), values.end(), [](double v) { return std::isnan(v); })) throw Error(path_ + ": tensor " + name + " holds NaN values");
  if (!infinitiesAllowed && !std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); })) {
    throw Error(path_ + ": tensor " + name + " holds infinite values");
  }
  return graph_.parameter(name, Shape(shape.begin(), shape.end()), std::vector<float>(values.begin(), values.end()));
}

void Importer::define(const onnx::NodeProto& node, Tensor tensor, const std::string& glnetOp) {
  values_[node.output(0)] = {false, {}, tensor, resultElement(node)};
  result_.nodes.push_back({node.name(), node.op_type(), glnetOp, graph_.tensor(tensor).shape});
}

Tensor Importer::apply(const onnx::NodeProto& node, std::shared_ptr<const Op> op, const std::vector<Tensor>& inputs, const std::string& glnetOp) {
  try {
    const Tensor out = graph_.apply(std::move(op), inputs, node.name());
    define(node, out, glnetOp);
    return out;
  } catch (const Error& error) {
    refuse(node, error.what());
  }
}

void Importer::importNode(const onnx::NodeProto& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") refuse(node, "the domain " + node.domain() + " is not supported");
  if (node.output_size() < 1) refuse(node, "it has no output");
  if (insideAttention_.count(&node)) {
    result_.nodes.push_back({node.name(), node.op_type(), "fused into the attention", {}});
    return;
  }
  if (const auto pending = pendingAttention_.find(&node); pending != pendingAttention_.end()) {
    buildAttention(pending->second);
    return;
  }
  if (fused_.count(&node)) {
    // Its function runs inside the op that computes its input (see fusedPointwise), or that of the node named in
    // aliases_ (SiLU's Mul).
    const auto alias = aliases_.find(&node);
    const Value& in = alias == aliases_.end() ? operand(node, 0) : value(alias->second, "node '" + node.name() + "'");
    values_[node.output(0)] = in;
    result_.nodes.push_back({node.name(), node.op_type(), "fused", graph_.tensor(in.tensor).shape});
    return;
  }
  if (importsGelu(node)) return;
  const std::string& op = node.op_type();
  const OnnxOp* row = findOnnxOp(op);
  if (!row) refuse(node, "the op " + op + " is not supported yet");
  if (result_.opset < row->firstOpset || result_.opset > row->lastOpset) {
    refuse(node, "glnet reads " + op + " at opsets " + std::to_string(row->firstOpset) + " to " + std::to_string(row->lastOpset));
  }
  const Attributes a = attributes(node, row->attributes);
  if (foldable(node, *row)) {
    values_[node.output(0)] = {true, fold(node, a), {}};
    result_.nodes.push_back({node.name(), op, "folded", {}});
    return;
  }
  // An op folded only, of an input that is no constant.
  if (!row->import) refuse(node, "the op " + op + " is not supported yet");
  (this->*row->import)(node, a);
}

void Importer::importConstant(const onnx::NodeProto& node, const Attributes& a) {
  if (!a.count("value")) refuse(node, "only the value attribute is supported");
  values_[node.output(0)] = {true, readTensor(a.at("value")->t()), {}};
  result_.nodes.push_back({node.name(), node.op_type(), "folded", {}});
}

namespace {

Element elementOfType(std::int64_t type) {
  switch (type) {
    case onnx::TensorProto::BOOL: return Element::boolean;
    case onnx::TensorProto::FLOAT: case onnx::TensorProto::DOUBLE: case onnx::TensorProto::FLOAT16: case onnx::TensorProto::BFLOAT16:
      return Element::real;
    default: return Element::integer;
  }
}

}  // namespace

Element Importer::resultElement(const onnx::NodeProto& node) const {
  static const std::set<std::string> booleans{"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Not", "IsNaN", "IsInf"};
  static const std::set<std::string> integers{"Shape", "Size", "ArgMax", "ArgMin", "NonZero"};
  const std::string& op = node.op_type();
  if (booleans.count(op)) return Element::boolean;
  if (integers.count(op)) return Element::integer;
  if (op == "Cast") {
    for (const onnx::AttributeProto& attribute : node.attribute()) {
      if (attribute.name() == "to") return elementOfType(attribute.i());
    }
  }
  const int first = op == "Where" ? 1 : 0;
  if (node.input_size() <= first || node.input(first).empty()) return Element::real;
  const auto found = values_.find(node.input(first));
  if (found == values_.end()) return Element::real;
  return found->second.constant ? (found->second.host.integer ? Element::integer : Element::real) : found->second.element;
}

void Importer::importIdentity(const onnx::NodeProto& node, const Attributes& a) {
  const std::string& op = node.op_type();
  // Training mode drops nothing at ratio 0 (torchvision 0.14's Swin calls F.dropout(p=0.0) in training mode).
  const bool training = op == "Dropout" && node.input_size() > 2 && !node.input(2).empty() && scalar(node, 2) != 0;
  if (training && (node.input_size() > 1 && !node.input(1).empty() ? scalar(node, 1) : real(a, "ratio", 0.5)) != 0) {
    refuse(node, "training mode is not supported");
  }
  if (node.output_size() > 1 && !node.output(1).empty() && consumers_.count(node.output(1))) {
    refuse(node, "the mask output is not supported (inference only)");
  }
  const Value& in = operand(node, 0);
  if (op == "Cast" && !in.constant) {
    const std::int64_t to = integer(a, "to", 0);
    if (to == onnx::TensorProto::STRING || to == 0) refuse(node, "a cast to type " + std::to_string(to) + " is not supported");
    const Element target = elementOfType(to);
    // Every element is a float32 on the GPU: only a real made an integer (truncated) or a number made a boolean
    // (whether it is not zero) changes a value; narrower integer types wrap in ONNX, which token ids and masks never do.
    const bool truncates = target == Element::integer && in.element == Element::real;
    const bool tests = target == Element::boolean && in.element != Element::boolean;
    if (truncates || tests) {
      apply(node, pointwiseOp({truncates ? PointwiseKind::trunc : PointwiseKind::nonZero}), {in.tensor}, truncates ? "trunc" : "not zero");
      return;
    }
    defineAlias(node, {false, {}, in.tensor, target});
    return;
  }
  // Of a constant (PyTorch's Identity on a shared weight), it is folded like any constant node.
  defineAlias(node, in);
}

void Importer::defineAlias(const onnx::NodeProto& node, const Value& value) {
  // A fold into the layer computing a tensor checks that the name it reads is read once: a tensor under a second name
  // that is read elsewhere too takes none.
  if (!value.constant && consumers_[node.input(0)] > 1) layers_.erase(value.tensor.id);
  values_[node.output(0)] = value;
  result_.nodes.push_back({node.name(), node.op_type(), value.constant ? "folded" : "identity", value.constant ? Shape{} : graph_.tensor(value.tensor).shape});
}

void Importer::importPointwise(const onnx::NodeProto& node, const Attributes& a) {
  const std::optional<Pointwise> function = pointwiseOf(node);
  if (!function) {  // Pow of a computed exponent, or of a constant base
    importBinary(node, a);
    return;
  }
  // x·sigmoid(x) (SiLU, EfficientNet's activation) as one op: the sigmoid's tensor is never made.
  const onnx::NodeProto* product = function->kind == PointwiseKind::sigmoid ? soleReader(node.output(0)) : nullptr;
  const bool silu = product && multiplies(*product, node.input(0), node.output(0));
  if (silu) {
    fused_.insert(product);
    aliases_[product] = node.output(0);
  }
  const Pointwise applied = silu ? Pointwise{PointwiseKind::silu} : *function;
  apply(node, pointwiseOp(applied), {tensorInput(node, 0)}, applied.name());
}

void Importer::importGlobalPool(const onnx::NodeProto& node, const Attributes&) {
  const Tensor x = tensorInput(node, 0);
  const auto rank = static_cast<std::uint32_t>(shapeOf(x).size());
  if (rank < 3) refuse(node, "the input must be [N, C, spatial...]");
  apply(node, axisOp(node.op_type() == "GlobalAveragePool" ? AxisKind::mean : AxisKind::max, 2, rank, true), {x}, "global pool");
}

void Importer::importTranspose(const onnx::NodeProto& node, const Attributes& a) {
  const Tensor x = tensorInput(node, 0);
  const Shape& in = shapeOf(x);
  const std::vector<std::uint32_t> axes = permutation(a, in.size());
  // nn.MultiheadAttention's [1, S, E] -> [S, 1, E] at batch 1: a view, no dispatch.
  if (movesNoElement(axes, in)) {
    Shape out;
    for (const std::uint32_t axis : axes) out.push_back(in[axis]);
    apply(node, reshapeOp(out), {x}, "view (only axes of length 1 move)");
  } else {
    apply(node, transposeOp(axes), {x}, "transpose");
  }
  // The layer computing X, read by this alone, computes the result too: its channels lie where the transpose moved them.
  const auto layer = layers_.find(x.id);
  if (layer != layers_.end() && consumers_[node.input(0)] == 1 && !layer->second.functionPastBatchNorm) {
    const auto moved = std::find(axes.begin(), axes.end(), layer->second.channelAxis);
    layers_[values_.at(node.output(0)).tensor.id] = {layer->second.weight, layer->second.bias, static_cast<std::uint32_t>(moved - axes.begin())};
  }
}

bool Importer::movesNoElement(const std::vector<std::uint32_t>& axes, const Shape& in) {
  if (axes.size() != in.size()) return false;
  std::vector<bool> seen(in.size(), false);
  std::uint32_t previous = 0;
  for (const std::uint32_t axis : axes) {
    if (axis >= in.size() || seen[axis]) return false;
    seen[axis] = true;
    if (in[axis] == 1) continue;
    if (axis < previous) return false;
    previous = axis;
  }
  return true;
}

bool Importer::addsIntoProjection(const onnx::NodeProto& add) {
  if (add.op_type() != "Add" || add.input_size() != 2 || add.input(0) == add.input(1)) return false;
  for (const int side : {0, 1}) {
    const Value& x = operand(add, side);
    const Value& residual = operand(add, 1 - side);
    const Shape shape = x.constant ? Shape{} : shapeOf(x.tensor);
    if (x.constant || residual.constant || shapeOf(residual.tensor) != shape || !readOnlyBy(add.input(side), {&add})) continue;
    // Back from X through nodes that keep its elements in order, each read by the next alone (and by nodes reading its
    // shape only), to a projection.
    std::string at = add.input(side);
    bool found = true;
    while (!projections_.count(values_.at(at).tensor.id)) {
      const auto producer = producers_.find(at);
      found = producer != producers_.end() && keepsElementOrder(*producer->second) && readOnlyBy(producer->second->input(0), {producer->second});
      if (!found) break;
      at = producer->second->input(0);
    }
    if (!found) continue;
    const int id = values_.at(at).tensor.id;
    // The projection under another name (an Identity's, or the MatMul's before its fused bias Add): read only by nodes
    // fused into it, or for its shape.
    const bool readElsewhere = std::any_of(values_.begin(), values_.end(), [&](const auto& named) {
      if (named.first == at || named.second.constant || named.second.tensor.id != id) return false;
      const auto readers = readers_.find(named.first);
      const std::size_t count = readers == readers_.end() ? 0 : readers->second.size();
      if (consumers_.count(named.first) && consumers_.at(named.first) != static_cast<int>(count)) return true;  // a graph output
      return readers != readers_.end() && std::any_of(readers->second.begin(), readers->second.end(), [&](const onnx::NodeProto* reader) {
               return !fused_.count(reader) && !readsShapeOnly(*reader, 3);
             });
    });
    if (readElsewhere) continue;
    const Projection projection = projections_.at(id);
    const std::uint32_t rows = shapeOf(projection.rows)[0];
    const Tensor residualRows = graph_.apply(reshapeOp({rows, projection.outputs}), {residual.tensor});
    const Tensor out = graph_.apply(denseResidualOp(), {projection.rows, projection.weight, projection.bias, residualRows}, nameOf(add));
    projections_.erase(id);
    values_[add.output(0)] = {false, {}, graph_.apply(reshapeOp(shape), {out})};
    result_.nodes[projection.summary].glnetOp = "dense + residual (the Add after its views)";
    result_.nodes.push_back({add.name(), add.op_type(), "fused", shape});
    return true;
  }
  return false;
}

bool Importer::keepsElementOrder(const onnx::NodeProto& node) const {
  const std::string& op = node.op_type();
  if (!(node.domain().empty() || node.domain() == "ai.onnx") || node.input_size() < 1 || node.output_size() != 1 || fused_.count(&node)) return false;
  if (op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" || op == "Flatten") return true;
  if (op != "Transpose") return false;
  const Shape& in = shapeOf(values_.at(node.input(0)).tensor);
  return movesNoElement(permutation(attributes(node, {"perm"}), in.size()), in);
}

void Importer::importConcat(const onnx::NodeProto& node, const Attributes& a) {
  std::vector<Tensor> parts;
  for (int i = 0; i < node.input_size(); ++i) parts.push_back(tensorOrConstant(node, i));
  const std::int64_t axis = normalizedAxis(node, integer(a, "axis", 0), shapeOf(parts[0]).size());
  if (importsConcatOfRegions(node, static_cast<std::uint32_t>(axis))) return;
  apply(node, concatOp(static_cast<std::uint32_t>(axis)), parts, "concat");
}

void Importer::importExpand(const onnx::NodeProto& node, const Attributes&) {
  const Tensor x = tensorInput(node, 0);
  const std::vector<std::int64_t> shape = foldedShape(node, input(node, 1).values);
  apply(node, expandOp(Shape(shape.begin(), shape.end())), {x}, "expand");
}

std::int64_t Importer::normalizedAxis(const onnx::NodeProto& node, std::int64_t axis, std::size_t rank, bool inclusiveEnd) const {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis > r - (inclusiveEnd ? 0 : 1)) refuse(node, "axis " + std::to_string(axis) + " is outside rank " + std::to_string(rank));
  return axis < 0 ? axis + r : axis;
}

Tensor Importer::tensorOrConstant(const onnx::NodeProto& node, int index) {
  const Value& v = operand(node, index);
  if (!v.constant) return v.tensor;
  const std::string& name = node.input(index);
  if (const auto found = uploaded_.find(name); found != uploaded_.end()) return found->second;
  // The GPU holds integers as float32 (base/ExactInteger.h): one it would round is refused, as in an input.
  if (v.host.integer) {
    for (const double x : v.host.values) {
      if (std::abs(x) > static_cast<double>(largestExactInteger)) refuse(node, "the integer constant " + name + " holds a value beyond ±2^24, which the GPU's float32 would round");
    }
  }
  return uploaded_[name] = parameter(name, v.host.shape, v.host.values, true);
}

void Importer::importProduct(const onnx::NodeProto& node, const Attributes& a) {
  const bool gemm = node.op_type() == "Gemm";
  const Value& right = operand(node, 1);
  if (!gemm && (!right.constant || right.host.shape.size() != 2)) {
    const bool computed = !gemm && !operand(node, 0).constant && !right.constant;
    const std::string unfused = computed ? importAttention(node) : "no attention";
    if (unfused.empty() || (computed && importLateAttention(node).empty())) return;
    const Tensor x = tensorOrConstant(node, 0), y = tensorOrConstant(node, 1);
    if (shapeOf(x).size() < 2 || shapeOf(y).size() < 2) refuse(node, "products of 1-D tensors are not supported");
    // Where Q·Kᵀ was found but the rest differs, glnet_info says why the attention runs op by op.
    const bool softmaxFollows = unfused != "no attention" && unfused.rfind("no Softmax", 0) != 0;
    apply(node, batchedMatMulOp(), {x, y}, softmaxFollows ? "batched matmul (attention unfused: " + unfused + ")" : "batched matmul");
    return;
  }
  if (integer(a, "transA", 0) != 0) refuse(node, "transA = 1 is not supported");
  const Tensor x = tensorInput(node, 0);
  const Shape xShape = shapeOf(x);
  if (xShape.size() < 2 || (gemm && xShape.size() != 2)) refuse(node, "A must be a matrix, not " + glnet::describe(xShape));
  const Constant* b = constantInput(node, 1);
  if (!b || b->shape.size() != 2) refuse(node, "B must be a constant matrix");
  const bool transposed = integer(a, "transB", 0) != 0;
  const std::int64_t inputs = transposed ? b->shape[1] : b->shape[0], outputs = transposed ? b->shape[0] : b->shape[1];
  if (inputs != xShape.back()) refuse(node, "A has " + std::to_string(xShape.back()) + " columns but B takes " + std::to_string(inputs));
  if (outputs < 1) refuse(node, "B has no columns");
  const double alpha = real(a, "alpha", 1.0), beta = real(a, "beta", 1.0);
  std::vector<double> weight(static_cast<std::size_t>(outputs * inputs));  // [out, in], as glnet's dense layer takes it
  for (std::int64_t o = 0; o < outputs; ++o) {
    for (std::int64_t i = 0; i < inputs; ++i) {
      weight[static_cast<std::size_t>(o * inputs + i)] = alpha * b->values[static_cast<std::size_t>(transposed ? o * inputs + i : i * outputs + o)];
    }
  }
  std::vector<double> bias(static_cast<std::size_t>(outputs), 0.0);
  if (const Constant* c = gemm ? constantInput(node, 2) : nullptr) {
    const std::size_t count = c->elements();
    if ((count != 1 && count != bias.size()) || (!c->shape.empty() && c->shape.back() != static_cast<std::int64_t>(count))) {
      refuse(node, "C must broadcast along the rows ([N] or a scalar), not " + describe(c->shape));
    }
    for (std::size_t o = 0; o < bias.size(); ++o) bias[o] = beta * c->values[count == 1 ? 0 : o];
  }
  // A bias Add after the product (nn.Linear as MatMul + Add), of any rank of A, joins the layer's bias: no broadcast add.
  const auto biasAdd = fusableBias(node, outputs, xShape.size());
  if (biasAdd) {
    for (std::size_t o = 0; o < bias.size(); ++o) bias[o] += biasAdd->second->values[o];
  }
  const std::string name = nameOf(node);
  const Tensor weightTensor = parameter(name + ".weight", {outputs, inputs}, weight);
  const Tensor biasTensor = parameter(name + ".bias", {outputs}, bias);
  const std::uint32_t rows = static_cast<std::uint32_t>(elementCount(xShape) / xShape.back());
  const Tensor rowsView = xShape.size() == 2 ? x : graph_.apply(reshapeOp({rows, xShape.back()}), {x});
  Shape outShape(xShape.begin(), xShape.end() - 1);
  outShape.push_back(static_cast<std::uint32_t>(outputs));
  // A residual Add that alone reads the result (a transformer's skip connection) is added as the layer stores it.
  const onnx::NodeProto& biased = biasAdd ? *biasAdd->first : node;
  const auto residual = fusableResidual(biased, outShape);
  const Pointwise function =
      fusedPointwise(residual ? *residual->first : biased, [](const Pointwise&) { return true; }, xShape.size() == 2 && !residual);
  const std::optional<Activation> activation = asActivation(function);
  Tensor out;
  if (residual) {
    const Tensor residualRows = xShape.size() == 2 ? residual->second : graph_.apply(reshapeOp({rows, static_cast<std::uint32_t>(outputs)}), {residual->second});
    out = graph_.apply(denseResidualOp(function), {rowsView, weightTensor, biasTensor, residualRows}, name);
  } else {
    out = graph_.apply(denseOp(activation.value_or(Activation::none), activation ? Pointwise{} : function), {rowsView, weightTensor, biasTensor}, name);
    // A later constant Add or BatchNormalization folds into the weights only where nothing comes between, or where the
    // function was found past a BatchNormalization that alone reads the layer (it must fold, coming first).
    const onnx::NodeProto* reader = soleReader(biased.output(0));
    const bool batchNormFirst = reader && reader->op_type() == "BatchNormalization";
    if (activation == Activation::none || batchNormFirst) layers_[out.id] = {weightTensor, biasTensor, 1, function.kind != PointwiseKind::identity};
  }
  if (xShape.size() != 2) {
    const auto layer = layers_.find(out.id);
    out = graph_.apply(reshapeOp(outShape), {out});
    if (layer != layers_.end()) layers_[out.id] = {layer->second.weight, layer->second.bias, static_cast<std::uint32_t>(outShape.size() - 1), layer->second.functionPastBatchNorm};
  }
  if (!residual && function.kind == PointwiseKind::identity) {
    projections_[out.id] = {x, rowsView, weightTensor, biasTensor, static_cast<std::uint32_t>(outputs), result_.nodes.size()};
  }
  define(node, out, std::string("dense") + (residual ? " + residual" : "") + (function.kind == PointwiseKind::identity ? "" : " + " + function.name()));
}

void Importer::importBinary(const onnx::NodeProto& node, const Attributes& options) {
  const std::string& op = node.op_type();
  if (node.input_size() != 2) refuse(node, "only two inputs are supported");
  if (sumsIntoNormalization(node)) return;
  if (addsIntoProjection(node)) return;
  const Value& left = operand(node, 0);
  const Value& right = operand(node, 1);
  if (op == "Add" && (left.constant != right.constant)) {
    const Tensor x = left.constant ? right.tensor : left.tensor;
    const Constant& c = left.constant ? left.host : right.host;
    const auto layer = layers_.find(x.id);
    const Shape shape = shapeOf(x);
    if (layer != layers_.end() && !layer->second.functionPastBatchNorm && layer->second.channelAxis == 1 && shape.size() == 2 &&
        consumers_[node.input(left.constant ? 1 : 0)] == 1 && c.elements() == shape[1] && !c.shape.empty() && c.shape.size() <= 2 &&
        c.shape.back() == shape[1]) {
      std::vector<float> bias = graph_.tensor(layer->second.bias).initial;
      for (std::size_t o = 0; o < bias.size(); ++o) bias[o] = static_cast<float>(bias[o] + c.values[o]);
      graph_.setInitial(layer->second.bias, std::move(bias));
      layers_[x.id] = layer->second;
      values_[node.output(0)] = {false, {}, x};
      result_.nodes.push_back({node.name(), op, "folded", shape});
      return;
    }
  }
  if (op == "Mul" && scalesLayer(node)) return;
  if (op == "Mul") {
    for (const int side : {0, 1}) {
      if (!channelScale(node, side)) continue;
      const Tensor x = tensorOrConstant(node, 1 - side), scale = tensorOrConstant(node, side);
      if (scalesConvolutionInput(node, side)) {
        values_[node.output(0)] = operand(node, 1 - side);
        scaledInputs_[node.output(0)] = scale;
        result_.nodes.push_back({node.name(), op, "fused into the convolution reading it", shapeOf(x)});
        return;
      }
      const Pointwise after = fusedPointwise(node, [](const Pointwise&) { return true; });
      apply(node, channelAffineOp(false, after), {x, scale}, "channel scale");
      return;
    }
  }
  const Tensor a = tensorOrConstant(node, 0), b = tensorOrConstant(node, 1);
  // A quotient of integers (an index computed on the GPU) is truncated toward zero, as ONNX and C divide.
  const bool integerDivision = op == "Div" && resultElement(node) == Element::integer;
  const Pointwise after = integerDivision ? Pointwise{} : fusedPointwise(node, [](const Pointwise&) { return true; });
  apply(node, broadcastOp(integerDivision ? BinaryKind::integerDivide : binaryKindOf(node, options), after), {a, b}, op == "Add" ? "add" : "broadcast");
}

void Importer::importVariadic(const onnx::NodeProto& node, const Attributes& a) {
  const std::string& op = node.op_type();
  if ((op == "Max" || op == "Min") && node.input_size() == 2) {  // with a function after it fused, as Add's
    importBinary(node, a);
    return;
  }
  const BinaryKind kind = op == "Max" ? BinaryKind::maximum : op == "Min" ? BinaryKind::minimum : BinaryKind::add;
  Tensor total = tensorOrConstant(node, 0);
  try {
    for (int i = 1; i < node.input_size(); ++i) total = graph_.apply(broadcastOp(kind), {total, tensorOrConstant(node, i)}, nameOf(node));
    if (op == "Mean" && node.input_size() > 1) {
      const Tensor scale = parameter(nameOf(node) + ".scale", {1}, {1.0 / node.input_size()});
      total = graph_.apply(broadcastOp(BinaryKind::multiply), {total, scale}, nameOf(node));
    } else if (node.input_size() == 1) {
      total = graph_.apply(expandOp(shapeOf(total)), {total}, nameOf(node));  // a copy
    }
  } catch (const Error& error) {
    refuse(node, error.what());
  }
  define(node, total, "broadcast");
}

std::array<std::uint32_t, 4> Importer::windowPads(const onnx::NodeProto& node, const std::map<std::string, const onnx::AttributeProto*>& a,
                                                  const Shape& x, const std::array<std::uint32_t, 2>& kernel,
                                                  const std::array<std::uint32_t, 2>& strides,
                                                  const std::array<std::uint32_t, 2>& dilations) const {
  const std::string autoPad = a.count("auto_pad") ? a.at("auto_pad")->s() : "NOTSET";
  std::array<std::uint32_t, 4> pads{0, 0, 0, 0};
  if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (int k = 0; k < 2; ++k) {
      const std::int64_t size = x[2 + k], out = (size + strides[k] - 1) / strides[k];
      const std::int64_t total = std::max<std::int64_t>((out - 1) * strides[k] + (std::int64_t{kernel[k]} - 1) * dilations[k] + 1 - size, 0);
      const auto small = static_cast<std::uint32_t>(total / 2), large = static_cast<std::uint32_t>(total - total / 2);
      pads[k] = autoPad == "SAME_UPPER" ? small : large;
      pads[2 + k] = autoPad == "SAME_UPPER" ? large : small;
    }
    return pads;
  }
  if (autoPad != "NOTSET" && autoPad != "VALID") refuse(node, "auto_pad " + autoPad + " is not supported");
  const std::vector<std::int64_t> given = integers(a, "pads");
  if (autoPad == "VALID" || given.empty()) return pads;
  if (given.size() != 4) refuse(node, "pads must hold 4 values for a 2-D window");
  for (int k = 0; k < 4; ++k) {
    if (given[k] < 0 || given[k] > (1 << 16)) refuse(node, "a pad of " + std::to_string(given[k]) + " is not supported");
    pads[k] = static_cast<std::uint32_t>(given[k]);
  }
  return pads;
}

std::array<std::uint32_t, 2> Importer::pair(const onnx::NodeProto& node, const std::map<std::string, const onnx::AttributeProto*>& a,
                                            const std::string& name, std::uint32_t otherwise) const {
  const std::vector<std::int64_t> given = integers(a, name);
  if (given.empty()) return {otherwise, otherwise};
  if (given.size() != 2) refuse(node, name + " must hold 2 values: glnet runs 2-D windows");
  for (const std::int64_t v : given) {
    if (v < 1 || v > (1 << 16)) refuse(node, name + " holds " + std::to_string(v));
  }
  return {static_cast<std::uint32_t>(given[0]), static_cast<std::uint32_t>(given[1])};
}

std::map<std::string, onnx::AttributeProto> Importer::widened(const std::map<std::string, const onnx::AttributeProto*>& a) {
  std::map<std::string, onnx::AttributeProto> result;
  for (const auto& [name, attribute] : a) {
    onnx::AttributeProto copy = *attribute;
    if (name == "kernel_shape" || name == "strides" || name == "dilations") {
      copy.clear_ints();
      copy.add_ints(1);
      for (const std::int64_t v : attribute->ints()) copy.add_ints(v);
    } else if (name == "pads" && attribute->ints_size() == 2) {
      copy.clear_ints();
      for (const std::int64_t v : {std::int64_t{0}, attribute->ints(0), std::int64_t{0}, attribute->ints(1)}) copy.add_ints(v);
    }
    result[name] = copy;
  }
  return result;
}

std::map<std::string, const onnx::AttributeProto*> Importer::pointers(const std::map<std::string, onnx::AttributeProto>& a) {
  std::map<std::string, const onnx::AttributeProto*> result;
  for (const auto& [name, attribute] : a) result[name] = &attribute;
  return result;
}

Tensor Importer::asImage(const onnx::NodeProto& node, Tensor x) {
  const Shape shape = shapeOf(x);
  if (shape.size() == 4) return x;
  if (shape.size() != 3) refuse(node, "X must be [N, C, L] or [N, C, H, W]: glnet runs 1-D and 2-D windows");
  return graph_.apply(reshapeOp({shape[0], shape[1], 1, shape[2]}), {x});
}

void Importer::defineWindow(const onnx::NodeProto& node, Tensor input, Tensor out, const std::string& glnetOp) {
  const Shape shape = shapeOf(out);
  if (shapeOf(input).size() == 3) out = graph_.apply(reshapeOp({shape[0], shape[1], shape[3]}), {out});
  define(node, out, glnetOp);
}

void Importer::importExpansion(const onnx::NodeProto& node, const Expansion& e) {
  const Constant& point = *constantInput(*e.point, 1);
  const Constant& wide = *constantInput(*e.wide, 1);
  const std::int64_t k = wide.shape[2], channels = wide.shape[1], pointOut = point.shape[0], wideOut = wide.shape[0];
  if (point.shape[1] != channels) refuse(node, "the two expansions read different channel counts");
  std::vector<double> weights, bias;
  for (const bool pointPart : {e.pointFirst, !e.pointFirst}) {
    const onnx::NodeProto& conv = pointPart ? *e.point : *e.wide;
    const std::int64_t outputs = pointPart ? pointOut : wideOut;
    for (std::int64_t o = 0; o < outputs; ++o) {
      for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t t = 0; t < k * k; ++t) {
          weights.push_back(pointPart ? (t == k * k / 2 ? point.values[static_cast<std::size_t>(o * channels + c)] : 0.0)
                                      : wide.values[static_cast<std::size_t>((o * channels + c) * k * k + t)]);
        }
      }
    }
    const Constant* b = constantInput(conv, 2);
    if (b && b->elements() != static_cast<std::size_t>(outputs)) refuse(conv, "B must be [" + std::to_string(outputs) + "]");
    for (std::int64_t o = 0; o < outputs; ++o) bias.push_back(b ? b->values[static_cast<std::size_t>(o)] : 0.0);
  }
  const std::string name = nameOf(*e.concat);
  const Tensor weight = parameter(name + ".weight", {pointOut + wideOut, channels, k, k}, weights);
  const Tensor b = parameter(name + ".bias", {pointOut + wideOut}, bias);
  const std::optional<Activation> activation = asActivation(e.function);
  const Tensor out = apply(node, conv2dOp(activation.value_or(Activation::none), static_cast<std::uint32_t>(k / 2), 1,
                                          activation ? Pointwise{} : e.function),
                           {tensorInput(node, 0), weight, b}, "joined conv");
  values_[e.concat->output(0)] = {false, {}, out};
  for (const onnx::NodeProto* joined : {e.point, e.wide, e.concat}) {
    if (joined == &node) continue;
    fused_.insert(joined);
    aliases_[joined] = e.concat->output(0);
  }
  for (const onnx::NodeProto* function : e.functionNodes) {
    fused_.insert(function);
    aliases_[function] = e.concat->output(0);
  }
}

void Importer::importConv(const onnx::NodeProto& node, const Attributes& given) {
  if (const std::optional<Expansion> expansion = expandsTogether(node)) {
    importExpansion(node, *expansion);
    return;
  }
  const Tensor input = tensorInput(node, 0);
  const Constant* w = constantInput(node, 1);
  if (!w || (w->shape.size() != 4 && w->shape.size() != 3)) refuse(node, "W must be a constant [out_c, in_c/group, (kh,) kw]: glnet runs 1-D and 2-D convolutions");
  if (shapeOf(input).size() != w->shape.size()) refuse(node, "X and W differ in rank");
  if (std::any_of(w->shape.begin(), w->shape.end(), [](std::int64_t d) { return d < 1; })) refuse(node, "W " + describe(w->shape) + " is empty");
  const std::map<std::string, onnx::AttributeProto> wide = w->shape.size() == 3 ? widened(given) : std::map<std::string, onnx::AttributeProto>{};
  const auto a = w->shape.size() == 3 ? pointers(wide) : given;
  std::vector<std::int64_t> wShape = w->shape;
  if (wShape.size() == 3) wShape.insert(wShape.begin() + 2, 1);
  const Tensor x = asImage(node, input);
  ConvSettings settings;
  settings.strides = pair(node, a, "strides", 1);
  settings.dilations = pair(node, a, "dilations", 1);
  const std::int64_t groups = integer(a, "group", 1);
  if (groups < 1 || groups > (1 << 20)) refuse(node, "group = " + std::to_string(groups));
  settings.groups = static_cast<std::uint32_t>(groups);
  const std::array<std::uint32_t, 2> kernel{static_cast<std::uint32_t>(wShape[2]), static_cast<std::uint32_t>(wShape[3])};
  if (a.count("kernel_shape") && pair(node, a, "kernel_shape", 1) != kernel) {
    refuse(node, "kernel_shape " + describe(integers(given, "kernel_shape")) + " differs from the weight " + describe(w->shape));
  }
  settings.pads = windowPads(node, a, shapeOf(x), kernel, settings.strides, settings.dilations);
  std::vector<double> bias(static_cast<std::size_t>(w->shape[0]), 0.0);
  if (const Constant* b = constantInput(node, 2)) {
    if (b->elements() != bias.size()) refuse(node, "B must be [" + std::to_string(bias.size()) + "]");
    bias = b->values;
  }
  const std::string name = nameOf(node);
  const Tensor weight = parameter(name + ".weight", wShape, w->values), b = parameter(name + ".bias", {w->shape[0]}, bias);
  // pads are [top, left, bottom, right]: the implicit GEMM takes each axis padded alike on both sides (top and bottom
  // may differ from left and right, as a 1×k or k×1 kernel's "same" padding), by less than the kernel.
  const bool evenPadding = settings.pads[0] == settings.pads[2] && settings.pads[1] == settings.pads[3] &&
                           settings.pads[0] < kernel[0] && settings.pads[1] < kernel[1];
  const std::optional<std::uint32_t> widthPadding =
      settings.pads[1] != settings.pads[0] ? std::optional<std::uint32_t>(settings.pads[1]) : std::nullopt;
  const bool implicitGemm = settings.groups == 1 && settings.strides[0] == settings.strides[1] &&
                            settings.dilations == std::array<std::uint32_t, 2>{1, 1} && evenPadding;
  // A squeeze-excite gate this convolution applies as it reads X (scalesConvolutionInput).
  const auto scaled = scaledInputs_.find(node.input(0));
  const std::optional<Tensor> inputScale = scaled == scaledInputs_.end() ? std::nullopt : std::optional<Tensor>(scaled->second);
  const auto withScale = [&](std::vector<Tensor> inputs) {
    if (inputScale) inputs.push_back(*inputScale);
    return inputs;
  };
  Tensor out;
  bool pooled = false, residual = false;
  // A function fused right after the convolution (not past a BatchNormalization that folds into it first).
  bool functionAfter = false;
  // A function fused past the BatchNormalization that alone reads the convolution (applied after it folds in).
  bool functionPastBatchNorm = false;
  const onnx::NodeProto* reader = soleReader(node.output(0));
  const bool batchNormFirst = reader && reader->op_type() == "BatchNormalization";
  try {
    const Shape xShape = shapeOf(x);
    const std::uint32_t pad = settings.pads[0], padWidth = settings.pads[1], stride = settings.strides[0];
    const auto residualAdd = implicitGemm && w->shape.size() == 4 && xShape[2] + 2 * pad >= kernel[0] && xShape[3] + 2 * padWidth >= kernel[1]
                                 ? fusableResidual(node, {xShape[0], static_cast<std::uint32_t>(wShape[0]), (xShape[2] + 2 * pad - kernel[0]) / stride + 1,
                                                          (xShape[3] + 2 * padWidth - kernel[1]) / stride + 1})
                                 : std::nullopt;
    if (residualAdd) {
      const Pointwise after = fusedPointwise(*residualAdd->first, [](const Pointwise&) { return true; });
      out = graph_.apply(conv2dResidualOp(pad, stride, after, inputScale.has_value(), widthPadding), withScale({x, weight, b, residualAdd->second}), name);
      residual = true;
    } else if (implicitGemm) {
      const Pointwise function = fusedPointwise(node, [](const Pointwise&) { return true; }, true);
      functionAfter = function.kind != PointwiseKind::identity && !batchNormFirst;
      functionPastBatchNorm = function.kind != PointwiseKind::identity && batchNormFirst;
      const std::optional<Activation> activation = asActivation(function);
      const onnx::NodeProto* pool =
          activation && !inputScale && !widthPadding && w->shape.size() == 4 && settings.strides[0] == 1 ? fusablePool(node) : nullptr;
      const bool poolable = pool && xShape[2] + 2 * settings.pads[0] >= kernel[0] + 1 && xShape[3] + 2 * settings.pads[0] >= kernel[1] + 1;
      if (poolable) {
        out = graph_.apply(conv2dMaxPoolOp(*activation, settings.pads[0]), {x, weight, b}, name);
        fused_.insert(pool);
        pooled = true;
      } else {
        out = graph_.apply(conv2dOp(activation.value_or(Activation::none), settings.pads[0], settings.strides[0],
                                    activation ? Pointwise{} : function, inputScale.has_value(), widthPadding),
                           withScale({x, weight, b}), name);
      }
    } else {
      GLNET_ASSERT(!inputScale, "a scaled input is fused only into a convolution the implicit GEMM runs");
      const Pointwise after = fusedPointwise(node, [](const Pointwise&) { return true; }, true);
      functionAfter = after.kind != PointwiseKind::identity && !batchNormFirst;
      functionPastBatchNorm = after.kind != PointwiseKind::identity && batchNormFirst;
      out = graph_.apply(groupedConvOp(settings, after), {x, weight, b}, name);
    }
  } catch (const Error& error) {
    refuse(node, error.what());
  }
  // A BatchNormalization after the pooling cannot fold into the weights (a negative scale would turn max into min),
  // nor after a residual (it would scale the residual too), nor after a function the kernel applies (Conv, Relu,
  // BatchNormalization: folded, it would act before the function).
  const bool foldsLater = !pooled && !residual && !functionAfter;
  if (foldsLater) layers_[out.id] = {weight, b, 1, functionPastBatchNorm};
  defineWindow(node, input, out, pooled ? "conv + max pool" : residual ? "conv + residual" : implicitGemm ? "conv" : settings.groups > 1 ? "grouped conv" : "direct conv");
  if (foldsLater && shapeOf(input).size() == 3) layers_[values_[node.output(0)].tensor.id] = {weight, b, 1, functionPastBatchNorm};
}

void Importer::importBatchNormalization(const onnx::NodeProto& node, const Attributes& a) {
  if (integer(a, "training_mode", 0) != 0) refuse(node, "training mode is not supported (export the model in eval mode)");
  if (integer(a, "spatial", 1) != 1) refuse(node, "spatial = 0 is not supported");
  if (node.output_size() > 1 && std::any_of(node.output().begin() + 1, node.output().end(), [](const std::string& o) { return !o.empty(); })) {
    refuse(node, "the running-statistics outputs are for training; export the model in eval mode");
  }
  const Tensor x = tensorInput(node, 0);
  const Shape shape = shapeOf(x);
  if (shape.size() < 2) refuse(node, "X must be [N, C, ...]");
  const std::size_t channels = shape[1];
  const double epsilon = real(a, "epsilon", 1e-5);
  std::vector<const Constant*> constants;
  for (int i = 1; i <= 4; ++i) {
    const Constant* c = constantInput(node, i);
    if (!c || c->elements() != channels) refuse(node, "scale, B, mean and var must be constants of " + std::to_string(channels) + " values");
    constants.push_back(c);
  }
  if (const std::string problem = onnxformat::varianceProblem(constants[3]->values, epsilon); !problem.empty()) refuse(node, problem);
  std::vector<double> factor(channels), shift(channels);
  for (std::size_t c = 0; c < channels; ++c) {
    factor[c] = constants[0]->values[c] / std::sqrt(constants[3]->values[c] + epsilon);
    shift[c] = constants[1]->values[c] - constants[2]->values[c] * factor[c];
  }
  const auto layer = layers_.find(x.id);
  if (layer != layers_.end() && layer->second.channelAxis == 1 && consumers_[node.input(0)] == 1) {
    foldIntoLayer(layer->second, factor, shift);
    // The function fused past this normalization applies to what the layer computes now: nothing more folds into it.
    if (layer->second.functionPastBatchNorm) layers_.erase(layer);
    values_[node.output(0)] = {false, {}, x};
    result_.nodes.push_back({node.name(), node.op_type(), "folded", shape});
    return;
  }
  const std::string name = nameOf(node);
  const std::vector<std::int64_t> perChannel{static_cast<std::int64_t>(channels)};
  const Pointwise after = fusedPointwise(node, [](const Pointwise&) { return true; });
  apply(node, channelAffineOp(true, after), {x, parameter(name + ".factor", perChannel, factor), parameter(name + ".shift", perChannel, shift)},
        "channel affine");
}

void Importer::importPool(const onnx::NodeProto& node, const Attributes& given) {
  const bool average = node.op_type() == "AveragePool";
  if (node.output_size() > 1 && !node.output(1).empty()) refuse(node, "the indices output is not supported");
  const Tensor input = tensorInput(node, 0);
  const bool line = shapeOf(input).size() == 3;
  const std::map<std::string, onnx::AttributeProto> wide = line ? widened(given) : std::map<std::string, onnx::AttributeProto>{};
  const auto a = line ? pointers(wide) : given;
  const Tensor x = asImage(node, input);
  PoolSettings s;
  s.average = average;
  if (!a.count("kernel_shape")) refuse(node, "kernel_shape is missing");
  s.kernel = pair(node, a, "kernel_shape", 1);
  s.strides = pair(node, a, "strides", 1);
  s.dilations = pair(node, a, "dilations", 1);
  if (average && s.dilations != std::array<std::uint32_t, 2>{1, 1}) refuse(node, "dilations in average pooling are not supported");
  s.pads = windowPads(node, a, shapeOf(x), s.kernel, s.strides, s.dilations);
  s.ceilMode = integer(a, "ceil_mode", 0) != 0;
  s.countIncludePad = integer(a, "count_include_pad", 0) != 0;
  // A 1x1 window with stride 1 and no padding copies its input (vgg's AdaptiveAvgPool2d(7) on a 7x7 map).
  if (s.kernel == std::array<std::uint32_t, 2>{1, 1} && s.strides == std::array<std::uint32_t, 2>{1, 1} &&
      s.pads == std::array<std::uint32_t, 4>{0, 0, 0, 0}) {
    defineAlias(node, operand(node, 0));
    return;
  }
  try {
    defineWindow(node, input, graph_.apply(poolOp(s), {x}, nameOf(node)), average ? "average pool" : "max pool");
  } catch (const Error& error) {
    refuse(node, error.what());
  }
}

AxisKind Importer::axisKindOf(const onnx::NodeProto& node) {
  for (const AxisOnnxOp& op : axisOnnxOps()) {
    if (node.op_type() == op.type) return op.kind;
  }
  GLNET_ASSERT(false, "the importer's table sent " + node.op_type() + ", which names no axis kind");
  return AxisKind::softmax;
}

void Importer::importAlongAxis(const onnx::NodeProto& node, const Attributes& a) {
  const Tensor x = tensorInput(node, 0);
  const std::size_t rank = shapeOf(x).size();
  const bool single = result_.opset >= 13;
  const auto axis = static_cast<std::uint32_t>(normalizedAxis(node, integer(a, "axis", single ? -1 : 1), rank));
  const AxisKind kind = axisKindOf(node);
  const Tensor out = apply(node, axisOp(kind, axis, single ? axis + 1 : static_cast<std::uint32_t>(rank)), {x}, kindName(kind));
  if (kind == AxisKind::softmax && rank == 2 && axis == 1) softmaxInputs_[out.id] = x;
}

void Importer::importReduce(const onnx::NodeProto& node, const Attributes& a) {
  const Tensor x = tensorInput(node, 0);
  const auto rank = static_cast<std::int64_t>(shapeOf(x).size());
  std::vector<std::int64_t> list = axes(node, a, 1, rank);
  if (list.empty()) {
    if (integer(a, "noop_with_empty_axes", 0) != 0) {
      defineAlias(node, {false, {}, x, resultElement(node)});
      return;
    }
    for (std::int64_t i = 0; i < rank; ++i) list.push_back(i);
  }
  std::sort(list.begin(), list.end());
  if (list.back() - list.front() + 1 != static_cast<std::int64_t>(list.size())) refuse(node, "only reductions over adjacent axes are supported");
  apply(node, axisOp(axisKindOf(node), static_cast<std::uint32_t>(list.front()), static_cast<std::uint32_t>(list.back() + 1),
                     integer(a, "keepdims", 1) != 0),
        {x}, "reduce");
}

void Importer::importLayerNormalization(const onnx::NodeProto& node, const Attributes& a) {
  const Tensor x = tensorInput(node, 0);
  const Shape shape = shapeOf(x);
  const auto axis = static_cast<std::uint32_t>(normalizedAxis(node, integer(a, "axis", -1), shape.size()));
  const std::size_t count = elementCount(Shape(shape.begin() + axis, shape.end()));
  const Constant* scale = constantInput(node, 1);
  const Constant* bias = constantInput(node, 2);
  if (!scale || scale->elements() != count || (bias && bias->elements() != count)) {
    refuse(node, "Scale and B must be constants of the normalized axes' " + std::to_string(count) + " values");
  }
  const std::string name = nameOf(node);
  const Tensor gamma = parameter(name + ".scale", {static_cast<std::int64_t>(count)}, scale->values);
  const Tensor beta = parameter(name + ".bias", {static_cast<std::int64_t>(count)}, bias ? bias->values : std::vector<double>(count, 0.0));
  const auto rank = static_cast<std::uint32_t>(shape.size());
  const auto epsilon = static_cast<float>(real(a, "epsilon", 1e-5));
  // X a residual Add's sum that only this node reads (sumsIntoNormalization): summed as it is read.
  const auto sum = residualSums_.find(node.input(0));
  if (sum != residualSums_.end()) {
    apply(node, layerNormalizationResidualOp(axis, rank, epsilon), {sum->second.first, gamma, beta, sum->second.second},
          "layer normalization + residual");
  } else {
    apply(node, axisOp(AxisKind::layerNormalization, axis, rank, true, epsilon), {x, gamma, beta}, "layer normalization");
  }
  // The optional Mean and InvStdDev outputs, the normalized axes kept as 1.
  for (int i = 1; i < std::min(node.output_size(), 3); ++i) {
    if (node.output(i).empty()) continue;
    try {
      const Tensor statistic = graph_.apply(axisOp(i == 1 ? AxisKind::mean : AxisKind::inverseDeviation, axis, rank, true, epsilon), {x}, node.output(i));
      values_[node.output(i)] = {false, {}, statistic};
    } catch (const Error& error) {
      refuse(node, error.what());
    }
  }
}

void Importer::importReshape(const onnx::NodeProto& node, const Attributes& a) {
  const std::string& op = node.op_type();
  const Tensor x = tensorInput(node, 0);
  const Shape in = shapeOf(x);
  const auto rank = static_cast<std::int64_t>(in.size());
  Shape out;
  if (op == "Flatten") {
    const auto axis = static_cast<std::size_t>(normalizedAxis(node, integer(a, "axis", 1), in.size(), true));
    out = {static_cast<std::uint32_t>(elementCount(Shape(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(axis)))),
           static_cast<std::uint32_t>(elementCount(Shape(in.begin() + static_cast<std::ptrdiff_t>(axis), in.end())))};
  } else if (op == "Squeeze") {
    std::vector<std::int64_t> list = axes(node, a, 1, rank);
    for (std::int64_t i = 0; i < rank; ++i) {
      const bool listed = std::find(list.begin(), list.end(), i) != list.end();
      if (listed && in[static_cast<std::size_t>(i)] != 1) refuse(node, "squeezed axis " + std::to_string(i) + " is not 1");
      if (!(listed || (list.empty() && in[static_cast<std::size_t>(i)] == 1))) out.push_back(in[static_cast<std::size_t>(i)]);
    }
  } else if (op == "Unsqueeze") {
    const std::int64_t added = static_cast<std::int64_t>(integers(a, "axes").size() + (node.input_size() > 1 ? input(node, 1).values.size() : 0));
    std::vector<std::int64_t> list = axes(node, a, 1, rank + added);
    std::sort(list.begin(), list.end());
    out = in;
    for (const std::int64_t axis : list) {
      if (axis > static_cast<std::int64_t>(out.size())) refuse(node, "axis " + std::to_string(axis) + " is outside the result");
      out.insert(out.begin() + axis, 1);
    }
  } else {
    const Constant& target = input(node, 1);
    if (target.values.size() > largestRank) refuse(node, "a shape of rank " + std::to_string(target.values.size()) + " is not supported");
    std::int64_t inferred = -1;
    std::size_t known = 1;
    for (std::size_t i = 0; i < target.values.size(); ++i) {
      std::int64_t d = whole(node, target.values[i]);
      if (d == 0 && integer(a, "allowzero", 0) == 0) {
        if (i >= in.size()) refuse(node, "dimension " + std::to_string(i) + " copies an axis the input does not have");
        d = in[i];
      }
      if (d == -1) {
        if (inferred >= 0) refuse(node, "two dimensions are -1");
        inferred = static_cast<std::int64_t>(i);
        out.push_back(1);
        continue;
      }
      if (d < 1 || d > static_cast<std::int64_t>(elementCount(in))) refuse(node, "a dimension of " + std::to_string(d) + " for " + glnet::describe(in));
      out.push_back(static_cast<std::uint32_t>(d));
      known *= static_cast<std::size_t>(d);
      if (known > elementCount(in)) refuse(node, "the new shape holds more elements than " + glnet::describe(in));
    }
    if (inferred >= 0) out[static_cast<std::size_t>(inferred)] = static_cast<std::uint32_t>(elementCount(in) / known);
  }
  if (elementCount(out) != elementCount(in)) refuse(node, "the new shape " + glnet::describe(out) + " holds a different number of elements than " + glnet::describe(in));
  apply(node, reshapeOp(out), {x}, "view");
}

Importer::AxisSlice Importer::clampedSlice(std::int64_t dimension, std::int64_t start, std::int64_t end, std::int64_t step) {
  if (start < 0) start += dimension;
  if (end < 0) end += dimension;
  if (step > 0) {
    start = std::clamp<std::int64_t>(start, 0, dimension);
    end = std::clamp<std::int64_t>(end, 0, dimension);
  } else {
    start = std::clamp<std::int64_t>(start, -1, dimension - 1);
    end = std::clamp<std::int64_t>(end, -1, dimension - 1);
  }
  const std::int64_t count = step > 0 ? (end - start + step - 1) / step : (start - end - step - 1) / -step;
  return {start, step, static_cast<std::uint32_t>(std::max<std::int64_t>(count, 0))};
}

Tensor Importer::sliceTensor(const onnx::NodeProto& node, Tensor x, const std::vector<AxisSlice>& slices, const std::string& name) {
  std::vector<std::int64_t> starts, steps;
  Shape size;
  for (const AxisSlice& s : slices) {
    if (s.count == 0) refuse(node, "the slice is empty; glnet does not run empty tensors");
    starts.push_back(s.start);
    steps.push_back(s.step);
    size.push_back(s.count);
  }
  try {
    return graph_.apply(sliceOp(starts, steps, size), {x}, name);
  } catch (const Error& error) {
    refuse(node, error.what());
  }
}

void Importer::importSlice(const onnx::NodeProto& node, const Attributes& a) {
  const Tensor x = tensorInput(node, 0);
  const Shape shape = shapeOf(x);
  const std::vector<AxisSlice> slices = sliceSpec(node, a, {shape.begin(), shape.end()});
  // Every element in order (Swin's crop of a padding it did not need): the tensor itself, no copy.
  bool whole = true;
  for (std::size_t axis = 0; axis < slices.size(); ++axis) whole = whole && slices[axis].start == 0 && slices[axis].step == 1 && slices[axis].count == shape[axis];
  if (whole) {
    defineAlias(node, operand(node, 0));
    return;
  }
  define(node, sliceTensor(node, x, slices, nameOf(node)), "slice");
  noteSliceRegions(node, slices);
}

void Importer::importSplit(const onnx::NodeProto& node, const Attributes& a) {
  const Tensor x = tensorInput(node, 0);
  const Shape shape = shapeOf(x);
  const auto axis = static_cast<std::size_t>(normalizedAxis(node, integer(a, "axis", 0), shape.size()));
  std::vector<std::int64_t> sizes = integers(a, "split");
  if (node.input_size() > 1 && !node.input(1).empty()) {
    sizes.clear();
    for (const double v : input(node, 1).values) sizes.push_back(whole(node, v));
  }
  const auto outputs = static_cast<std::int64_t>(node.output_size());
  if (sizes.empty()) {
    const std::int64_t each = (shape[axis] + outputs - 1) / outputs;
    for (std::int64_t i = 0; i < outputs; ++i) sizes.push_back(std::min<std::int64_t>(each, shape[axis] - i * each));
  }
  if (static_cast<std::int64_t>(sizes.size()) != outputs) refuse(node, "split sizes do not match the outputs");
  std::int64_t start = 0;
  for (int i = 0; i < node.output_size(); ++i) {
    if (sizes[static_cast<std::size_t>(i)] < 1 || start + sizes[static_cast<std::size_t>(i)] > shape[axis]) refuse(node, "split sizes do not fit axis " + std::to_string(axis));
    std::vector<AxisSlice> slices;
    for (const std::uint32_t d : shape) slices.push_back({0, 1, d});
    slices[axis] = {start, 1, static_cast<std::uint32_t>(sizes[static_cast<std::size_t>(i)])};
    start += sizes[static_cast<std::size_t>(i)];
    const Tensor part = sliceTensor(node, x, slices, nameOf(node) + "." + std::to_string(i));
    if (axis + 1 == shape.size() && outputs > 1) {
      splitParts_[part.id] = {x, static_cast<std::uint32_t>(slices[axis].start), slices[axis].count};
    }
    values_[node.output(i)] = {false, {}, part, resultElement(node)};
    result_.nodes.push_back({node.name(), node.op_type(), "slice", shapeOf(part)});
  }
  // The parts must cover the axis: ONNX's split sizes sum to its length, and a shorter sum would drop values.
  if (start != shape[axis]) refuse(node, "split sizes " + describe(sizes) + " sum to " + std::to_string(start) + ", not axis " + std::to_string(axis) + "'s " + std::to_string(shape[axis]));
}

void Importer::importPad(const onnx::NodeProto& node, const Attributes& a) {
  const std::string mode = a.count("mode") ? a.at("mode")->s() : "constant";
  if (mode != "constant") refuse(node, "mode " + mode + " is not supported (constant only)");
  const Tensor x = tensorInput(node, 0);
  const Shape shape = shapeOf(x);
  std::vector<std::int64_t> pads = integers(a, "pads");
  float value = static_cast<float>(real(a, "value", 0.0));
  if (result_.opset >= 11) {
    pads.clear();
    for (const double v : input(node, 1).values) pads.push_back(whole(node, v));
    if (node.input_size() > 2 && !node.input(2).empty()) value = static_cast<float>(scalar(node, 2));
    if (node.input_size() > 3 && !node.input(3).empty()) refuse(node, "the axes input is not supported");
  }
  if (pads.size() != 2 * shape.size()) refuse(node, "pads must hold 2 values per axis");
  std::vector<std::uint32_t> before, after;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (pads[i] < 0 || pads[i + shape.size()] < 0 || pads[i] > (1 << 16) || pads[i + shape.size()] > (1 << 16)) refuse(node, "negative or huge pads are not supported");
    before.push_back(static_cast<std::uint32_t>(pads[i]));
    after.push_back(static_cast<std::uint32_t>(pads[i + shape.size()]));
  }
  // No padding (Swin's pad to a multiple of its window where the size is one already): the tensor itself, no copy.
  if (std::all_of(pads.begin(), pads.end(), [](std::int64_t p) { return p == 0; })) {
    defineAlias(node, operand(node, 0));
    return;
  }
  apply(node, padOp(before, after, value), {x}, "pad");
}

}  // namespace glnet::onnximport

namespace glnet {

ParsedOnnx::ParsedOnnx(std::string path)
    : path_(std::move(path)), proto_(std::make_shared<const onnx::ModelProto>(readOnnxModelProto(path_))) {}

ParsedOnnx::ParsedOnnx(std::string path, onnx::ModelProto model)
    : path_(std::move(path)), proto_(std::make_shared<const onnx::ModelProto>(std::move(model))) {}

OnnxModel readOnnx(const ParsedOnnx& model, std::uint32_t batch) { return onnximport::Importer(model, batch).run(); }

OnnxModel readOnnx(const ParsedOnnx& model, const InputShapes& shapes) { return onnximport::Importer(model, shapes).run(); }

OnnxModel readOnnx(const std::string& path, std::uint32_t batch) { return readOnnx(ParsedOnnx(path), batch); }

}  // namespace glnet
