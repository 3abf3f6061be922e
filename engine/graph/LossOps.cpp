#include "base/check.h"
#include "graph/Ops.h"
#include "ops/Elementwise.h"
#include "ops/Softmax.h"

#include <cmath>

namespace glnet {
namespace {

// Inputs: logits [rows, classes] and labels [rows] (class indices); output [rows].
void checkClassification(const std::string& name, const std::vector<Shape>& in) {
  if (in.size() != 2 || in[0].size() != 2 || in[1].size() != 1 || in[1][0] != in[0][0]) {
    throw Error(name + " takes logits [rows, classes] and labels [rows]; got " + describe(in.at(0)) + " and " +
                describe(in.size() > 1 ? in[1] : Shape{}));
  }
}

std::vector<double> softmaxRow(const std::vector<double>& z, std::size_t row, std::size_t classes) {
  double largest = z[row * classes];
  for (std::size_t c = 1; c < classes; ++c) largest = std::max(largest, z[row * classes + c]);
  std::vector<double> p(classes);
  double total = 0;
  for (std::size_t c = 0; c < classes; ++c) total += p[c] = std::exp(z[row * classes + c] - largest);
  for (double& value : p) value /= total;
  return p;
}

// With label smoothing ε the target is (1 − ε)·onehot + ε/classes, as torch.nn.CrossEntropyLoss(label_smoothing=ε).
class SoftmaxCrossEntropy : public Op {
 public:
  explicit SoftmaxCrossEntropy(float smoothing) : smoothing_(smoothing) {}
  std::string name() const override { return "softmax cross-entropy"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    checkClassification(name(), in);
    return {in[0][0]};
  }
  bool isIndexInput(std::size_t input) const override { return input == 1; }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    plan.record(SoftmaxOp(programs).crossEntropy(in[0].view, in[1].view, out.view, in[0].shape[0], in[0].shape[1], smoothing_));
  }
  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor&,
                const GpuTensor& dOut, const std::vector<std::optional<GradientTarget>>& targets) const override {
    if (!targets[0]) return;
    plan.record(SoftmaxOp(programs).crossEntropyGradient(in[0].view, in[1].view, dOut.view, targets[0]->view,
                                                         in[0].shape[0], in[0].shape[1], targets[0]->accumulate, smoothing_));
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const std::size_t rows = in[0].shape[0], classes = in[0].shape[1];
    std::vector<double> loss(rows);
    for (std::size_t r = 0; r < rows; ++r) {
      const std::vector<double> p = softmaxRow(*in[0].values, r, classes);
      const auto label = static_cast<std::size_t>((*in[1].values)[r]);
      for (std::size_t c = 0; c < classes; ++c) loss[r] -= target(c, label, classes) * std::log(p[c]);
    }
    return loss;
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>&,
                                                     const std::vector<double>& dLoss) const override {
    const std::size_t rows = in[0].shape[0], classes = in[0].shape[1];
    std::vector<double> dz(rows * classes);
    for (std::size_t r = 0; r < rows; ++r) {
      const std::vector<double> p = softmaxRow(*in[0].values, r, classes);
      const auto label = static_cast<std::size_t>((*in[1].values)[r]);
      for (std::size_t c = 0; c < classes; ++c) dz[r * classes + c] = dLoss[r] * (p[c] - target(c, label, classes));
    }
    return {dz, {}};
  }

 private:
  double target(std::size_t c, std::size_t label, std::size_t classes) const {
    return (c == label ? 1.0 - smoothing_ : 0.0) + static_cast<double>(smoothing_) / static_cast<double>(classes);
  }
  float smoothing_;
};

class MeanSquaredError : public Op {
 public:
  std::string name() const override { return "mean squared error"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 2 || in[0].size() != 2 || in[0] != in[1]) {
      throw Error(name() + " takes predictions and targets of one shape [rows, columns]; got " + describe(in.at(0)) +
                  " and " + describe(in.size() > 1 ? in[1] : Shape{}));
    }
    return {in[0][0]};
  }
  bool passesGradient(std::size_t input) const override { return input == 0; }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    plan.record(MeanSquaredErrorOp(programs).loss(in[0].view, in[1].view, out.view, in[0].shape[0], in[0].shape[1]));
  }
  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor&,
                const GpuTensor& dOut, const std::vector<std::optional<GradientTarget>>& targets) const override {
    if (!targets[0]) return;
    plan.record(MeanSquaredErrorOp(programs).gradient(in[0].view, in[1].view, dOut.view, targets[0]->view, in[0].shape[0],
                                                      in[0].shape[1], targets[0]->accumulate));
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const std::size_t rows = in[0].shape[0], columns = in[0].shape[1];
    std::vector<double> loss(rows, 0.0);
    for (std::size_t i = 0; i < rows * columns; ++i) {
      const double d = (*in[0].values)[i] - (*in[1].values)[i];
      loss[i / columns] += d * d / static_cast<double>(columns);
    }
    return loss;
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>&,
                                                     const std::vector<double>& dLoss) const override {
    const std::size_t columns = in[0].shape[1];
    std::vector<double> dy(in[0].values->size());
    for (std::size_t i = 0; i < dy.size(); ++i) {
      dy[i] = dLoss[i / columns] * 2.0 * ((*in[0].values)[i] - (*in[1].values)[i]) / static_cast<double>(columns);
    }
    return {dy, {}};
  }
};

class Correct : public Op {
 public:
  std::string name() const override { return "correct"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    checkClassification(name(), in);
    return {in[0][0]};
  }
  bool isIndexInput(std::size_t input) const override { return input == 1; }
  bool differentiable() const override { return false; }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    plan.record(SoftmaxOp(programs).correct(in[0].view, in[1].view, out.view, in[0].shape[0], in[0].shape[1]));
  }
  void backward(ProgramCache&, Plan&, const std::vector<GpuTensor>&, const GpuTensor&, const GpuTensor&,
                const std::vector<std::optional<GradientTarget>>&) const override {
    GLNET_ASSERT(false, "a metric has no gradient");
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const std::size_t rows = in[0].shape[0], classes = in[0].shape[1];
    std::vector<double> correct(rows);
    for (std::size_t r = 0; r < rows; ++r) {
      std::size_t best = 0;
      for (std::size_t c = 1; c < classes; ++c) {
        if ((*in[0].values)[r * classes + c] > (*in[0].values)[r * classes + best]) best = c;
      }
      correct[r] = static_cast<double>(best) == (*in[1].values)[r] ? 1.0 : 0.0;
    }
    return correct;
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>&, const std::vector<double>&,
                                                     const std::vector<double>&) const override {
    GLNET_ASSERT(false, "a metric has no gradient");
    return {};
  }
};

// Row-wise softmax of [rows, columns], for inference graphs (an imported model's last layer). Graphs that train
// end in the fused softmax cross-entropy instead, so this op passes no gradient.
class Softmax : public Op {
 public:
  std::string name() const override { return "softmax"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1 || in[0].size() != 2 || in[0][1] == 0) throw Error(name() + " takes one [rows, columns] tensor; got " + describe(in.empty() ? Shape{} : in[0]));
    return in[0];
  }
  bool differentiable() const override { return false; }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    plan.record(SoftmaxOp(programs).softmax(in[0].view, out.view, in[0].shape[0], in[0].shape[1]));
  }
  void backward(ProgramCache&, Plan&, const std::vector<GpuTensor>&, const GpuTensor&, const GpuTensor&,
                const std::vector<std::optional<GradientTarget>>&) const override {
    GLNET_ASSERT(false, "softmax is for inference graphs; training uses softmax cross-entropy");
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const std::size_t rows = in[0].shape[0], columns = in[0].shape[1];
    std::vector<double> out(rows * columns);
    for (std::size_t r = 0; r < rows; ++r) {
      const std::vector<double> p = softmaxRow(*in[0].values, r, columns);
      std::copy(p.begin(), p.end(), out.begin() + static_cast<std::ptrdiff_t>(r * columns));
    }
    return out;
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>&, const std::vector<double>&,
                                                     const std::vector<double>&) const override {
    GLNET_ASSERT(false, "softmax is for inference graphs; training uses softmax cross-entropy");
    return {};
  }
};

}  // namespace

std::shared_ptr<const Op> softmaxOp() { return std::make_shared<Softmax>(); }
std::shared_ptr<const Op> softmaxCrossEntropyOp(float smoothing) { return std::make_shared<SoftmaxCrossEntropy>(smoothing); }
std::shared_ptr<const Op> meanSquaredErrorOp() { return std::make_shared<MeanSquaredError>(); }
std::shared_ptr<const Op> correctOp() { return std::make_shared<Correct>(); }

}  // namespace glnet
