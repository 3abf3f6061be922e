// The layout operators of imported models (InferenceOps.h): transpose, slice, concat, pad, expand and reshape, as
// region copies or views.
#include "graph/InferenceOp.h"

#include "base/check.h"
#include "gl/Limits.h"
#include "numbers/ShaderModes.h"
#include "ops/StridedCopy.h"
#include "plan/Groups.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

namespace glnet {
namespace inference {
namespace {

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
  std::optional<std::uint32_t> joinedAxis() const override { return axis_; }
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
    const Program& program = programs.get("StridedCopy.glsl", {kindDefine(CopyMode::concat), {"ACCUMULATE", "0"}});
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

class RegionsOp : public InferenceOp {
 public:
  RegionsOp(Shape output, std::vector<RegionCopy> regions) : output_(std::move(output)), regions_(std::move(regions)) {}
  std::string name() const override { return "regions"; }
  // Each region a box of the output (its strides the output's own) inside the input, no two sharing an element, all
  // of them the output's elements: every element written once, so their copies need no barrier between them.
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1) throw Error("regions takes one input, not " + shapesText(in));
    checkRank(name(), output_);
    const std::vector<std::int64_t> yStrides = stridesOf(output_);
    const auto inElements = static_cast<std::int64_t>(elementCount(in[0]));
    std::vector<std::vector<std::int64_t>> origins;
    std::uint64_t covered = 0;
    for (std::size_t i = 0; i < regions_.size(); ++i) {
      const RegionCopy& r = regions_[i];
      if (r.region.size() != output_.size() || r.xStrides.size() != output_.size() || r.yStrides != yStrides) {
        throw Error("a region of " + describe(r.region) + " is no box of " + describe(output_));
      }
      std::int64_t low = r.xOffset, high = r.xOffset;
      std::vector<std::int64_t> origin;
      bool inside = elementCount(r.region) > 0 && r.yOffset >= 0;
      for (std::size_t k = 0; k < output_.size(); ++k) {
        const std::int64_t span = static_cast<std::int64_t>(r.region[k]) - 1;
        (r.xStrides[k] < 0 ? low : high) += span * r.xStrides[k];
        origin.push_back(r.yOffset / yStrides[k] % output_[k]);
        inside = inside && origin.back() + r.region[k] <= output_[k];
      }
      if (!inside || low < 0 || high >= inElements || r.yOffset >= static_cast<std::int64_t>(elementCount(output_))) {
        throw Error("a region of " + describe(r.region) + " runs outside " + describe(in[0]) + " or " + describe(output_));
      }
      for (std::size_t other = 0; other < i; ++other) {
        bool apart = false;
        for (std::size_t k = 0; k < output_.size() && !apart; ++k) {
          apart = origin[k] + r.region[k] <= origins[other][k] || origins[other][k] + regions_[other].region[k] <= origin[k];
        }
        if (!apart) throw Error("two regions of " + describe(output_) + " share elements");
      }
      origins.push_back(std::move(origin));
      covered += elementCount(r.region);
    }
    if (covered != elementCount(output_)) {
      throw Error("the regions hold " + std::to_string(covered) + " elements, not the " + std::to_string(elementCount(output_)) + " of " + describe(output_));
    }
    return output_;
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    std::vector<double> y(elementCount(output_), std::nan(""));
    for (const RegionCopy& r : regions_) {
      forEachCoordinate(r.region, [&](const std::vector<std::uint32_t>& c) {
        std::int64_t from = r.xOffset, to = r.yOffset;
        for (std::size_t k = 0; k < c.size(); ++k) {
          from += c[k] * r.xStrides[k];
          to += c[k] * r.yStrides[k];
        }
        y[static_cast<std::size_t>(to)] = (*in[0].values)[static_cast<std::size_t>(from)];
      });
    }
    return y;
  }
  // The regions write apart: no barrier between their copies (one partition of the output, a part each), the partition
  // named by a number no other op takes.
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    static std::atomic<std::uint64_t> partitions{0};
    const std::uint64_t partition = ++partitions | std::uint64_t{1} << 63;
    for (std::size_t i = 0; i < regions_.size(); ++i) {
      Dispatch copy = regionCopy(programs, name(), in[0].view, out.view, regions_[i]);
      for (StorageBinding& binding : copy.buffers) {
        if (binding.access == Access::write) binding.part = RangePart{partition, static_cast<std::uint32_t>(i)};
      }
      plan.record(copy);
    }
  }

 private:
  Shape output_;
  std::vector<RegionCopy> regions_;
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

}  // namespace
}  // namespace inference

std::shared_ptr<const Op> transposeOp(std::vector<std::uint32_t> permutation) { return std::make_shared<inference::TransposeOp>(std::move(permutation)); }
std::shared_ptr<const Op> sliceOp(std::vector<std::int64_t> starts, std::vector<std::int64_t> steps, Shape size) {
  return std::make_shared<inference::SliceOp>(std::move(starts), std::move(steps), std::move(size));
}
std::shared_ptr<const Op> concatOp(std::uint32_t axis) { return std::make_shared<inference::ConcatOp>(axis); }
std::shared_ptr<const Op> regionsOp(Shape output, std::vector<RegionCopy> regions) {
  return std::make_shared<inference::RegionsOp>(std::move(output), std::move(regions));
}
std::shared_ptr<const Op> padOp(std::vector<std::uint32_t> before, std::vector<std::uint32_t> after, float value) {
  return std::make_shared<inference::PadOp>(std::move(before), std::move(after), value);
}
std::shared_ptr<const Op> expandOp(Shape shape) { return std::make_shared<inference::ExpandOp>(std::move(shape)); }
std::shared_ptr<const Op> reshapeOp(Shape shape) { return std::make_shared<inference::ReshapeOp>(std::move(shape)); }

}  // namespace glnet
