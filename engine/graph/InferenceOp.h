// The base of the operators of imported models: forward only, in inference graphs.
#pragma once

#include "gl/check.h"
#include "graph/Op.h"

namespace glnet {

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

}  // namespace glnet
