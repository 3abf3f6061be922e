// The shape helpers the imported models' operators share (InferenceOp.h), and broadcastShapes.
#include "graph/InferenceOp.h"

#include <algorithm>

namespace glnet {
namespace inference {

std::uint32_t count32(const Shape& shape) { return static_cast<std::uint32_t>(elementCount(shape)); }

std::vector<std::int64_t> stridesOf(const Shape& shape) {
  std::vector<std::int64_t> strides(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

void forEachCoordinate(const Shape& shape, const std::function<void(const std::vector<std::uint32_t>&)>& visit) {
  if (elementCount(shape) == 0) return;
  std::vector<std::uint32_t> c(shape.size(), 0);
  while (true) {
    visit(c);
    std::size_t axis = shape.size();
    while (axis > 0) {
      --axis;
      if (++c[axis] < shape[axis]) break;
      c[axis] = 0;
      if (axis == 0) return;
    }
    if (shape.empty()) return;
  }
}

std::string shapesText(const std::vector<Shape>& in) {
  std::string text;
  for (const Shape& shape : in) text += (text.empty() ? "" : ", ") + describe(shape);
  return text;
}

void checkRank(const std::string& op, const Shape& shape) {
  if (shape.size() > largestRank) throw Error(op + " takes tensors of rank at most 6, not " + describe(shape));
}

std::vector<Shape> shapesOf(const std::vector<GpuTensor>& in) {
  std::vector<Shape> result;
  for (const GpuTensor& t : in) result.push_back(t.shape);
  return result;
}
std::vector<Shape> shapesOf(const std::vector<HostTensor64>& in) {
  std::vector<Shape> result;
  for (const HostTensor64& t : in) result.push_back(t.shape);
  return result;
}

std::vector<std::int64_t> broadcastStrides(const Shape& shape, const Shape& result) {
  const std::vector<std::int64_t> own = stridesOf(shape);
  std::vector<std::int64_t> strides(result.size(), 0);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const std::size_t axis = result.size() - shape.size() + i;
    strides[axis] = shape[i] == 1 ? 0 : own[i];
  }
  return strides;
}

}  // namespace inference

Shape broadcastShapes(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::uint32_t x = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const std::uint32_t y = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (x != y && x != 1 && y != 1) throw Error("shapes " + describe(a) + " and " + describe(b) + " do not broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

}  // namespace glnet
