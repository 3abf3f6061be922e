// Slices of one tensor joined again by Concats (torch.roll as PyTorch exports it, Swin's patch merging) as one op of
// region copies from that tensor: see noteSliceRegions in OnnxImporter.h.
#include "importer/OnnxImporter.h"

#include <algorithm>

namespace glnet::onnximport {

namespace {

// A bound on the dispatches one Concat becomes (a roll along two axes takes 4, Swin's patch merging 4).
constexpr std::size_t mostRegions = 16;

}  // namespace

void Importer::noteSliceRegions(const onnx::NodeProto& node, const std::vector<AxisSlice>& slices) {
  const std::string& input = node.input(0);
  const Value& x = values_.at(input);
  if (x.constant) return;
  const Shape& shape = shapeOf(x.tensor);
  Regions cut;
  const auto noted = regionsOf_.find(input);
  if (noted == regionsOf_.end()) {
    Region box{{}, std::vector<std::int64_t>(shape.size(), 0), 0, {}};
    const std::vector<std::size_t> stride = strides({shape.begin(), shape.end()});
    for (std::size_t k = 0; k < shape.size(); ++k) {
      box.size.push_back(slices[k].count);
      box.xOffset += slices[k].start * static_cast<std::int64_t>(stride[k]);
      box.xStrides.push_back(slices[k].step * static_cast<std::int64_t>(stride[k]));
    }
    cut = {x.tensor, {box}};
  } else {
    // Each box of the input cut by the slice: along a step of 1 the part of the box inside it; along a longer step only
    // a box that spans the axis, whose stride then grows.
    cut.source = noted->second.source;
    for (const Region& box : noted->second.boxes) {
      Region part = box;
      bool inside = true;
      for (std::size_t k = 0; k < slices.size() && inside; ++k) {
        const AxisSlice& s = slices[k];
        if (s.step == 1) {
          const std::int64_t low = std::max(box.origin[k], s.start), high = std::min(box.origin[k] + box.size[k], s.start + s.count);
          inside = low < high;
          part.xOffset += (low - box.origin[k]) * box.xStrides[k];
          part.origin[k] = low - s.start;
          part.size[k] = static_cast<std::uint32_t>(high - low);
        } else if (s.step > 1 && box.origin[k] == 0 && box.size[k] == shape[k]) {
          part.xOffset += s.start * box.xStrides[k];
          part.xStrides[k] *= s.step;
          part.size[k] = s.count;
        } else {
          return;
        }
      }
      if (inside) cut.boxes.push_back(part);
    }
  }
  if (!cut.boxes.empty() && cut.boxes.size() <= mostRegions) regionsOf_[node.output(0)] = std::move(cut);
}

bool Importer::importsConcatOfRegions(const onnx::NodeProto& node, std::uint32_t axis) {
  if (node.input_size() < 2) return false;
  Regions joined;
  Shape out;
  for (int i = 0; i < node.input_size(); ++i) {
    const auto noted = regionsOf_.find(node.input(i));
    if (noted == regionsOf_.end() || (i > 0 && noted->second.source.id != joined.source.id)) return false;
    const Shape shape = shapeOf(values_.at(node.input(i)).tensor);
    if (i == 0) {
      joined.source = noted->second.source;
      out = shape;
      out[axis] = 0;
    }
    if (shape.size() != out.size()) return false;
    for (Region box : noted->second.boxes) {
      box.origin[axis] += out[axis];
      joined.boxes.push_back(std::move(box));
    }
    out[axis] += shape[axis];
  }
  if (joined.boxes.size() > mostRegions) return false;
  const std::vector<std::size_t> stride = strides({out.begin(), out.end()});
  const std::vector<std::int64_t> yStrides(stride.begin(), stride.end());
  std::vector<RegionCopy> copies;
  for (const Region& box : joined.boxes) {
    RegionCopy copy{box.size, box.xOffset, 0, box.xStrides, yStrides};
    for (std::size_t k = 0; k < out.size(); ++k) copy.yOffset += box.origin[k] * yStrides[k];
    copies.push_back(std::move(copy));
  }
  const std::size_t count = copies.size();
  try {
    define(node, graph_.apply(regionsOp(out, std::move(copies)), {joined.source}, nameOf(node)),
           "concat of " + std::to_string(count) + " regions of one tensor (the Slices before it never run)");
  } catch (const Error&) {
    return false;  // a shape the op does not take (more than 6 axes): the Slices and the Concat run
  }
  regionsOf_[node.output(0)] = std::move(joined);
  return true;
}

}  // namespace glnet::onnximport
