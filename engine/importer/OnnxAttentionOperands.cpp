// Where a fused attention reads Q, K and V from (see joinedProjections in OnnxImporter.h): three projections of one
// input joined into one dense layer, or the parts of one split, read in place through views.
#include "importer/OnnxImporter.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace glnet::onnximport {

std::optional<Importer::JoinedProjections> Importer::joinedProjections(const std::array<std::vector<std::string>, 3>& operands,
                                                                         AttentionSettings& settings) {
  // Whether one node alone reads the data of `name`: a Shape node reads only its shape, known at load, and so does a
  // node whose results only Shape nodes read (GPT-2's head split of K, whose size(-2) the export takes from a transpose
  // of it that nothing else reads).
  const std::function<bool(const onnx::NodeProto&, int)> readsShapeOnly = [&](const onnx::NodeProto& node, int depth) {
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
  };
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
