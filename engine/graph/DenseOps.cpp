#include "base/check.h"
#include "graph/Ops.h"
#include "ops/Dense.h"
#include "ops/Elementwise.h"
#include "ref/Reference.h"

namespace glnet {

std::size_t elementCount(const Shape& shape) {
  std::size_t count = 1;
  for (const std::uint32_t dimension : shape) count *= dimension;
  return count;
}

std::string describe(const Shape& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

namespace {

std::uint32_t rowsOf(const Shape& shape) { return shape.empty() ? 1 : shape[0]; }
std::uint32_t columnsOf(const Shape& shape) {
  return shape.empty() ? 1 : static_cast<std::uint32_t>(elementCount(shape) / shape[0]);
}

// Dense with or without bias: inputs X [rows, in], W [out, in] and, with bias, b [out]; `after` (an imported model's
// function) applied after the activation, and `residual` (a fourth input R [rows, out] added before it), inference only.
class Dense : public Op {
 public:
  Dense(Activation activation, bool hasBias, Pointwise after = {}, bool residual = false)
      : activation_(activation), hasBias_(hasBias), after_(after), residual_(residual) {}

  std::string name() const override {
    if (!hasBias_) return "matmul";
    return std::string("dense ") + (residual_ ? "+ residual " : "") +
           (after_.kind != PointwiseKind::identity ? after_.name() : activationName(activation_));
  }

  Shape outputShape(const std::vector<Shape>& in) const override {
    const bool fits = in.size() == (hasBias_ ? 3u : 2u) + (residual_ ? 1u : 0u) && in[0].size() == 2 && in[1].size() == 2 &&
                      in[0][1] == in[1][1] && (!hasBias_ || (in[2].size() == 1 && in[2][0] == in[1][0])) &&
                      (!residual_ || in.back() == Shape{in[0][0], in[1][0]});
    if (!fits) {
      std::string shapes;
      for (const Shape& shape : in) shapes += " " + describe(shape);
      throw Error(name() + " takes X [rows, in], W [out, in]" + (hasBias_ ? ", b [out]" : "") + (residual_ ? ", R [rows, out]" : "") +
                  "; got" + shapes);
    }
    return {in[0][0], in[1][0]};
  }

  // The forward pass's transposed operands or split-K partial sums; later, in two parts, dX's transposed dZ (a
  // large layer) and dW's split-K partial sums (long batch, small layer): apart, so that dX and dW may run at once.
  std::size_t workspaceBytes(const std::vector<Shape>& in) const override {
    const DenseShape s{in[0][0], in[0][1], in[1][0]};
    return std::max(DenseOp::forwardWorkspaceBytes(s, hasBias_),
                    DenseOp::inputGradientWorkspaceBytes(s) + DenseOp::weightGradientSplit(s).workspaceBytes(s.outputs, s.inputs));
  }
  std::size_t inferenceWorkspaceBytes(const std::vector<Shape>& in) const override {
    return DenseOp::forwardWorkspaceBytes({in[0][0], in[0][1], in[1][0]}, hasBias_);
  }
  // Every path adds R[row, column] where it stores Y[row, column]: the GEMM's epilogue, DenseFewRows, SplitSum.
  std::vector<std::size_t> inPlaceInputs() const override {
    if (!residual_) return {};
    return {hasBias_ ? 3u : 2u};
  }

  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    const DenseOp op(programs, activation_, hasBias_, after_, residual_);
    plan.record(op.forward(in[0].view, in[1].view, hasBias_ ? in[2].view : in[1].view, out.view, shape(in), out.workspace,
                           residual_ ? &in.back().view : nullptr));
  }

  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out,
                const GpuTensor& dOut, const std::vector<std::optional<GradientTarget>>& targets) const override {
    GLNET_ASSERT(after_.kind == PointwiseKind::identity && !residual_, "a dense layer with a fused function or residual runs in forward-only graphs");
    const DenseShape s = shape(in);
    std::optional<BufferView> weightWorkspace = out.workspace;
    // A large layer: dY becomes dZ in place (the output's gradient is read by this op alone) beside dZᵀ in the
    // workspace, dX reads dZᵀ, and dW and db read dZ as the gradients of a layer with no activation would.
    const std::size_t inputBytes = DenseOp::inputGradientWorkspaceBytes(s);
    const bool transposed = targets[0] && out.workspace && inputBytes;
    if (transposed) {
      const BufferView& whole = *out.workspace;
      const BufferView dzT(*whole.buffer, whole.offset, inputBytes);
      weightWorkspace = BufferView(*whole.buffer, whole.offset + inputBytes, whole.room() - inputBytes);
      const DenseOp op(programs, activation_, hasBias_);
      plan.record(op.preActivationGradient(dOut.view, out.view, dzT, s));
      plan.record(op.inputGradientOnTransposed(dzT, in[1].view, targets[0]->view, s, targets[0]->accumulate));
    }
    const DenseOp op(programs, transposed ? Activation::none : activation_, hasBias_);
    // With dZ in place, Y is read for the derivative of Activation::none, which is 1: no value of it counts.
    const BufferView& y = transposed ? dOut.view : out.view;
    if (targets[0] && !transposed) plan.record(op.inputGradient(dOut.view, y, in[1].view, targets[0]->view, s, targets[0]->accumulate));
    if (targets[1]) plan.record(op.weightGradient(dOut.view, y, in[0].view, targets[1]->view, s, targets[1]->accumulate, weightWorkspace));
    if (hasBias_ && targets[2]) plan.record(op.biasGradient(dOut.view, y, targets[2]->view, s, targets[2]->accumulate));
  }

  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const std::size_t rows = in[0].shape[0], inputs = in[0].shape[1], outputs = in[1].shape[0];
    std::vector<double> y(rows * outputs);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t o = 0; o < outputs; ++o) {
        double sum = (hasBias_ ? (*in[2].values)[o] : 0.0) + (residual_ ? (*in.back().values)[r * outputs + o] : 0.0);
        for (std::size_t i = 0; i < inputs; ++i) sum += (*in[0].values)[r * inputs + i] * (*in[1].values)[o * inputs + i];
        y[r * outputs + o] = after_(ref::activate(activation_, sum));
      }
    }
    return y;
  }

  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>& y,
                                                     const std::vector<double>& dy) const override {
    const std::size_t rows = in[0].shape[0], inputs = in[0].shape[1], outputs = in[1].shape[0];
    const std::vector<double>& x = *in[0].values;
    const std::vector<double>& w = *in[1].values;
    std::vector<double> dz(rows * outputs);
    for (std::size_t i = 0; i < dz.size(); ++i) dz[i] = dy[i] * ref::activationDerivative(activation_, y[i]);
    std::vector<std::vector<double>> grads{std::vector<double>(rows * inputs, 0.0), std::vector<double>(outputs * inputs, 0.0)};
    if (hasBias_) grads.emplace_back(outputs, 0.0);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t o = 0; o < outputs; ++o) {
        const double g = dz[r * outputs + o];
        for (std::size_t i = 0; i < inputs; ++i) {
          grads[0][r * inputs + i] += g * w[o * inputs + i];
          grads[1][o * inputs + i] += g * x[r * inputs + i];
        }
        if (hasBias_) grads[2][o] += g;
      }
    }
    return grads;
  }

 private:
  static DenseShape shape(const std::vector<GpuTensor>& in) { return {in[0].shape[0], in[0].shape[1], in[1].shape[0]}; }
  Activation activation_;
  bool hasBias_;
  Pointwise after_;
  bool residual_;
};

class BiasAdd : public Op {
 public:
  std::string name() const override { return "bias add"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 2 || in[0].empty() || in[1].size() != 1 || in[1][0] != columnsOf(in[0])) {
      throw Error("bias add takes X [rows, columns] and b [columns]; got " + describe(in.at(0)) + " and " +
                  describe(in.size() > 1 ? in[1] : Shape{}));
    }
    return in[0];
  }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    plan.record(ElementwiseOp(programs, ElementwiseKind::biasAdd)(in[0].view, in[1].view, out.view,
                                                                  static_cast<std::uint32_t>(elementCount(in[0].shape)),
                                                                  false, columnsOf(in[0].shape)));
  }
  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out,
                const GpuTensor& dOut, const std::vector<std::optional<GradientTarget>>& targets) const override {
    if (targets[0]) {
      plan.record(ElementwiseOp(programs, ElementwiseKind::copy)(dOut.view, dOut.view, targets[0]->view,
                                                                 static_cast<std::uint32_t>(elementCount(in[0].shape)),
                                                                 targets[0]->accumulate));
    }
    if (targets[1]) {
      const DenseShape s{rowsOf(in[0].shape), 0, columnsOf(in[0].shape)};
      plan.record(DenseOp(programs, Activation::none).biasGradient(dOut.view, out.view, targets[1]->view, s, targets[1]->accumulate));
    }
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const std::size_t columns = columnsOf(in[0].shape);
    std::vector<double> y(*in[0].values);
    for (std::size_t i = 0; i < y.size(); ++i) y[i] += (*in[1].values)[i % columns];
    return y;
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>&,
                                                     const std::vector<double>& dy) const override {
    const std::size_t columns = columnsOf(in[0].shape);
    std::vector<double> db(columns, 0.0);
    for (std::size_t i = 0; i < dy.size(); ++i) db[i % columns] += dy[i];
    return {dy, db};
  }
};

}  // namespace

std::shared_ptr<const Op> denseOp(Activation activation, Pointwise after) { return std::make_shared<Dense>(activation, true, after); }
std::shared_ptr<const Op> denseResidualOp(Pointwise after) { return std::make_shared<Dense>(Activation::none, true, after, true); }
std::shared_ptr<const Op> matMulOp() { return std::make_shared<Dense>(Activation::none, false); }
std::shared_ptr<const Op> biasAddOp() { return std::make_shared<BiasAdd>(); }

}  // namespace glnet
