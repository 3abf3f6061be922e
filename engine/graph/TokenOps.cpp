// An image's pixels as a transformer's positions (Ops.h's tokensOp): [N, C, H, W] → [N, H·W, C], trainable.
#include "graph/Ops.h"

#include "base/check.h"
#include "ops/StridedCopy.h"

namespace glnet {
namespace {

class Tokens : public Op {
 public:
  std::string name() const override { return "tokens"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1 || in[0].size() != 4) throw Error(name() + " takes [N, C, H, W], not " + (in.empty() ? "nothing" : describe(in[0])));
    return {in[0][0], in[0][2] * in[0][3], in[0][1]};
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    plan.record(regionCopy(programs, name(), in[0].view, out.view, copy(in[0].shape, false)));
  }
  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor&, const GpuTensor& dOut,
                const std::vector<std::optional<GradientTarget>>& targets) const override {
    if (!targets[0]) return;
    plan.record(regionCopy(programs, name() + " gradient", dOut.view, targets[0]->view, copy(in[0].shape, true), targets[0]->accumulate));
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const auto [n, c, pixels] = sizes(in[0].shape);
    std::vector<double> y(in[0].values->size());
    for (std::size_t b = 0; b < n; ++b) {
      for (std::size_t k = 0; k < c; ++k) {
        for (std::size_t p = 0; p < pixels; ++p) y[(b * pixels + p) * c + k] = (*in[0].values)[(b * c + k) * pixels + p];
      }
    }
    return y;
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>&,
                                                     const std::vector<double>& dy) const override {
    const auto [n, c, pixels] = sizes(in[0].shape);
    std::vector<double> dx(dy.size());
    for (std::size_t b = 0; b < n; ++b) {
      for (std::size_t k = 0; k < c; ++k) {
        for (std::size_t p = 0; p < pixels; ++p) dx[(b * c + k) * pixels + p] = dy[(b * pixels + p) * c + k];
      }
    }
    return {dx};
  }

 private:
  static std::array<std::uint32_t, 3> sizes(const Shape& x) { return {x[0], x[1], x[2] * x[3]}; }
  // The copy over [N, C, pixels] from the image layout to the token layout, or back (`toImages`).
  static RegionCopy copy(const Shape& x, bool toImages) {
    const auto [n, c, pixels] = sizes(x);
    RegionCopy region;
    region.region = {n, c, pixels};
    const std::vector<std::int64_t> images{std::int64_t{c} * pixels, pixels, 1}, tokens{std::int64_t{c} * pixels, 1, c};
    region.xStrides = toImages ? tokens : images;
    region.yStrides = toImages ? images : tokens;
    return region;
  }
};

}  // namespace

std::shared_ptr<const Op> tokensOp() { return std::make_shared<Tokens>(); }

}  // namespace glnet
