#include "base/check.h"
#include "graph/Ops.h"
#include "ops/Elementwise.h"
#include "ref/Reference.h"

namespace glnet {
namespace {

std::uint32_t count(const Shape& shape) { return static_cast<std::uint32_t>(elementCount(shape)); }

class ActivationOp : public Op {
 public:
  explicit ActivationOp(Activation activation) : activation_(activation) {}
  std::string name() const override { return activationName(activation_); }
  std::vector<std::size_t> inPlaceInputs() const override { return {0}; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1) throw Error(name() + " takes one input");
    return in[0];
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    plan.record(ElementwiseOp(programs, ElementwiseKind::activation, activation_)(in[0].view, in[0].view, out.view,
                                                                                  count(in[0].shape), false));
  }
  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out,
                const GpuTensor& dOut, const std::vector<std::optional<GradientTarget>>& targets) const override {
    if (!targets[0]) return;
    plan.record(ElementwiseOp(programs, ElementwiseKind::activationGradient, activation_)(
        dOut.view, out.view, targets[0]->view, count(in[0].shape), targets[0]->accumulate));
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    std::vector<double> y(*in[0].values);
    for (double& value : y) value = ref::activate(activation_, value);
    return y;
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>&, const std::vector<double>& y,
                                                     const std::vector<double>& dy) const override {
    std::vector<double> dx(dy.size());
    for (std::size_t i = 0; i < dx.size(); ++i) dx[i] = dy[i] * ref::activationDerivative(activation_, y[i]);
    return {dx};
  }

 private:
  Activation activation_;
};

// Add and multiply of two tensors of one shape; an add may end in an activation (ResNet's ReLU after the identity is
// added), which then needs no pass of its own either way.
class Binary : public Op {
 public:
  explicit Binary(ElementwiseKind kind, Activation activation = Activation::none) : kind_(kind), activation_(activation) {
    GLNET_ASSERT(kind == ElementwiseKind::add || activation == Activation::none, "only an add fuses an activation");
  }
  std::string name() const override {
    const std::string operation = kind_ == ElementwiseKind::add ? "add" : "multiply";
    return activation_ == Activation::none ? operation : operation + " + " + activationName(activation_);
  }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 2 || in[0] != in[1]) {
      throw Error(name() + " takes two tensors of one shape; got " + describe(in.at(0)) + " and " +
                  describe(in.size() > 1 ? in[1] : Shape{}));
    }
    return in[0];
  }
  std::vector<std::size_t> inPlaceInputs() const override { return {0, 1}; }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    plan.record(ElementwiseOp(programs, kind_, activation_)(in[0].view, in[1].view, out.view, count(in[0].shape), false));
  }
  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out,
                const GpuTensor& dOut, const std::vector<std::optional<GradientTarget>>& targets) const override {
    const bool activated = kind_ == ElementwiseKind::add && activation_ != Activation::none;
    // d act(a + b)/da = d act(a + b)/db = act'(y): computed once for both, unless they are one gradient (an add of a
    // tensor to itself).
    if (activated && targets[0] && targets[1] && disjoint(targets[0]->view, targets[1]->view)) {
      const ElementwiseOp op(programs, ElementwiseKind::activationGradient, activation_);
      plan.record(op.twoResults(dOut.view, out.view, targets[0]->view, targets[0]->accumulate, targets[1]->view, targets[1]->accumulate,
                                count(in[0].shape)));
      return;
    }
    for (std::size_t i = 0; i < 2; ++i) {
      if (!targets[i]) continue;
      // d act(a + b)/da = act'(y); d(a·b)/da = b.
      if (activated) {
        const ElementwiseOp op(programs, ElementwiseKind::activationGradient, activation_);
        plan.record(op(dOut.view, out.view, targets[i]->view, count(in[i].shape), targets[i]->accumulate));
        continue;
      }
      const ElementwiseOp op(programs, kind_ == ElementwiseKind::add ? ElementwiseKind::copy : ElementwiseKind::multiply);
      plan.record(op(dOut.view, in[1 - i].view, targets[i]->view, count(in[i].shape), targets[i]->accumulate));
    }
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    std::vector<double> y(in[0].values->size());
    for (std::size_t i = 0; i < y.size(); ++i) {
      y[i] = kind_ == ElementwiseKind::add ? ref::activate(activation_, (*in[0].values)[i] + (*in[1].values)[i])
                                           : (*in[0].values)[i] * (*in[1].values)[i];
    }
    return y;
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>& y,
                                                     const std::vector<double>& dy) const override {
    if (kind_ == ElementwiseKind::add) {
      std::vector<double> dz(dy.size());
      for (std::size_t i = 0; i < dz.size(); ++i) dz[i] = dy[i] * ref::activationDerivative(activation_, y[i]);
      return {dz, dz};
    }
    std::vector<double> da(dy.size()), db(dy.size());
    for (std::size_t i = 0; i < dy.size(); ++i) {
      da[i] = dy[i] * (*in[1].values)[i];
      db[i] = dy[i] * (*in[0].values)[i];
    }
    return {da, db};
  }

 private:
  ElementwiseKind kind_;
  Activation activation_;
};

}  // namespace

std::shared_ptr<const Op> activationOp(Activation activation) { return std::make_shared<ActivationOp>(activation); }
std::shared_ptr<const Op> addOp(Activation activation) { return std::make_shared<Binary>(ElementwiseKind::add, activation); }
std::shared_ptr<const Op> multiplyOp() { return std::make_shared<Binary>(ElementwiseKind::multiply); }

}  // namespace glnet
