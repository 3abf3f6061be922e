// Functions along an axis (softmax, reductions, layer normalization) and products of two computed tensors, of imported
// models (InferenceOps.h).
#include "graph/InferenceOp.h"

#include "gl/Limits.h"
#include "base/check.h"
#include "plan/Groups.h"
#include "ops/StridedCopy.h"
#include "ref/Reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

namespace glnet {
namespace inference {
namespace {

class AxisOp : public InferenceOp {
 public:
  // `residual`: layer normalization of x + r, r (x's shape) its fourth input (a residual Add read by nothing else).
  AxisOp(AxisKind kind, std::uint32_t first, std::uint32_t last, bool keepDims, float epsilon, bool residual = false)
      : kind_(kind), first_(first), last_(last), keepDims_(keepDims), epsilon_(epsilon), residual_(residual) {}
  std::string name() const override {
    return std::string(kindName(kind_)) + (residual_ ? " + residual" : "");
  }
  bool reduces() const { return axisKindReduces(kind_); }
  bool takesEpsilon() const {
    return kind_ == AxisKind::layerNormalization || kind_ == AxisKind::rmsNormalization || kind_ == AxisKind::inverseDeviation;
  }
  Shape outputShape(const std::vector<Shape>& in) const override {
    const std::size_t inputs = kind_ == AxisKind::layerNormalization ? (residual_ ? 4 : 3) : kind_ == AxisKind::rmsNormalization ? 2 : 1;
    if (in.size() != inputs || first_ >= last_ || last_ > in[0].size() || (residual_ && in[3] != in[0])) {
      throw Error(name() + " over axes does not fit " + shapesText(in));
    }
    if (inputs > 1) {
      const std::size_t axis = elementCount(Shape(in[0].begin() + first_, in[0].begin() + last_));
      if (elementCount(in[1]) != axis || (inputs > 2 && elementCount(in[2]) != axis)) {
        throw Error(name() + "'s scale" + (inputs > 2 ? " and bias" : "") + " must hold " + std::to_string(axis) + " values");
      }
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
    std::vector<ShaderDefine> defines;
    if (residual_) defines.push_back({"RESIDUAL", "1"});
    Dispatch dispatch = axisDispatch(programs, kind_, defines, outer * inner, axis, inner, epsilon_, name());
    const bool scaled = in.size() > 1, shifted = kind_ == AxisKind::layerNormalization;
    dispatch.buffers = {{0, in[0].view, Access::read}, {1, in[scaled ? 1 : 0].view, Access::read},
                        {2, in[shifted ? 2 : 0].view, Access::read}, {3, out.view, Access::write}};
    if (residual_) dispatch.buffers.push_back({4, in[3].view, Access::read});
    plan.record(dispatch);
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const std::array<std::size_t, 3> line = lines(in[0].shape);
    const std::size_t outer = line[0], axis = line[1], inner = line[2];
    std::vector<double> x = *in[0].values;
    if (residual_) {
      for (std::size_t i = 0; i < x.size(); ++i) x[i] += (*in[3].values)[i];
    }
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
          largest = ref::maxNaN(largest, x[at(k)]);
          smallest = ref::minNaN(smallest, x[at(k)]);
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
          case AxisKind::hardmax: {
            std::size_t first = 0;
            while (first + 1 < axis && x[at(first)] != largest) ++first;
            for (std::size_t k = 0; k < axis; ++k) y[at(k)] = std::isnan(largest) ? largest : k == first ? 1.0 : 0.0;
            break;
          }
          case AxisKind::layerNormalization: {
            const double mean = sum / static_cast<double>(axis), scale = inverseDeviation(mean);
            for (std::size_t k = 0; k < axis; ++k) y[at(k)] = (x[at(k)] - mean) * scale * (*in[1].values)[k] + (*in[2].values)[k];
            break;
          }
          case AxisKind::rmsNormalization: {
            double squares = 0;
            for (std::size_t k = 0; k < axis; ++k) squares += x[at(k)] * x[at(k)];
            const double scale = 1 / std::sqrt(squares / static_cast<double>(axis) + epsilon_);
            for (std::size_t k = 0; k < axis; ++k) y[at(k)] = x[at(k)] * scale * (*in[1].values)[k];
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
  bool residual_;
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

Dispatch axisDispatch(ProgramCache& programs, AxisKind kind, std::vector<ShaderDefine> defines, std::size_t lines, std::size_t axis, std::size_t inner,
                      float epsilon, const std::string& label) {
  // About 4 elements per invocation, 32 invocations at least (a warp on NVIDIA, half a wavefront on AMD).
  std::uint32_t lineGroup = 32;
  while (lineGroup < static_cast<std::uint32_t>(currentLimits().groupSize()) && std::uint64_t{lineGroup} * 4 < axis) lineGroup *= 2;
  defines.push_back(kindDefine(kind));
  defines.push_back({"LINE_GROUP", std::to_string(lineGroup)});
  Dispatch dispatch;
  dispatch.program = &programs.get("AxisReduce.glsl", defines);
  dispatch.label = label;
  dispatch.groups = {static_cast<std::uint32_t>(lines), 1, 1};
  dispatch.linear = true;
  dispatch.uniforms = {Uniform::u32(0, static_cast<std::uint32_t>(lines)), Uniform::u32(1, static_cast<std::uint32_t>(axis)),
                       Uniform::u32(2, static_cast<std::uint32_t>(inner)), Uniform::f32(3, epsilon)};
  return dispatch;
}
}  // namespace inference

std::shared_ptr<const Op> axisOp(AxisKind kind, std::uint32_t first, std::uint32_t last, bool keepDims, float epsilon) {
  return std::make_shared<inference::AxisOp>(kind, first, last, keepDims, epsilon);
}
std::shared_ptr<const Op> layerNormalizationResidualOp(std::uint32_t first, std::uint32_t last, float epsilon) {
  return std::make_shared<inference::AxisOp>(AxisKind::layerNormalization, first, last, true, epsilon, true);
}
std::shared_ptr<const Op> batchedMatMulOp() { return std::make_shared<inference::BatchedMatMulOp>(); }

}  // namespace glnet
