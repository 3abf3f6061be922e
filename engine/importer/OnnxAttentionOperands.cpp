// Where a fused attention reads Q, K and V from (see joinedProjections in OnnxImporter.h): three projections of one
// input joined into one dense layer, or the parts of one split, read in place through views.
#include "importer/OnnxImporter.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <set>

namespace glnet::onnximport {

namespace {

// A tensor read in place with strides: per axis, its parts from the outermost in, each of a size and a stride in
// elements of the tensor read; an axis of length 1 has none. A Reshape that merges axes keeps them as parts of the
// new axis (batch and heads in [S, B·H, D] at B > 1 have no single stride), and `single` asks for one stride only
// where the op reads the axis.
struct Span {
  std::uint64_t size, stride;
};
struct StridedView {
  std::vector<std::vector<Span>> axes;
  std::uint64_t offset = 0;

  static StridedView contiguous(const Shape& shape) {
    StridedView view;
    view.axes.resize(shape.size());
    std::uint64_t stride = 1;
    for (std::size_t a = shape.size(); a-- > 0;) {
      if (shape[a] != 1) view.axes[a].push_back({shape[a], stride});
      stride *= shape[a];
    }
    return view;
  }
  Shape shape() const {
    Shape sizes;
    for (const std::vector<Span>& axis : axes) {
      std::uint64_t size = 1;
      for (const Span& span : axis) size *= span.size;
      sizes.push_back(static_cast<std::uint32_t>(size));
    }
    return sizes;
  }
  // The same elements in `target`'s shape, row-major: false where a new axis would cut across a part.
  bool reshape(const Shape& target) {
    std::deque<Span> parts;
    for (const std::vector<Span>& axis : axes) parts.insert(parts.end(), axis.begin(), axis.end());
    std::vector<std::vector<Span>> reshaped;
    for (const std::uint32_t length : target) {
      std::vector<Span> axis;
      std::uint64_t left = length;
      while (left > 1) {
        if (parts.empty()) return false;
        Span& part = parts.front();
        if (part.size <= left) {
          if (left % part.size != 0) return false;
          axis.push_back(part);
          left /= part.size;
          parts.pop_front();
        } else {
          if (part.size % left != 0) return false;
          axis.push_back({left, part.stride * (part.size / left)});
          part.size /= left;
          left = 1;
        }
      }
      reshaped.push_back(std::move(axis));
    }
    if (!parts.empty()) return false;
    axes = std::move(reshaped);
    return true;
  }
  // Elements start, start + step, ... (count of them) of `axis`: false where the axis has no single stride.
  bool narrow(std::size_t axis, std::uint64_t start, std::uint64_t step, std::uint64_t count) {
    const std::optional<Span> whole = single(axis);
    if (!whole || count == 0 || start + (count - 1) * step >= whole->size) return false;
    offset += start * whole->stride;
    axes[axis].clear();
    if (count > 1) axes[axis].push_back({count, whole->stride * step});
    return true;
  }
  // Element `index` of `axis`, which goes (keepAxis: stays, of length 1).
  void take(std::size_t axis, std::uint64_t index, bool keepAxis) {
    for (auto span = axes[axis].rbegin(); span != axes[axis].rend(); ++span) {
      offset += index % span->size * span->stride;
      index /= span->size;
    }
    if (keepAxis) axes[axis].clear();
    else axes.erase(axes.begin() + static_cast<std::ptrdiff_t>(axis));
  }
  // An axis as one size and stride, where its parts chain (each part's stride its inner neighbour's size × stride).
  std::optional<Span> single(std::size_t axis) const {
    const std::vector<Span>& parts = axes[axis];
    if (parts.empty()) return Span{1, 0};
    for (std::size_t p = 0; p + 1 < parts.size(); ++p) {
      if (parts[p].stride != parts[p + 1].size * parts[p + 1].stride) return std::nullopt;
    }
    std::uint64_t size = 1;
    for (const Span& span : parts) size *= span.size;
    return Span{size, parts.back().stride};
  }
};

}  // namespace

bool Importer::readsShapeOnly(const onnx::NodeProto& node, int depth) const {
  if (node.op_type() == "Shape") return true;
  if (depth == 0 || node.output_size() == 0) return false;
  for (const std::string& output : node.output()) {
    const auto found = readers_.find(output);
    const std::size_t readers = found == readers_.end() ? 0 : found->second.size();
    if (output.empty() || readers == 0 || consumers_.at(output) != static_cast<int>(readers)) return false;  // unread, or a graph output
    for (const onnx::NodeProto* reader : found->second) {
      if (!readsShapeOnly(*reader, depth - 1)) return false;
    }
  }
  return true;
}

bool Importer::readOnlyBy(const std::string& name, const std::set<const onnx::NodeProto*>& nodes) const {
  const auto found = readers_.find(name);
  if (found == readers_.end()) return false;
  int counted = 0;
  for (const onnx::NodeProto* reader : found->second) {
    if (!nodes.count(reader) && !readsShapeOnly(*reader, 3)) return false;
    ++counted;
  }
  return consumers_.at(name) == counted;  // not a graph output
}

std::optional<Importer::JoinedProjections> Importer::viewsOfOneTensor(const std::array<std::vector<std::string>, 3>& operands,
                                                                        const std::array<Shape, 3>& readShapes, bool headsJoined,
                                                                        AttentionSettings& settings) {
  // Back from what the op reads through nodes that only index memory anew. A Transpose an earlier attention absorbed (its
  // heads' merge) never ran: its output is that attention's, already in the Transpose's order.
  const auto reindexes = [&](const onnx::NodeProto& node) {
    if (!(node.domain().empty() || node.domain() == "ai.onnx") || node.input_size() < 1 || fused_.count(&node) ||
        values_.at(node.input(0)).constant) {
      return false;
    }
    const std::string& op = node.op_type();
    if (op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" || op == "Transpose") return true;
    // A Slice of constant bounds (MaxViT's and PyTorch 1's chunk of the in-projection into Q, K and V).
    if (op == "Slice" && result_.opset >= 10) {
      for (int i = 1; i < node.input_size(); ++i) {
        if (!node.input(i).empty() && !values_.at(node.input(i)).constant) return false;
      }
      return node.input_size() >= 3;
    }
    if (op != "Gather" || node.input_size() != 2) return false;
    const Value& indices = values_.at(node.input(1));
    return indices.constant && indices.host.elements() == 1 && indices.host.shape.size() <= 1;
  };
  std::array<std::vector<const onnx::NodeProto*>, 3> chains;  // each from the tensor the op reads back to the common one
  std::set<const onnx::NodeProto*> onChains;
  std::string common;
  for (std::size_t i = 0; i < 3; ++i) {
    std::string at = operands[i].back();
    for (auto producer = producers_.find(at); producer != producers_.end() && reindexes(*producer->second); producer = producers_.find(at)) {
      chains[i].push_back(producer->second);
      at = producer->second->input(0);
    }
    if (i == 0) common = at;
    if (at != common || values_.at(at).constant) return std::nullopt;
    onChains.insert(chains[i].begin(), chains[i].end());
  }
  if (chains[0].empty() && chains[1].empty() && chains[2].empty()) return std::nullopt;
  for (const std::vector<const onnx::NodeProto*>& chain : chains) {
    for (const onnx::NodeProto* node : chain) {
      if (node->input(0) != common && !readOnlyBy(node->input(0), onChains)) return std::nullopt;
    }
  }
  const Tensor source = values_.at(common).tensor;
  const std::uint64_t elements = elementCount(shapeOf(source));
  const std::array<AttentionSettings::Layout, 3> layouts{settings.query, settings.key, settings.value};
  std::array<AttentionSettings::View, 3> views;
  bool splitBatch = false;
  for (std::size_t i = 0; i < 3; ++i) {
    StridedView view = StridedView::contiguous(shapeOf(source));
    for (auto node = chains[i].rbegin(); node != chains[i].rend(); ++node) {
      const std::string& op = (*node)->op_type();
      const Shape& out = shapeOf(values_.at((*node)->output(0)).tensor);
      if (op == "Transpose") {
        const std::vector<std::uint32_t> axes = permutation(attributes(**node, {"perm"}), view.axes.size());
        if (axes.size() != view.axes.size()) return std::nullopt;
        std::vector<std::vector<Span>> permuted;
        for (const std::uint32_t axis : axes) {
          if (axis >= view.axes.size()) return std::nullopt;
          permuted.push_back(view.axes[axis]);
        }
        view.axes = std::move(permuted);
      } else if (op == "Gather") {
        const std::int64_t axis = integer(attributes(**node, {"axis"}), "axis", 0);
        const std::int64_t rank = static_cast<std::int64_t>(view.axes.size());
        if (axis < -rank || axis >= rank) return std::nullopt;
        const std::size_t along = static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
        const Constant& index = values_.at((*node)->input(1)).host;
        const std::int64_t length = view.shape()[along];
        const std::int64_t at = static_cast<std::int64_t>(index.values[0]) < 0 ? static_cast<std::int64_t>(index.values[0]) + length
                                                                                : static_cast<std::int64_t>(index.values[0]);
        if (at < 0 || at >= length) return std::nullopt;
        view.take(along, static_cast<std::uint64_t>(at), !index.shape.empty());
      } else if (op == "Slice") {
        const Shape in = view.shape();
        const std::vector<AxisSlice> slices = sliceSpec(**node, attributes(**node, {}), {in.begin(), in.end()});
        for (std::size_t axis = 0; axis < slices.size(); ++axis) {
          const AxisSlice& s = slices[axis];
          if (s.count == in[axis] && s.step == 1) continue;
          if (s.step < 1 || !view.narrow(axis, static_cast<std::uint64_t>(s.start), static_cast<std::uint64_t>(s.step), s.count)) return std::nullopt;
        }
      } else if (!view.reshape(out)) {
        return std::nullopt;
      }
      if (view.shape() != out) return std::nullopt;
    }
    // As the op reads the operand: 4 axes (rank 3 with a leading axis of 1; rank 5 and more with the leading axes as
    // one batch).
    if (view.shape() != shapeOf(values_.at(operands[i].back()).tensor) || readShapes[i].size() != 4 || !view.reshape(readShapes[i])) return std::nullopt;
    std::uint64_t last = view.offset;
    std::array<std::optional<Span>, 4> axes;
    for (std::size_t j = 0; j < 4; ++j) axes[j] = view.single(layouts[i][j]);
    // A rank-3 attention's batch · heads axis whose two parts do not chain ([S, B·H, D] cut from [S, B, 3·H·D] at
    // B > 1), read where the op's heads axis is the leading 1: its parts as the op's batch and heads. (A rank-4
    // attention's batch axis stays one axis: its output and mask are the model's shape.)
    const std::vector<Span>& batchParts = view.axes[layouts[i][0]];
    if (headsJoined && !axes[0] && batchParts.size() == 2 && axes[1] && axes[1]->size == 1) {
      axes[0] = batchParts[0];
      axes[1] = batchParts[1];
      splitBatch = true;
    }
    for (std::size_t j = 0; j < 4; ++j) {
      const std::optional<Span>& axis = axes[j];
      if (!axis) return std::nullopt;
      // An axis of length 1 is read at index 0 alone; as the outermost, so that the op never takes it for the one its
      // loads run along.
      const std::uint64_t stride = axis->size == 1 ? elements : axis->stride;
      if (stride > std::numeric_limits<std::uint32_t>::max()) return std::nullopt;
      last += (axis->size - 1) * stride;
      views[i].sizes[j] = static_cast<std::uint32_t>(axis->size);
      views[i].strides[j] = static_cast<std::uint32_t>(stride);
    }
    if (last >= elements || view.offset > std::numeric_limits<std::uint32_t>::max()) return std::nullopt;
    views[i].offset = static_cast<std::uint32_t>(view.offset);
  }
  // Split, all three alike.
  for (std::size_t i = 1; splitBatch && i < 3; ++i) {
    if (views[i].sizes[0] != views[0].sizes[0] || views[i].sizes[1] != views[0].sizes[1]) return std::nullopt;
  }
  settings.queryView = views[0];
  settings.keyView = views[1];
  settings.valueView = views[2];
  return JoinedProjections{source, {}, "Q, K and V read in place from one tensor through their views"};
}

std::optional<Importer::JoinedProjections> Importer::joinedProjections(const std::array<std::vector<std::string>, 3>& operands,
                                                                         const std::array<Shape, 3>& readShapes, bool headsJoined,
                                                                         AttentionSettings& settings) {
  if (std::optional<JoinedProjections> one = viewsOfOneTensor(operands, readShapes, headsJoined, settings)) return one;
  // Whether one node alone reads the data of `name` (besides nodes reading its shape only).
  const auto readOnce = [&](const std::string& name) {
    const auto found = readers_.find(name);
    if (found == readers_.end()) return false;
    const auto shapeReaders = std::count_if(found->second.begin(), found->second.end(), [&](const onnx::NodeProto* n) { return readsShapeOnly(*n, 3); });
    return found->second.size() - static_cast<std::size_t>(shapeReaders) == 1 && consumers_.at(name) - shapeReaders == 1;
  };
  // Each operand back from what the op reads in its layout, through Reshapes (views of the same memory), to a
  // projection's output or a part of a split along the last axis; every name on the way read by the next node alone.
  std::array<const Projection*, 3> projections{};
  std::array<const SplitPart*, 3> parts{};
  std::array<Shape, 3> stored;
  for (std::size_t i = 0; i < 3; ++i) {
    std::vector<std::string> path = operands[i];
    stored[i] = shapeOf(values_.at(path.back()).tensor);
    if (stored[i].size() != 4) return std::nullopt;  // the layouts index 4 axes
    while (!projections[i] && !parts[i]) {
      const std::string& at = path.back();
      const auto v = values_.find(at);
      if (v == values_.end() || v->second.constant || !readOnce(at)) return std::nullopt;
      if (const auto projection = projections_.find(v->second.tensor.id); projection != projections_.end()) {
        projections[i] = &projection->second;
      } else if (const auto part = splitParts_.find(v->second.tensor.id); part != splitParts_.end()) {
        parts[i] = &part->second;
      } else {
        const auto producer = producers_.find(at);
        if (producer == producers_.end() || producer->second->op_type() != "Reshape") return std::nullopt;
        path.push_back(producer->second->input(0));
      }
    }
    for (const std::string& name : operands[i]) {
      if (!readOnce(name)) return std::nullopt;
    }
  }
  // Where each operand's columns lie in the rows of the tensor the op reads: a split's parts in their source (GPT-2's
  // c_attn), or three projections of one input joined into one dense layer (BERT's query, key and value).
  std::array<std::uint32_t, 3> offsets{}, widths{};
  std::uint32_t width = 0;
  JoinedProjections joined;
  if (parts[0] && parts[1] && parts[2]) {
    if (parts[0]->source.id != parts[1]->source.id || parts[1]->source.id != parts[2]->source.id) return std::nullopt;
    for (std::size_t i = 0; i < 3; ++i) {
      offsets[i] = parts[i]->offset;
      widths[i] = parts[i]->width;
    }
    width = shapeOf(parts[0]->source).back();
    joined.output = parts[0]->source;
    joined.how = "Q, K and V read in place from their split";
  } else if (projections[0] && projections[1] && projections[2]) {
    const Projection &q = *projections[0], &k = *projections[1], &v = *projections[2];
    if (&q == &k || &k == &v || &q == &v || q.input.id != k.input.id || k.input.id != v.input.id) return std::nullopt;
    widths = {q.outputs, k.outputs, v.outputs};
    offsets = {0, q.outputs, q.outputs + k.outputs};
    width = q.outputs + k.outputs + v.outputs;
    const std::uint64_t rows = elementCount(shapeOf(q.rows)) / shapeOf(q.rows).back();
    if (rows * width > std::numeric_limits<std::uint32_t>::max()) return std::nullopt;
  } else {
    return std::nullopt;
  }
  const std::array<AttentionSettings::Layout, 3> layouts{settings.query, settings.key, settings.value};
  std::array<AttentionSettings::View, 3> views;
  for (std::size_t i = 0; i < 3; ++i) {
    // The stored tensor is [rows, widths[i]] in another shape: its axes from `split` on span one row.
    const Shape& shape = stored[i];
    std::vector<std::uint64_t> strides(shape.size());
    std::uint64_t span = 1;
    std::optional<std::size_t> split;
    for (std::size_t a = shape.size(); a-- > 0;) {
      strides[a] = span;
      span *= shape[a];
      if (span == widths[i]) split = a;
    }
    if (!split) return std::nullopt;
    for (std::size_t a = 0; a < *split; ++a) strides[a] = strides[a] / widths[i] * width;
    for (std::size_t j = 0; j < 4; ++j) {
      views[i].sizes[j] = shape[layouts[i][j]];
      views[i].strides[j] = static_cast<std::uint32_t>(strides[layouts[i][j]]);
    }
    views[i].offset = offsets[i];
  }
  if (projections[0]) {
    const Projection& q = *projections[0];
    // The projections' weights, checked when they were read, side by side (as float32: no copy in double).
    std::vector<float> weight, bias;
    for (const Projection* p : projections) {
      const std::vector<float>& w = graph_.tensor(p->weight).initial;
      const std::vector<float>& b = graph_.tensor(p->bias).initial;
      weight.insert(weight.end(), w.begin(), w.end());
      bias.insert(bias.end(), b.begin(), b.end());
      joined.summaries.push_back(p->summary);
    }
    std::string name = graph_.tensor(q.weight).name;  // the query's layer name and ".weight"
    name = name.substr(0, name.rfind(".weight")) + "+k+v";
    const std::uint32_t inputs = shapeOf(q.rows).back();
    const Tensor joinedWeight = graph_.parameter(name + ".weight", {width, inputs}, std::move(weight));
    const Tensor joinedBias = graph_.parameter(name + ".bias", {width}, std::move(bias));
    joined.output = graph_.apply(denseOp(Activation::none), {q.rows, joinedWeight, joinedBias}, name);
    joined.how = "Q, K and V from one dense layer";
  }
  settings.queryView = views[0];
  settings.keyView = views[1];
  settings.valueView = views[2];
  return joined;
}

}  // namespace glnet::onnximport
