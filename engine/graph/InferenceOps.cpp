#include "graph/InferenceOps.h"

#include "gl/Limits.h"
#include "gl/check.h"
#include "ops/Groups.h"
#include "ops/StridedCopy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

namespace glnet {
namespace {

std::uint32_t count32(const Shape& shape) { return static_cast<std::uint32_t>(elementCount(shape)); }

// Contiguous (row-major) strides of a shape, in elements.
std::vector<std::int64_t> stridesOf(const Shape& shape) {
  std::vector<std::int64_t> strides(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

// Calls visit(coordinates) for every element of `shape`, in row-major order.
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

class InferenceOp : public Op {
 public:
  bool differentiable() const override { return false; }
  bool passesGradient(std::size_t) const override { return false; }
  void backward(ProgramCache&, Plan&, const std::vector<GpuTensor>&, const GpuTensor&, const GpuTensor&,
                const std::vector<std::optional<GradientTarget>>&) const override {
    GLNET_ASSERT(false, "the operators of imported models run in inference graphs only");
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>&, const std::vector<double>&,
                                                     const std::vector<double>&) const override {
    GLNET_ASSERT(false, "the operators of imported models run in inference graphs only");
    return {};
  }
};

// Trainable for the functions Pointwise::trainable names.
class PointwiseOp : public InferenceOp {
 public:
  explicit PointwiseOp(Pointwise function) : function_(function) {}
  bool differentiable() const override { return function_.trainable(); }
  bool passesGradient(std::size_t) const override { return function_.trainable(); }
  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor&, const GpuTensor& dOut,
                const std::vector<std::optional<GradientTarget>>& targets) const override {
    GLNET_ASSERT(function_.trainable(), "this function runs in forward-only graphs");
    if (!targets[0]) return;
    std::vector<ShaderDefine> defines = function_.defines();
    defines.push_back({"UNARY_GRADIENT", "1"});
    Dispatch dispatch = linearDispatch(programs.get("Unary.glsl", defines, {"Pointwise.glsl"}), name() + " gradient", elementCount(in[0].shape));
    dispatch.buffers = {{0, in[0].view, Access::read}, {1, targets[0]->view, targets[0]->accumulate ? Access::readWrite : Access::write},
                        {2, dOut.view, Access::read}};
    dispatch.uniforms = {Uniform::u32(0, count32(in[0].shape)), Uniform::u32(1, targets[0]->accumulate ? 1 : 0)};
    plan.record(dispatch);
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>&,
                                                     const std::vector<double>& dy) const override {
    GLNET_ASSERT(function_.trainable(), "this function runs in forward-only graphs");
    std::vector<double> dx(dy.size());
    for (std::size_t i = 0; i < dx.size(); ++i) dx[i] = dy[i] * function_.derivative((*in[0].values)[i]);
    return {dx};
  }
  std::string name() const override { return function_.name(); }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1) throw Error(name() + " takes one input");
    return in[0];
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    const Program& program = programs.get("Unary.glsl", function_.defines(), {"Pointwise.glsl"});
    Dispatch dispatch = linearDispatch(program, name(), elementCount(out.shape));
    dispatch.buffers = {{0, in[0].view, Access::read}, {1, out.view, Access::write}};
    dispatch.uniforms = {Uniform::u32(0, count32(out.shape))};
    plan.record(dispatch);
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    std::vector<double> y(*in[0].values);
    for (double& v : y) v = function_(v);
    return y;
  }

 private:
  Pointwise function_;
};

// y = after(x · scale + shift) per channel of x [N, C, spatial...] (a BatchNormalization no layer absorbs), or
// y = after(x · scale) with a scale per image and channel (a squeeze-excite gate); ChannelAffine.glsl.
class ChannelAffineOp : public InferenceOp {
 public:
  ChannelAffineOp(bool shift, Pointwise after) : shift_(shift), after_(after) {}
  std::string name() const override {
    return std::string(shift_ ? "channel affine" : "channel scale") + (after_.kind != PointwiseKind::identity ? " + " + after_.name() : "");
  }
  Shape outputShape(const std::vector<Shape>& in) const override {
    const bool fits = in.size() == (shift_ ? 3u : 2u) && in[0].size() >= 2 &&
                      (elementCount(in[1]) == in[0][1] || (!shift_ && elementCount(in[1]) == std::size_t{in[0][0]} * in[0][1])) &&
                      (!shift_ || elementCount(in[2]) == in[0][1]);
    if (!fits) {
      throw Error(name() + " takes x [N, C, ...] and " + (shift_ ? "scale and shift of C values" : "a scale of C or N·C values") +
                  "; got " + shapesText(in));
    }
    return in[0];
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    const Shape& x = in[0].shape;
    const std::uint64_t plane = elementCount(x) / (std::uint64_t{x[0]} * x[1]);
    const bool vec4 = plane % 4 == 0 && in[0].view.offset % 16 == 0 && out.view.offset % 16 == 0;
    std::vector<ShaderDefine> defines = after_.defines();
    if (shift_) defines.push_back({"SHIFT", "1"});
    if (vec4) defines.push_back({"VEC4", "1"});
    const Program& program = programs.get("ChannelAffine.glsl", defines, {"Pointwise.glsl"});
    const std::uint64_t unit = vec4 ? 4 : 1;
    Dispatch dispatch = linearDispatch(program, name(), elementCount(x) / unit);
    dispatch.buffers = {{0, in[0].view, Access::read}, {1, in[1].view, Access::read}, {3, out.view, Access::write}};
    if (shift_) dispatch.buffers.push_back({2, in[2].view, Access::read});
    dispatch.uniforms = {Uniform::u32(0, static_cast<std::uint32_t>(elementCount(x) / unit)), Uniform::u32(1, static_cast<std::uint32_t>(plane / unit)),
                         Uniform::u32(2, static_cast<std::uint32_t>(elementCount(in[1].shape)))};
    plan.record(dispatch);
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const std::vector<double>& x = *in[0].values;
    const std::size_t plane = x.size() / (std::size_t{in[0].shape[0]} * in[0].shape[1]), period = in[1].values->size();
    std::vector<double> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::size_t channel = (i / plane) % period;
      y[i] = after_(x[i] * (*in[1].values)[channel] + (shift_ ? (*in[2].values)[channel] : 0.0));
    }
    return y;
  }

 private:
  bool shift_;
  Pointwise after_;
};

// Strides of `shape` seen from the axes of `result` (aligned on the right), 0 along broadcast axes.
std::vector<std::int64_t> broadcastStrides(const Shape& shape, const Shape& result) {
  const std::vector<std::int64_t> own = stridesOf(shape);
  std::vector<std::int64_t> strides(result.size(), 0);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const std::size_t axis = result.size() - shape.size() + i;
    strides[axis] = shape[i] == 1 ? 0 : own[i];
  }
  return strides;
}

double combine(BinaryKind kind, double a, double b) {
  switch (kind) {
    case BinaryKind::add: return a + b;
    case BinaryKind::subtract: return a - b;
    case BinaryKind::multiply: return a * b;
    case BinaryKind::divide: return a / b;
    case BinaryKind::power: return std::pow(a, b);
    case BinaryKind::maximum: return std::max(a, b);
    case BinaryKind::minimum: return std::min(a, b);
    case BinaryKind::prelu: return a >= 0 ? a : a * b;
  }
  return 0;
}

class BroadcastOp : public InferenceOp {
 public:
  BroadcastOp(BinaryKind kind, Pointwise after) : kind_(kind), after_(after) {}
  std::string name() const override {
    static const char* const names[] = {"add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "prelu"};
    return std::string(names[static_cast<int>(kind_)]) + (after_.kind == PointwiseKind::identity ? "" : " + " + after_.name());
  }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 2) throw Error(name() + " takes two inputs");
    const Shape out = broadcastShapes(in[0], in[1]);
    checkRank(name(), out);
    return out;
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    std::vector<ShaderDefine> defines = after_.defines();
    defines.push_back({"BINARY_OP", std::to_string(static_cast<int>(kind_))});
    defines.push_back({"RANK", std::to_string(std::max<std::size_t>(out.shape.size(), 1))});
    const Program& program = programs.get("Broadcast.glsl", defines, {"Pointwise.glsl"});
    Dispatch dispatch = linearDispatch(program, name(), elementCount(out.shape));
    dispatch.buffers = {{0, in[0].view, Access::read}, {1, in[1].view, Access::read}, {2, out.view, Access::write}};
    dispatch.uniforms = {Uniform::u32(0, count32(out.shape))};
    const std::vector<std::int64_t> outStrides = stridesOf(out.shape), a = broadcastStrides(in[0].shape, out.shape),
                                    b = broadcastStrides(in[1].shape, out.shape);
    for (std::size_t k = 0; k < largestRank; ++k) {
      const bool used = k < out.shape.size();
      dispatch.uniforms.push_back(Uniform::u32(1 + static_cast<int>(k), used ? static_cast<std::uint32_t>(outStrides[k]) : 1));
      dispatch.uniforms.push_back(Uniform::u32(7 + static_cast<int>(k), used ? static_cast<std::uint32_t>(a[k]) : 0));
      dispatch.uniforms.push_back(Uniform::u32(13 + static_cast<int>(k), used ? static_cast<std::uint32_t>(b[k]) : 0));
    }
    plan.record(dispatch);
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const Shape out = outputShape(shapesOf(in));
    std::vector<double> y;
    y.reserve(elementCount(out));
    const auto at = [&](const HostTensor64& t, const std::vector<std::uint32_t>& c) {
      std::size_t index = 0;
      for (std::size_t i = 0; i < t.shape.size(); ++i) index = index * t.shape[i] + (t.shape[i] == 1 ? 0 : c[out.size() - t.shape.size() + i]);
      return (*t.values)[index];
    };
    forEachCoordinate(out, [&](const std::vector<std::uint32_t>& c) { y.push_back(after_(combine(kind_, at(in[0], c), at(in[1], c)))); });
    return y;
  }

 private:
  BinaryKind kind_;
  Pointwise after_;
};

// The ops that move elements: their forward pass is a list of region copies (after a fill, for Pad).
class LayoutOp : public InferenceOp {
 public:
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    if (const std::optional<float> value = fill()) plan.record(glnet::fill(programs, name() + " fill", out.view, elementCount(out.shape), *value));
    const std::vector<Shape> shapes = shapesOf(in);
    const std::vector<RegionCopy> list = copies(shapes, out.shape);
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (elementCount(list[i].region) > 0) plan.record(regionCopy(programs, name(), in[std::min(i, in.size() - 1)].view, out.view, list[i]));
    }
  }

 protected:
  // Copy i reads input i (or the last input).
  virtual std::vector<RegionCopy> copies(const std::vector<Shape>& in, const Shape& out) const = 0;
  virtual std::optional<float> fill() const { return std::nullopt; }
};

class TransposeOp : public LayoutOp {
 public:
  explicit TransposeOp(std::vector<std::uint32_t> permutation) : permutation_(std::move(permutation)) {}
  std::string name() const override { return "transpose"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1 || in[0].size() != permutation_.size()) throw Error("transpose's permutation does not fit " + shapesText(in));
    checkRank(name(), in[0]);
    std::vector<std::uint32_t> sorted = permutation_;
    std::sort(sorted.begin(), sorted.end());
    for (std::uint32_t i = 0; i < sorted.size(); ++i) {
      if (sorted[i] != i) throw Error("transpose's permutation is not one of the axes 0 to " + std::to_string(in[0].size() - 1));
    }
    Shape out;
    for (const std::uint32_t axis : permutation_) out.push_back(in[0][axis]);
    return out;
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const Shape out = outputShape(shapesOf(in));
    const std::vector<std::int64_t> x = stridesOf(in[0].shape);
    std::vector<double> y;
    forEachCoordinate(out, [&](const std::vector<std::uint32_t>& c) {
      std::int64_t index = 0;
      for (std::size_t k = 0; k < c.size(); ++k) index += c[k] * x[permutation_[k]];
      y.push_back((*in[0].values)[static_cast<std::size_t>(index)]);
    });
    return y;
  }

 protected:
  std::vector<RegionCopy> copies(const std::vector<Shape>& in, const Shape& out) const override {
    RegionCopy copy{out, 0, 0, {}, stridesOf(out)};
    const std::vector<std::int64_t> x = stridesOf(in[0]);
    for (const std::uint32_t axis : permutation_) copy.xStrides.push_back(x[axis]);
    return {copy};
  }

 private:
  std::vector<std::uint32_t> permutation_;
};

class SliceOp : public LayoutOp {
 public:
  SliceOp(std::vector<std::int64_t> starts, std::vector<std::int64_t> steps, Shape size)
      : starts_(std::move(starts)), steps_(std::move(steps)), size_(std::move(size)) {}
  std::string name() const override { return "slice"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1 || in[0].size() != size_.size() || starts_.size() != size_.size() || steps_.size() != size_.size()) {
      throw Error("slice does not fit " + shapesText(in));
    }
    checkRank(name(), in[0]);
    for (std::size_t k = 0; k < size_.size(); ++k) {
      if (size_[k] == 0) continue;
      const std::int64_t last = starts_[k] + (static_cast<std::int64_t>(size_[k]) - 1) * steps_[k];
      if (starts_[k] < 0 || starts_[k] >= in[0][k] || last < 0 || last >= in[0][k]) throw Error("slice runs outside " + describe(in[0]));
    }
    return size_;
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const std::vector<std::int64_t> x = stridesOf(in[0].shape);
    std::vector<double> y;
    forEachCoordinate(size_, [&](const std::vector<std::uint32_t>& c) {
      std::int64_t index = 0;
      for (std::size_t k = 0; k < c.size(); ++k) index += (starts_[k] + c[k] * steps_[k]) * x[k];
      y.push_back((*in[0].values)[static_cast<std::size_t>(index)]);
    });
    return y;
  }

 protected:
  std::vector<RegionCopy> copies(const std::vector<Shape>& in, const Shape& out) const override {
    RegionCopy copy{out, 0, 0, {}, stridesOf(out)};
    const std::vector<std::int64_t> x = stridesOf(in[0]);
    for (std::size_t k = 0; k < out.size(); ++k) {
      copy.xOffset += starts_[k] * x[k];
      copy.xStrides.push_back(steps_[k] * x[k]);
    }
    return {copy};
  }

 private:
  std::vector<std::int64_t> starts_, steps_;
  Shape size_;
};

class ConcatOp : public LayoutOp {
 public:
  explicit ConcatOp(std::uint32_t axis) : axis_(axis) {}
  std::string name() const override { return "concat"; }
  bool differentiable() const override { return true; }
  bool passesGradient(std::size_t) const override { return true; }
  // Each input's gradient is its region of the output's gradient.
  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out, const GpuTensor& dOut,
                const std::vector<std::optional<GradientTarget>>& targets) const override {
    const std::vector<RegionCopy> list = copies(shapesOf(in), out.shape);
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (!targets[i] || elementCount(in[i].shape) == 0) continue;
      const RegionCopy& forward = list[i];
      const RegionCopy reverse{forward.region, forward.yOffset, forward.xOffset, forward.yStrides, forward.xStrides};
      plan.record(regionCopy(programs, name() + " backward", dOut.view, targets[i]->view, reverse, targets[i]->accumulate));
    }
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>&,
                                                     const std::vector<double>& dOut) const override {
    std::vector<std::vector<double>> gradients(in.size());
    const Shape out = outputShape(shapesOf(in));
    std::size_t outer = 1;
    for (std::uint32_t k = 0; k < axis_; ++k) outer *= out[k];
    const std::size_t row = elementCount(out) / std::max<std::size_t>(outer, 1);
    std::size_t start = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
      const std::size_t piece = elementCount(in[i].shape) / std::max<std::size_t>(outer, 1);
      for (std::size_t r = 0; r < outer; ++r) {
        gradients[i].insert(gradients[i].end(), dOut.begin() + static_cast<std::ptrdiff_t>(r * row + start),
                            dOut.begin() + static_cast<std::ptrdiff_t>(r * row + start + piece));
      }
      start += piece;
    }
    return gradients;
  }
  // Inputs that share one buffer (an inference graph's arena) are copied by one dispatch, up to 32 of them: a
  // DenseNet block concatenates up to 25 tensors for every layer, and a dispatch per input cost densenet121 5 ms
  // of its 20 at batch 1 on the H100. Otherwise a copy per input.
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    constexpr std::size_t maxSegments = 32;
    const bool oneBuffer = std::all_of(in.begin(), in.end(), [&](const GpuTensor& t) { return t.view.buffer == in[0].view.buffer; });
    if (in.size() < 2 || in.size() > maxSegments || !oneBuffer) {
      LayoutOp::forward(programs, plan, in, out);
      return;
    }
    // Bound from the first input's offset rounded down to the binding alignment, to the end of the last input.
    std::size_t begin = in[0].view.offset, end = 0;
    for (const GpuTensor& t : in) {
      begin = std::min(begin, t.view.offset);
      end = std::max(end, t.view.offset + elementCount(t.shape) * sizeof(float));
    }
    const auto alignment = static_cast<std::size_t>(std::max(currentLimits().storageBufferOffsetAlignment, 4));
    begin -= begin % alignment;
    const Program& program = programs.get("StridedCopy.glsl", {{"COPY_MODE", "2"}, {"ACCUMULATE", "0"}});
    Dispatch dispatch = linearDispatch(program, name() + " of " + std::to_string(in.size()), elementCount(out.shape));
    dispatch.buffers = {{0, BufferView(*in[0].view.buffer, begin, end - begin), Access::read}, {1, out.view, Access::write}};
    std::uint64_t outer = 1;
    for (std::uint32_t k = 0; k < axis_; ++k) outer *= out.shape[k];
    const auto row = static_cast<std::uint32_t>(elementCount(out.shape) / outer);
    dispatch.uniforms = {Uniform::u32(0, count32(out.shape)), Uniform::u32(1, row), Uniform::u32(2, static_cast<std::uint32_t>(in.size()))};
    std::uint32_t segmentEnd = 0;
    for (std::size_t s = 0; s < in.size(); ++s) {
      segmentEnd += static_cast<std::uint32_t>(elementCount(in[s].shape) / outer);
      dispatch.uniforms.push_back(Uniform::u32(4 + static_cast<int>(s), segmentEnd));
      dispatch.uniforms.push_back(Uniform::i32(36 + static_cast<int>(s), static_cast<std::int32_t>((in[s].view.offset - begin) / sizeof(float))));
    }
    plan.record(dispatch);
  }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.empty() || axis_ >= in[0].size()) throw Error("concat along axis " + std::to_string(axis_) + " does not fit " + shapesText(in));
    checkRank(name(), in[0]);
    Shape out = in[0];
    out[axis_] = 0;
    for (const Shape& shape : in) {
      for (std::size_t k = 0; k < shape.size(); ++k) {
        if (shape.size() != out.size() || (k != axis_ && shape[k] != out[k])) throw Error("concat's inputs differ off its axis: " + shapesText(in));
      }
      out[axis_] += shape[axis_];
    }
    return out;
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const Shape out = outputShape(shapesOf(in));
    std::vector<double> y;
    forEachCoordinate(out, [&](const std::vector<std::uint32_t>& c) {
      std::vector<std::uint32_t> local = c;
      std::size_t part = 0;
      while (local[axis_] >= in[part].shape[axis_]) local[axis_] -= in[part++].shape[axis_];
      std::size_t index = 0;
      for (std::size_t k = 0; k < c.size(); ++k) index = index * in[part].shape[k] + local[k];
      y.push_back((*in[part].values)[index]);
    });
    return y;
  }

 protected:
  std::vector<RegionCopy> copies(const std::vector<Shape>& in, const Shape& out) const override {
    std::vector<RegionCopy> list;
    const std::vector<std::int64_t> y = stridesOf(out);
    std::int64_t offset = 0;
    for (const Shape& shape : in) {
      list.push_back({shape, 0, offset * y[axis_], stridesOf(shape), y});
      offset += shape[axis_];
    }
    return list;
  }

 private:
  std::uint32_t axis_;
};

class PadOp : public LayoutOp {
 public:
  PadOp(std::vector<std::uint32_t> before, std::vector<std::uint32_t> after, float value)
      : before_(std::move(before)), after_(std::move(after)), value_(value) {}
  std::string name() const override { return "pad"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1 || in[0].size() != before_.size() || in[0].size() != after_.size()) throw Error("pad does not fit " + shapesText(in));
    checkRank(name(), in[0]);
    Shape out = in[0];
    for (std::size_t k = 0; k < out.size(); ++k) out[k] += before_[k] + after_[k];
    return out;
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const Shape out = outputShape(shapesOf(in));
    std::vector<double> y;
    forEachCoordinate(out, [&](const std::vector<std::uint32_t>& c) {
      std::size_t index = 0;
      for (std::size_t k = 0; k < c.size(); ++k) {
        if (c[k] < before_[k] || c[k] >= before_[k] + in[0].shape[k]) {
          y.push_back(value_);
          return;
        }
        index = index * in[0].shape[k] + (c[k] - before_[k]);
      }
      y.push_back((*in[0].values)[index]);
    });
    return y;
  }

 protected:
  std::optional<float> fill() const override { return value_; }
  std::vector<RegionCopy> copies(const std::vector<Shape>& in, const Shape& out) const override {
    const std::vector<std::int64_t> y = stridesOf(out);
    RegionCopy copy{in[0], 0, 0, stridesOf(in[0]), y};
    for (std::size_t k = 0; k < out.size(); ++k) copy.yOffset += before_[k] * y[k];
    return {copy};
  }

 private:
  std::vector<std::uint32_t> before_, after_;
  float value_;
};

class ExpandOp : public LayoutOp {
 public:
  explicit ExpandOp(Shape shape) : shape_(std::move(shape)) {}
  std::string name() const override { return "expand"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1) throw Error("expand takes one input");
    const Shape out = broadcastShapes(in[0], shape_);
    checkRank(name(), out);
    return out;
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const Shape out = outputShape(shapesOf(in));
    std::vector<double> y;
    const Shape& x = in[0].shape;
    forEachCoordinate(out, [&](const std::vector<std::uint32_t>& c) {
      std::size_t index = 0;
      for (std::size_t i = 0; i < x.size(); ++i) index = index * x[i] + (x[i] == 1 ? 0 : c[out.size() - x.size() + i]);
      y.push_back((*in[0].values)[index]);
    });
    return y;
  }

 protected:
  std::vector<RegionCopy> copies(const std::vector<Shape>& in, const Shape& out) const override {
    return {{out, 0, 0, broadcastStrides(in[0], out), stridesOf(out)}};
  }

 private:
  Shape shape_;
};

class ReshapeOp : public InferenceOp {
 public:
  explicit ReshapeOp(Shape shape) : shape_(std::move(shape)) {}
  std::string name() const override { return "reshape"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1 || elementCount(in[0]) != elementCount(shape_)) {
      throw Error("reshape to " + describe(shape_) + " does not fit " + shapesText(in));
    }
    return shape_;
  }
  bool isView() const override { return true; }
  void forward(ProgramCache&, Plan&, const std::vector<GpuTensor>&, const GpuTensor&) const override {
    GLNET_ASSERT(false, "a view records no dispatch");
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override { return *in[0].values; }

 private:
  Shape shape_;
};

std::uint32_t pooledSize(std::uint32_t size, std::uint32_t padBefore, std::uint32_t padAfter, std::uint32_t kernel, std::uint32_t stride,
                          std::uint32_t dilation, bool ceilMode) {
  const std::int64_t span = std::int64_t{dilation} * (kernel - 1) + 1, room = std::int64_t{size} + padBefore + padAfter - span;
  if (room < 0) return 0;
  std::int64_t out = (ceilMode ? (room + stride - 1) / stride : room / stride) + 1;
  // A last window that would start inside the end padding only is dropped (PyTorch and ONNX agree).
  if (ceilMode && (out - 1) * stride >= std::int64_t{size} + padBefore) --out;
  return static_cast<std::uint32_t>(out);
}

// Trainable: its gradient goes back to the window's first maximum (max) or spreads over the cells it averaged.
class PoolOp : public InferenceOp {
 public:
  explicit PoolOp(PoolSettings s) : s_(s) {}
  bool differentiable() const override { return true; }
  bool passesGradient(std::size_t) const override { return true; }
  std::string name() const override {
    return std::string(s_.average ? "average" : "max") + " pool " + std::to_string(s_.kernel[0]) + "x" + std::to_string(s_.kernel[1]);
  }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1 || in[0].size() != 4) throw Error(name() + " takes one [N, C, H, W] input, not " + shapesText(in));
    for (int k = 0; k < 2; ++k) {
      if (s_.kernel[k] == 0 || s_.strides[k] == 0 || s_.dilations[k] == 0) throw Error(name() + ": kernel, strides and dilations must be positive");
    }
    const std::uint32_t oh = pooledSize(in[0][2], s_.pads[0], s_.pads[2], s_.kernel[0], s_.strides[0], s_.dilations[0], s_.ceilMode);
    const std::uint32_t ow = pooledSize(in[0][3], s_.pads[1], s_.pads[3], s_.kernel[1], s_.strides[1], s_.dilations[1], s_.ceilMode);
    if (oh == 0 || ow == 0) throw Error(name() + ": the window is larger than the padded input " + describe(in[0]));
    return {in[0][0], in[0][1], oh, ow};
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    const Program& program = programs.get("Pooling.glsl", {{"POOL_KIND", s_.average ? "1" : "0"}});
    Dispatch dispatch = linearDispatch(program, name(), elementCount(out.shape));
    dispatch.buffers = {{0, in[0].view, Access::read}, {1, out.view, Access::write}};
    dispatch.uniforms = uniforms(in[0].shape, out.shape);
    plan.record(dispatch);
  }
  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out,
                const GpuTensor& dOut, const std::vector<std::optional<GradientTarget>>& targets) const override {
    if (!targets[0]) return;
    const Program& program = programs.get("Pooling.glsl", {{"POOL_KIND", s_.average ? "1" : "0"}, {"POOL_GRADIENT", "1"}});
    Dispatch dispatch = linearDispatch(program, name() + " backward", elementCount(in[0].shape));
    dispatch.buffers = {{0, in[0].view, Access::read}, {2, dOut.view, Access::read}, {3, targets[0]->view, Access::readWrite}};
    dispatch.uniforms = uniforms(in[0].shape, out.shape);
    dispatch.uniforms.push_back(Uniform::u32(16, targets[0]->accumulate ? 1 : 0));
    plan.record(dispatch);
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    std::vector<double> y;
    forWindows(in[0], [&](const std::vector<std::size_t>& cells, std::size_t best, double divisor) {
      double sum = 0;
      for (const std::size_t cell : cells) sum += (*in[0].values)[cell];
      y.push_back(s_.average ? sum / divisor : cells.empty() ? -INFINITY : (*in[0].values)[best]);
    });
    return y;
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>&,
                                                     const std::vector<double>& dy) const override {
    std::vector<double> dx(in[0].values->size(), 0.0);
    std::size_t output = 0;
    forWindows(in[0], [&](const std::vector<std::size_t>& cells, std::size_t best, double divisor) {
      if (s_.average) {
        for (const std::size_t cell : cells) dx[cell] += dy[output] / divisor;
      } else if (!cells.empty()) {
        dx[best] += dy[output];
      }
      ++output;
    });
    return {dx};
  }

 private:
  std::vector<Uniform> uniforms(const Shape& x, const Shape& out) const {
    const std::array<std::uint32_t, 16> values{x[0] * x[1], x[2], x[3], out[2], out[3], s_.kernel[0], s_.kernel[1], s_.strides[0],
                                               s_.strides[1], s_.dilations[0], s_.dilations[1], s_.pads[0], s_.pads[1], s_.pads[2],
                                               s_.pads[3], s_.countIncludePad ? 1u : 0u};
    std::vector<Uniform> result;
    for (std::size_t k = 0; k < values.size(); ++k) {
      const bool unsignedUniform = k == 0 || k == 3 || k == 4 || k == 15;
      result.push_back(unsignedUniform ? Uniform::u32(static_cast<int>(k), values[k])
                                       : Uniform::i32(static_cast<int>(k), static_cast<std::int32_t>(values[k])));
    }
    return result;
  }
  // Calls visit(the input indices of the window's cells inside the input, the first maximum's index, the average's
  // divisor) for every output element in order. Average pooling ignores dilations, as ONNX's AveragePool before
  // opset 19 does.
  template <class Visit>
  void forWindows(const HostTensor64& in, Visit visit) const {
    const Shape& x = in.shape;
    const Shape out = outputShape({x});
    const std::array<std::uint32_t, 2> dilations = s_.average ? std::array<std::uint32_t, 2>{1, 1} : s_.dilations;
    std::vector<std::size_t> cells;
    forEachCoordinate(out, [&](const std::vector<std::uint32_t>& c) {
      const std::int64_t top = std::int64_t{c[2]} * s_.strides[0] - s_.pads[0], left = std::int64_t{c[3]} * s_.strides[1] - s_.pads[1];
      cells.clear();
      std::size_t best = 0;
      for (std::int64_t kh = 0; kh < s_.kernel[0]; ++kh) {
        for (std::int64_t kw = 0; kw < s_.kernel[1]; ++kw) {
          const std::int64_t ih = top + kh * dilations[0], iw = left + kw * dilations[1];
          if (ih < 0 || iw < 0 || ih >= x[2] || iw >= x[3]) continue;
          const std::size_t index = ((std::size_t{c[0]} * x[1] + c[1]) * x[2] + static_cast<std::size_t>(ih)) * x[3] + static_cast<std::size_t>(iw);
          if (cells.empty() || (*in.values)[index] > (*in.values)[best]) best = index;
          cells.push_back(index);
        }
      }
      std::int64_t divisor = static_cast<std::int64_t>(cells.size());
      if (s_.countIncludePad) {
        divisor = (std::min<std::int64_t>(top + s_.kernel[0], std::int64_t{x[2]} + s_.pads[2]) - top) *
                  (std::min<std::int64_t>(left + s_.kernel[1], std::int64_t{x[3]} + s_.pads[3]) - left);
      }
      visit(cells, best, static_cast<double>(std::max<std::int64_t>(divisor, 1)));
    });
  }

 private:
  PoolSettings s_;
};

// Trainable without a fused function (GroupedConvGradient.glsl).
class GroupedConvOp : public InferenceOp {
 public:
  GroupedConvOp(ConvSettings s, Pointwise after) : s_(s), after_(after) {}
  bool differentiable() const override { return after_.kind == PointwiseKind::identity; }
  bool passesGradient(std::size_t) const override { return differentiable(); }
  std::string name() const override {
    return std::string(s_.groups > 1 ? "grouped conv" : "direct conv") + (after_.kind == PointwiseKind::identity ? "" : " + " + after_.name());
  }
  Shape outputShape(const std::vector<Shape>& in) const override {
    const bool fits = in.size() == 3 && in[0].size() == 4 && in[1].size() == 4 && in[2].size() == 1 && s_.groups > 0 &&
                      in[0][1] % s_.groups == 0 && in[1][0] % s_.groups == 0 && in[1][1] * s_.groups == in[0][1] && in[2][0] == in[1][0];
    if (!fits) {
      throw Error("conv takes X [N, C, H, W], W [OC, C/groups, KH, KW] and b [OC] with C and OC multiples of the " +
                  std::to_string(s_.groups) + " groups; got " + shapesText(in));
    }
    for (int k = 0; k < 2; ++k) {
      if (s_.strides[k] == 0 || s_.dilations[k] == 0) throw Error("conv: strides and dilations must be positive");
    }
    const std::uint32_t oh = pooledSize(in[0][2], s_.pads[0], s_.pads[2], in[1][2], s_.strides[0], s_.dilations[0], false);
    const std::uint32_t ow = pooledSize(in[0][3], s_.pads[1], s_.pads[3], in[1][3], s_.strides[1], s_.dilations[1], false);
    if (oh == 0 || ow == 0) throw Error("conv: the kernel is larger than the padded input " + describe(in[0]));
    return {in[0][0], in[1][0], oh, ow};
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    const Shape& x = in[0].shape;
    const Shape& w = in[1].shape;
    std::vector<ShaderDefine> defines = after_.defines();
    const std::vector<ShaderDefine> geometry = geometryDefines(x, w, out.shape);
    defines.insert(defines.end(), geometry.begin(), geometry.end());
    const auto i = [](std::uint32_t v) { return std::to_string(v); };
    if (const std::optional<std::array<std::uint32_t, 2>> tile = depthwiseTile(x, w, out.shape)) {
      defines.insert(defines.end(), {{"TILE_HEIGHT", i((*tile)[0])}, {"TILE_WIDTH", i((*tile)[1])}, {"TILE_INVOCATIONS", i((*tile)[0] * (*tile)[1])}});
      const Program& program = programs.get("GroupedConv.glsl", defines, {"Pointwise.glsl", "GroupedConvGeometry.glsl"});
      const std::uint64_t tiles = std::uint64_t{(out.shape[2] + (*tile)[0] - 1) / (*tile)[0]} * ((out.shape[3] + (*tile)[1] - 1) / (*tile)[1]);
      Dispatch dispatch;
      dispatch.program = &program;
      dispatch.label = "depthwise " + name();
      dispatch.groups = {static_cast<std::uint32_t>(tiles * x[0] * x[1]), 1, 1};
      dispatch.linear = true;
      dispatch.buffers = {{0, in[0].view, Access::read}, {1, in[1].view, Access::read}, {2, in[2].view, Access::read}, {3, out.view, Access::write}};
      dispatch.uniforms = {Uniform::u32(0, x[0])};
      plan.record(dispatch);
      return;
    }
    const Program& program = programs.get("GroupedConv.glsl", defines, {"Pointwise.glsl", "GroupedConvGeometry.glsl"});
    Dispatch dispatch = linearDispatch(program, name(), elementCount(out.shape));
    dispatch.buffers = {{0, in[0].view, Access::read}, {1, in[1].view, Access::read}, {2, in[2].view, Access::read}, {3, out.view, Access::write}};
    dispatch.uniforms = {Uniform::u32(0, x[0])};
    plan.record(dispatch);
  }
  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out, const GpuTensor& dOut,
                const std::vector<std::optional<GradientTarget>>& targets) const override {
    GLNET_ASSERT(differentiable(), "a convolution with a fused function runs in forward-only graphs");
    const Shape& x = in[0].shape;
    const Shape& w = in[1].shape;
    const std::vector<ShaderDefine> geometry = geometryDefines(x, w, out.shape);
    static const char* const labels[] = {" dX", " dW", " db"};
    for (std::uint32_t mode = 0; mode < 3; ++mode) {
      if (!targets[mode]) continue;
      std::vector<ShaderDefine> defines = geometry;
      defines.push_back({"GRADIENT_MODE", std::to_string(mode)});
      const Program& program = programs.get("GroupedConvGradient.glsl", defines, {"GroupedConvGeometry.glsl"});
      Dispatch dispatch;
      if (mode == 0) {
        dispatch = linearDispatch(program, name() + labels[mode], elementCount(x));
      } else {
        dispatch.program = &program;
        dispatch.label = name() + labels[mode];
        dispatch.groups = {static_cast<std::uint32_t>(mode == 1 ? elementCount(w) : w[0]), 1, 1};
        dispatch.linear = true;
      }
      dispatch.buffers = {{0, in[0].view, Access::read}, {1, in[1].view, Access::read}, {2, dOut.view, Access::read},
                          {3, targets[mode]->view, targets[mode]->accumulate ? Access::readWrite : Access::write}};
      dispatch.uniforms = {Uniform::u32(0, x[0]), Uniform::u32(1, targets[mode]->accumulate ? 1 : 0)};
      plan.record(dispatch);
    }
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>&,
                                                     const std::vector<double>& dy) const override {
    GLNET_ASSERT(differentiable(), "a convolution with a fused function runs in forward-only graphs");
    std::vector<std::vector<double>> grads{std::vector<double>(in[0].values->size(), 0.0), std::vector<double>(in[1].values->size(), 0.0),
                                           std::vector<double>(in[1].shape[0], 0.0)};
    forTaps(in, [&](std::size_t output, std::uint32_t channel) { grads[2][channel] += dy[output]; },
            [&](std::size_t output, std::size_t xIndex, std::size_t wIndex) {
              grads[0][xIndex] += dy[output] * (*in[1].values)[wIndex];
              grads[1][wIndex] += dy[output] * (*in[0].values)[xIndex];
            },
            [](std::size_t) {});
    return grads;
  }
  // The layer's geometry, compiled into GroupedConv.glsl and GroupedConvGradient.glsl.
  std::vector<ShaderDefine> geometryDefines(const Shape& x, const Shape& w, const Shape& out) const {
    const auto u = [](std::uint32_t v) { return std::to_string(v) + "u"; };
    const auto i = [](std::uint32_t v) { return std::to_string(v); };
    return {{"CONV_CHANNELS", u(x[1])}, {"CONV_HEIGHT", u(x[2])}, {"CONV_WIDTH", u(x[3])},
            {"CONV_OUT_CHANNELS", u(w[0])}, {"CONV_OUT_HEIGHT", u(out[2])}, {"CONV_OUT_WIDTH", u(out[3])},
            {"CONV_KERNEL_HEIGHT", u(w[2])}, {"CONV_KERNEL_WIDTH", u(w[3])}, {"CONV_GROUPS", u(s_.groups)},
            {"CONV_STRIDE_H", i(s_.strides[0])}, {"CONV_STRIDE_W", i(s_.strides[1])},
            {"CONV_DILATION_H", i(s_.dilations[0])}, {"CONV_DILATION_W", i(s_.dilations[1])},
            {"CONV_PAD_TOP", i(s_.pads[0])}, {"CONV_PAD_LEFT", i(s_.pads[1])}};
  }
  // A depthwise convolution (one input and one output channel per group) of stride 1 runs GroupedConv.glsl's tiled kernel
  // with tiles of this height and width: as wide as the output up to 32, as tall as a group of GLNET_GROUP_SIZE
  // allows, and only where the tile's input window fits the device's shared memory. Measured on the H100 at batch
  // 64 (mobilenet_v2): stride 1 gains 11-20 % per layer (0.247 -> 0.219 ms at 56x56x144), stride 2 loses 45 %
  // (0.194 -> 0.282 ms at 112x112x96 -> 56x56), so strided ones stay with GroupedConv.glsl.
  std::optional<std::array<std::uint32_t, 2>> depthwiseTile(const Shape& x, const Shape& w, const Shape& out) const {
    if (s_.groups != x[1] || w[0] != x[1] || s_.strides != std::array<std::uint32_t, 2>{1, 1}) return std::nullopt;
    const auto group = static_cast<std::uint32_t>(currentLimits().groupSize());
    std::uint32_t width = 8, height = 1;
    while (width < 32 && width < out[3]) width *= 2;
    while (height * width < group && height < out[2]) height *= 2;
    const std::uint64_t windowHeight = std::uint64_t{height - 1} * s_.strides[0] + std::uint64_t{w[2] - 1} * s_.dilations[0] + 1;
    const std::uint64_t windowWidth = std::uint64_t{width - 1} * s_.strides[1] + std::uint64_t{w[3] - 1} * s_.dilations[1] + 1;
    if (height * width > group || windowHeight * windowWidth * sizeof(float) > static_cast<std::uint64_t>(currentLimits().maxSharedMemoryBytes)) {
      return std::nullopt;
    }
    return std::array<std::uint32_t, 2>{height, width};
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    std::vector<double> y;
    double sum = 0;
    forTaps(in, [&](std::size_t, std::uint32_t channel) { sum = (*in[2].values)[channel]; },
            [&](std::size_t, std::size_t xIndex, std::size_t wIndex) { sum += (*in[0].values)[xIndex] * (*in[1].values)[wIndex]; },
            [&](std::size_t) { y.push_back(after_(sum)); });
    return y;
  }
  // For every output element in order: begin(output index, its channel), then tap(output index, x index, w index) for each
  // product of its sum inside the image, then end(output index).
  template <class Begin, class Tap, class End>
  void forTaps(const std::vector<HostTensor64>& in, Begin begin, Tap tap, End end) const {
    const Shape& x = in[0].shape;
    const Shape& w = in[1].shape;
    const std::uint32_t groupIn = x[1] / s_.groups, groupOut = w[0] / s_.groups;
    std::size_t index = 0;
    forEachCoordinate(outputShape(shapesOf(in)), [&](const std::vector<std::uint32_t>& c) {
      begin(index, c[1]);
      for (std::uint32_t ic = 0; ic < groupIn; ++ic) {
        const std::uint32_t channel = c[1] / groupOut * groupIn + ic;
        for (std::uint32_t kh = 0; kh < w[2]; ++kh) {
          for (std::uint32_t kw = 0; kw < w[3]; ++kw) {
            const std::int64_t ih = std::int64_t{c[2]} * s_.strides[0] - s_.pads[0] + std::int64_t{kh} * s_.dilations[0];
            const std::int64_t iw = std::int64_t{c[3]} * s_.strides[1] - s_.pads[1] + std::int64_t{kw} * s_.dilations[1];
            if (ih < 0 || iw < 0 || ih >= x[2] || iw >= x[3]) continue;
            tap(index, ((std::size_t{c[0]} * x[1] + channel) * x[2] + static_cast<std::size_t>(ih)) * x[3] + static_cast<std::size_t>(iw),
                ((std::size_t{c[1]} * groupIn + ic) * w[2] + kh) * w[3] + kw);
          }
        }
      }
      end(index++);
    });
  }

 private:
  ConvSettings s_;
  Pointwise after_;
};

class AxisOp : public InferenceOp {
 public:
  AxisOp(AxisKind kind, std::uint32_t first, std::uint32_t last, bool keepDims, float epsilon)
      : kind_(kind), first_(first), last_(last), keepDims_(keepDims), epsilon_(epsilon) {}
  std::string name() const override {
    static const char* const names[] = {"softmax",    "log-softmax", "layer normalization", "reduce mean", "reduce sum",
                                        "reduce max", "reduce min",  "inverse deviation",   "reduce l1",   "reduce l2",
                                        "reduce sum of squares", "reduce log-sum", "reduce log-sum-exp", "reduce product"};
    return names[static_cast<int>(kind_)];
  }
  bool reduces() const { return kind_ >= AxisKind::mean; }
  bool takesEpsilon() const { return kind_ == AxisKind::layerNormalization || kind_ == AxisKind::inverseDeviation; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    const std::size_t inputs = kind_ == AxisKind::layerNormalization ? 3 : 1;
    if (in.size() != inputs || first_ >= last_ || last_ > in[0].size()) throw Error(name() + " over axes does not fit " + shapesText(in));
    if (inputs == 3) {
      const std::size_t axis = elementCount(Shape(in[0].begin() + first_, in[0].begin() + last_));
      if (elementCount(in[1]) != axis || elementCount(in[2]) != axis) throw Error(name() + "'s scale and bias must hold " + std::to_string(axis) + " values");
    }
    if (!reduces()) return in[0];
    Shape out(in[0].begin(), in[0].begin() + first_);
    if (keepDims_) out.insert(out.end(), last_ - first_, 1);
    out.insert(out.end(), in[0].begin() + last_, in[0].end());
    return out;
  }
  // The tensor as [outer, axis, inner].
  std::array<std::size_t, 3> lines(const Shape& x) const {
    return {elementCount(Shape(x.begin(), x.begin() + first_)), elementCount(Shape(x.begin() + first_, x.begin() + last_)),
            elementCount(Shape(x.begin() + last_, x.end()))};
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    const auto [outer, axis, inner] = lines(in[0].shape);
    // About 4 elements per invocation, 32 invocations at least (a warp on NVIDIA, half a wavefront on AMD).
    std::uint32_t lineGroup = 32;
    while (lineGroup < static_cast<std::uint32_t>(currentLimits().groupSize()) && std::uint64_t{lineGroup} * 4 < axis) lineGroup *= 2;
    const Program& program = programs.get("AxisReduce.glsl", {{"AXIS_OP", std::to_string(static_cast<int>(kind_))}, {"LINE_GROUP", std::to_string(lineGroup)}});
    Dispatch dispatch;
    dispatch.program = &program;
    dispatch.label = name();
    dispatch.groups = {static_cast<std::uint32_t>(outer * inner), 1, 1};
    dispatch.linear = true;
    const bool normalize = kind_ == AxisKind::layerNormalization;
    dispatch.buffers = {{0, in[0].view, Access::read}, {1, in[normalize ? 1 : 0].view, Access::read},
                        {2, in[normalize ? 2 : 0].view, Access::read}, {3, out.view, Access::write}};
    dispatch.uniforms = {Uniform::u32(0, static_cast<std::uint32_t>(outer * inner)), Uniform::u32(1, static_cast<std::uint32_t>(axis)),
                         Uniform::u32(2, static_cast<std::uint32_t>(inner)), Uniform::f32(3, epsilon_)};
    plan.record(dispatch);
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const std::array<std::size_t, 3> line = lines(in[0].shape);
    const std::size_t outer = line[0], axis = line[1], inner = line[2];
    const std::vector<double>& x = *in[0].values;
    std::vector<double> y(reduces() ? outer * inner : x.size());
    for (std::size_t o = 0; o < outer; ++o) {
      for (std::size_t i = 0; i < inner; ++i) {
        const auto at = [&](std::size_t k) { return o * axis * inner + k * inner + i; };
        double largest = -INFINITY, smallest = INFINITY, sum = 0;
        const auto inverseDeviation = [&](double mean) {
          double squares = 0;
          for (std::size_t k = 0; k < axis; ++k) squares += (x[at(k)] - mean) * (x[at(k)] - mean);
          return 1 / std::sqrt(squares / static_cast<double>(axis) + epsilon_);
        };
        for (std::size_t k = 0; k < axis; ++k) {
          largest = std::max(largest, x[at(k)]);
          smallest = std::min(smallest, x[at(k)]);
          sum += x[at(k)];
        }
        switch (kind_) {
          case AxisKind::softmax:
          case AxisKind::logSoftmax: {
            double total = 0;
            for (std::size_t k = 0; k < axis; ++k) total += std::exp(x[at(k)] - largest);
            for (std::size_t k = 0; k < axis; ++k) {
              y[at(k)] = kind_ == AxisKind::softmax ? std::exp(x[at(k)] - largest) / total : x[at(k)] - largest - std::log(total);
            }
            break;
          }
          case AxisKind::layerNormalization: {
            const double mean = sum / static_cast<double>(axis), scale = inverseDeviation(mean);
            for (std::size_t k = 0; k < axis; ++k) y[at(k)] = (x[at(k)] - mean) * scale * (*in[1].values)[k] + (*in[2].values)[k];
            break;
          }
          case AxisKind::mean: y[o * inner + i] = sum / static_cast<double>(axis); break;
          case AxisKind::sum: y[o * inner + i] = sum; break;
          case AxisKind::max: y[o * inner + i] = largest; break;
          case AxisKind::min: y[o * inner + i] = smallest; break;
          case AxisKind::inverseDeviation: y[o * inner + i] = inverseDeviation(sum / static_cast<double>(axis)); break;
          case AxisKind::l1:
          case AxisKind::l2:
          case AxisKind::sumSquare:
          case AxisKind::logSumExp:
          case AxisKind::product: {
            double total = kind_ == AxisKind::product ? 1 : 0;
            for (std::size_t k = 0; k < axis; ++k) {
              const double v = x[at(k)];
              if (kind_ == AxisKind::l1) total += std::abs(v);
              if (kind_ == AxisKind::l2 || kind_ == AxisKind::sumSquare) total += v * v;
              if (kind_ == AxisKind::logSumExp) total += std::exp(v - largest);
              if (kind_ == AxisKind::product) total *= v;
            }
            y[o * inner + i] = kind_ == AxisKind::l2 ? std::sqrt(total) : kind_ == AxisKind::logSumExp ? largest + std::log(total) : total;
            break;
          }
          case AxisKind::logSum: y[o * inner + i] = std::log(sum); break;
        }
      }
    }
    return y;
  }

 private:
  AxisKind kind_;
  std::uint32_t first_, last_;
  bool keepDims_;
  float epsilon_;
};

class BatchedMatMulOp : public InferenceOp {
 public:
  std::string name() const override { return "batched matmul"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 2 || in[0].size() < 2 || in[1].size() < 2 || in[0].back() != in[1][in[1].size() - 2]) {
      throw Error("matmul takes A [..., M, K] and B [..., K, N]; got " + shapesText(in));
    }
    Shape out = broadcastShapes(Shape(in[0].begin(), in[0].end() - 2), Shape(in[1].begin(), in[1].end() - 2));
    if (out.size() > 4) throw Error("matmul broadcasts at most 4 batch axes; got " + shapesText(in));
    out.push_back(in[0][in[0].size() - 2]);
    out.push_back(in[1].back());
    return out;
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    const Program& program = programs.get("BatchedMatMul.glsl");
    Dispatch dispatch = linearDispatch(program, name(), elementCount(out.shape));
    dispatch.buffers = {{0, in[0].view, Access::read}, {1, in[1].view, Access::read}, {2, out.view, Access::write}};
    const Shape batch(out.shape.begin(), out.shape.end() - 2);
    const std::uint32_t m = out.shape[out.shape.size() - 2], n = out.shape.back(), k = in[0].shape.back();
    dispatch.uniforms = {Uniform::u32(0, count32(out.shape)), Uniform::u32(1, m), Uniform::u32(2, n), Uniform::u32(3, k)};
    const std::vector<std::int64_t> own = stridesOf(batch);
    const auto matrixStrides = [&](const Shape& shape) {
      std::vector<std::int64_t> strides = broadcastStrides(Shape(shape.begin(), shape.end() - 2), batch);
      for (std::int64_t& s : strides) s *= std::int64_t{shape[shape.size() - 2]} * shape.back();
      return strides;
    };
    const std::vector<std::int64_t> a = matrixStrides(in[0].shape), b = matrixStrides(in[1].shape);
    for (std::size_t axis = 0; axis < 4; ++axis) {
      const bool used = axis < batch.size();
      dispatch.uniforms.push_back(Uniform::u32(4 + static_cast<int>(axis), used ? static_cast<std::uint32_t>(own[axis]) : 1));
      dispatch.uniforms.push_back(Uniform::u32(8 + static_cast<int>(axis), used ? static_cast<std::uint32_t>(a[axis]) : 0));
      dispatch.uniforms.push_back(Uniform::u32(12 + static_cast<int>(axis), used ? static_cast<std::uint32_t>(b[axis]) : 0));
    }
    plan.record(dispatch);
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const Shape out = outputShape(shapesOf(in));
    const std::size_t k = in[0].shape.back();
    std::vector<double> y;
    const auto matrixAt = [&](const HostTensor64& t, const std::vector<std::uint32_t>& c) {
      std::size_t index = 0;
      const std::size_t batchRank = t.shape.size() - 2, outBatch = out.size() - 2;
      for (std::size_t i = 0; i < batchRank; ++i) index = index * t.shape[i] + (t.shape[i] == 1 ? 0 : c[outBatch - batchRank + i]);
      return index * t.shape[batchRank] * t.shape[batchRank + 1];
    };
    forEachCoordinate(out, [&](const std::vector<std::uint32_t>& c) {
      const std::size_t row = c[c.size() - 2], column = c.back(), n = out.back();
      const std::size_t a = matrixAt(in[0], c), b = matrixAt(in[1], c);
      double sum = 0;
      for (std::size_t i = 0; i < k; ++i) sum += (*in[0].values)[a + row * k + i] * (*in[1].values)[b + i * n + column];
      y.push_back(sum);
    });
    return y;
  }
};

}  // namespace

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

std::shared_ptr<const Op> pointwiseOp(Pointwise function) { return std::make_shared<PointwiseOp>(function); }
std::shared_ptr<const Op> broadcastOp(BinaryKind kind, Pointwise after) { return std::make_shared<BroadcastOp>(kind, after); }
std::shared_ptr<const Op> channelAffineOp(bool shift, Pointwise after) { return std::make_shared<ChannelAffineOp>(shift, after); }
std::shared_ptr<const Op> transposeOp(std::vector<std::uint32_t> permutation) { return std::make_shared<TransposeOp>(std::move(permutation)); }
std::shared_ptr<const Op> sliceOp(std::vector<std::int64_t> starts, std::vector<std::int64_t> steps, Shape size) {
  return std::make_shared<SliceOp>(std::move(starts), std::move(steps), std::move(size));
}
std::shared_ptr<const Op> concatOp(std::uint32_t axis) { return std::make_shared<ConcatOp>(axis); }
std::shared_ptr<const Op> padOp(std::vector<std::uint32_t> before, std::vector<std::uint32_t> after, float value) {
  return std::make_shared<PadOp>(std::move(before), std::move(after), value);
}
std::shared_ptr<const Op> expandOp(Shape shape) { return std::make_shared<ExpandOp>(std::move(shape)); }
std::shared_ptr<const Op> reshapeOp(Shape shape) { return std::make_shared<ReshapeOp>(std::move(shape)); }
std::shared_ptr<const Op> poolOp(PoolSettings settings) { return std::make_shared<PoolOp>(settings); }
std::shared_ptr<const Op> groupedConvOp(ConvSettings settings, Pointwise after) { return std::make_shared<GroupedConvOp>(settings, after); }
std::shared_ptr<const Op> axisOp(AxisKind kind, std::uint32_t first, std::uint32_t last, bool keepDims, float epsilon) {
  return std::make_shared<AxisOp>(kind, first, last, keepDims, epsilon);
}
std::shared_ptr<const Op> batchedMatMulOp() { return std::make_shared<BatchedMatMulOp>(); }

}  // namespace glnet
