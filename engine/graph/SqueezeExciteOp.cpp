#include "gl/Limits.h"
#include "graph/InferenceOp.h"
#include "graph/InferenceOps.h"

#include <cmath>

namespace glnet {
namespace {

// SqueezeExcite.glsl's invocations per sum of one stage: the largest power of two that still gives each of the
// `sums` its own run in one round of the group, and no more than the sum is long.
std::uint32_t lanesFor(std::uint64_t sums, std::uint64_t length, std::uint32_t group) {
  std::uint32_t lanes = 1;
  while (lanes * 2 <= group && lanes * 2 * sums <= group && lanes * 2 <= length) lanes *= 2;
  return lanes;
}

int hiddenCode(const Pointwise& hidden) {
  return hidden.kind == PointwiseKind::relu ? 1 : hidden.kind == PointwiseKind::silu ? 2 : 0;
}

class SqueezeExciteOp : public InferenceOp {
 public:
  SqueezeExciteOp(Pointwise hidden, Pointwise gate) : hidden_(hidden), gate_(gate) {}
  std::string name() const override {
    return "squeeze-excite" + std::string(hidden_.kind != PointwiseKind::identity ? " " + hidden_.name() : "") +
           (gate_.kind != PointwiseKind::identity ? ", " + gate_.name() : "");
  }
  Shape outputShape(const std::vector<Shape>& in) const override {
    const bool fits = in.size() == 5 && in[0].size() >= 3 && in[1].size() == 4 && in[1][1] == in[0][1] && in[1][2] == 1 &&
                      in[1][3] == 1 && in[2] == Shape{in[1][0]} && in[3] == Shape{in[0][1], in[1][0], 1, 1} && in[4] == Shape{in[0][1]};
    if (!fits) {
      std::string got;
      for (const Shape& shape : in) got += (got.empty() ? "" : ", ") + describe(shape);
      throw Error(name() + " takes x [N, C, spatial...], W1 [R, C, 1, 1], b1 [R], W2 [C, R, 1, 1] and b2 [C]; got " + got);
    }
    return {in[0][0], in[0][1], 1, 1};
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    const Shape& x = in[0].shape;
    const std::uint32_t channels = x[1], reduced = in[1].shape[0];
    const auto plane = static_cast<std::uint32_t>(elementCount(x) / (std::uint64_t{x[0]} * channels));
    const std::uint32_t group = static_cast<std::uint32_t>(currentLimits().groupSize());
    const bool vec4 = plane % 4 == 0 && in[0].view.offset % 16 == 0;
    std::vector<ShaderDefine> defines = gate_.defines();
    defines.insert(defines.end(), {{"SE_CHANNELS", std::to_string(channels)}, {"SE_REDUCED", std::to_string(reduced)},
                                   {"SE_HIDDEN", std::to_string(hiddenCode(hidden_))},
                                   {"SE_POOL_LANES", std::to_string(lanesFor(channels, vec4 ? plane / 4 : plane, group))},
                                   {"SE_REDUCE_LANES", std::to_string(lanesFor(reduced, channels, group))},
                                   {"SE_EXPAND_LANES", std::to_string(lanesFor(channels, reduced, group))}});
    if (vec4) defines.push_back({"SE_VEC4", "1"});
    Dispatch dispatch;
    dispatch.program = &programs.get("SqueezeExcite.glsl", defines, {"Pointwise.glsl"});
    dispatch.label = name();
    dispatch.buffers = {{0, in[0].view, Access::read}, {1, in[1].view, Access::read}, {2, in[2].view, Access::read},
                        {3, out.view, Access::write},  {4, in[3].view, Access::read}, {5, in[4].view, Access::read}};
    dispatch.uniforms = {Uniform::u32(0, plane)};
    dispatch.groups = {x[0], 1, 1};
    plan.record(dispatch);
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const std::size_t images = in[0].shape[0], channels = in[0].shape[1], reduced = in[1].shape[0];
    const std::size_t plane = in[0].values->size() / (images * channels);
    const std::vector<double>&x = *in[0].values, &w1 = *in[1].values, &b1 = *in[2].values, &w2 = *in[3].values, &b2 = *in[4].values;
    std::vector<double> gate(images * channels);
    for (std::size_t n = 0; n < images; ++n) {
      std::vector<double> means(channels, 0.0), hidden(reduced);
      for (std::size_t c = 0; c < channels; ++c) {
        for (std::size_t j = 0; j < plane; ++j) means[c] += x[(n * channels + c) * plane + j];
        means[c] /= static_cast<double>(plane);
      }
      for (std::size_t r = 0; r < reduced; ++r) {
        double sum = b1[r];
        for (std::size_t c = 0; c < channels; ++c) sum += w1[r * channels + c] * means[c];
        hidden[r] = hidden_(sum);
      }
      for (std::size_t c = 0; c < channels; ++c) {
        double sum = b2[c];
        for (std::size_t r = 0; r < reduced; ++r) sum += w2[c * reduced + r] * hidden[r];
        gate[n * channels + c] = gate_(sum);
      }
    }
    return gate;
  }

 private:
  Pointwise hidden_, gate_;
};

}  // namespace

std::shared_ptr<const Op> squeezeExciteOp(Pointwise hidden, Pointwise gate) {
  GLNET_ASSERT(hiddenCode(hidden) != 0 || hidden.kind == PointwiseKind::identity, "a squeeze-excite block's hidden function is none, ReLU or SiLU");
  return std::make_shared<SqueezeExciteOp>(hidden, gate);
}

// A few images (one group each: more would leave most of the GPU to a few groups), the six buffers bound at once
// (OpenGL ES 3.1 guarantees 4), the means, the hidden values and a sum per invocation in shared memory.
bool squeezeExciteFits(const Shape& x, std::uint32_t reduced, Pointwise hidden, const Limits& limits) {
  return x.size() >= 3 && x[0] <= 4 && (hiddenCode(hidden) != 0 || hidden.kind == PointwiseKind::identity) &&
         limits.maxComputeStorageBlocks >= 6 && limits.maxStorageBufferBindings >= 6 &&
         (std::int64_t{x[1]} + reduced + limits.groupSize()) * 4 <= limits.maxSharedMemoryBytes;
}

}  // namespace glnet
