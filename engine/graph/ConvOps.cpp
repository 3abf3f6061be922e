#include "base/check.h"
#include "graph/Ops.h"
#include "ops/Conv.h"
#include "ops/Dense.h"
#include "ops/Winograd.h"
#include "ref/Reference.h"

namespace glnet {
namespace {

class Conv2d : public Op {
 public:
  // `residual`: a fourth input shaped as the output is added before the activation; `inputScaled`: a last input
  // [N, C] or [N, C, 1, 1] scales X's channels per image (a squeeze-excite gate; 1x1 kernels without padding).
  // Both in forward-only graphs.
  Conv2d(Activation activation, std::uint32_t padding, std::uint32_t stride, Pointwise after = {}, bool residual = false,
         bool inputScaled = false, std::optional<std::uint32_t> widthPadding = std::nullopt)
      : activation_(activation), padding_(padding), widthPadding_(widthPadding == padding ? std::nullopt : widthPadding), stride_(stride),
        after_(after), residual_(residual), inputScaled_(inputScaled) {}
  std::string name() const override {
    return std::string("conv2d ") + (inputScaled_ ? "of scaled input " : "") + (residual_ ? "+ residual " : "") +
           (after_.kind != PointwiseKind::identity ? after_.name() : activationName(activation_)) +
           (stride_ > 1 ? " stride " + std::to_string(stride_) : "");
  }

  Shape outputShape(const std::vector<Shape>& in) const override {
    const std::size_t inputs = 3u + (residual_ ? 1u : 0u) + (inputScaled_ ? 1u : 0u);
    const bool fits = in.size() == inputs && in[0].size() == 4 && in[1].size() == 4 && in[2].size() == 1 && in[1][1] == in[0][1] &&
                      in[2][0] == in[1][0] && in[0][2] + 2 * padding_ >= in[1][2] && in[0][3] + 2 * widthPadding_.value_or(padding_) >= in[1][3];
    const ConvShape s = fits ? shape(in) : ConvShape{};
    const Shape out{s.batch, s.outChannels, fits ? s.outHeight() : 0, fits ? s.outWidth() : 0};
    const bool scaleFits = !inputScaled_ || (fits && s.kernelHeight == 1 && s.kernelWidth == 1 && padding_ == 0 && s.leftPadding() == 0 &&
                                             (in.back() == Shape{s.batch, s.channels} || in.back() == Shape{s.batch, s.channels, 1, 1}));
    if (!fits || (residual_ && in[3] != out) || !scaleFits) {
      std::string shapes;
      for (const Shape& shape : in) shapes += " " + describe(shape);
      throw Error(name() + " takes X [N, C, H, W], W [OC, C, KH, KW], b [OC]" + (residual_ ? " and a residual shaped as its output" : "") +
                  (inputScaled_ ? " and X's scale [N, C, 1, 1] (a 1x1 kernel without padding)" : "") +
                  " with the kernel inside the padded input; got" + shapes);
    }
    return out;
  }

  // The forward pass's transposed weights (and its split-K partials where it has them); later, in two parts, dX's rearranged weights with its split-K partial
  // sums (few groups at small batches), then dW's partials over a long batch of pixels: apart, so that the GPU may
  // run dX and dW at once (a shared range would put a barrier between them: +0.09 ms per step for the MNIST CNN
  // at batch 100 on the H100).
  std::size_t workspaceBytes(const std::vector<Shape>& in) const override {
    const ConvShape s = shape(in);
    return std::max(ConvOp::forwardWorkspaceBytes(s),
                    ConvOp::inputGradientWorkspaceBytes(s) + ConvOp::weightGradientWorkspaceBytes(s));
  }
  std::size_t inferenceWorkspaceBytes(const std::vector<Shape>& in) const override { return ConvOp::forwardWorkspaceBytes(shape(in)); }
  // Each path (direct, split sum, Winograd's output transform) adds the residual's element where it stores Y's.
  std::vector<std::size_t> inPlaceInputs() const override { return residual_ ? std::vector<std::size_t>{3} : std::vector<std::size_t>{}; }

  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    recordForward(programs, plan, in, out, false, out.prepared ? Part::gemm : Part::both);
  }
  // An inference graph prepares the weights once: transposed for the implicit GEMM, or transformed for Winograd's
  // F(m x m, 3x3) where WinogradConvOp::chosen says so, whose forward pass then also takes scratch memory.
  std::size_t preparedInputs() const override { return 2; }
  std::size_t preparedBytes(const std::vector<Shape>& in) const override {
    const ConvShape s = shape(in);
    return WinogradConvOp::chosen(s) ? WinogradConvOp::transformedWeightBytes(s) : ConvOp::forwardWorkspaceBytes(s);
  }
  std::size_t preparedScratchBytes(const std::vector<Shape>& in) const override {
    const ConvShape s = shape(in);
    return WinogradConvOp::chosen(s) ? WinogradConvOp::scratchBytes(s) : 0;
  }
  void prepare(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    recordForward(programs, plan, in, out, false, Part::transpose);
  }

  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out,
                const GpuTensor& dOut, const std::vector<std::optional<GradientTarget>>& targets) const override {
    if (!targets[0] && !targets[1] && !targets[2]) return;
    GLNET_ASSERT(after_.kind == PointwiseKind::identity && !residual_ && !inputScaled_,
                 "a convolution with a fused function, residual or input scale runs in forward-only graphs");
    const ConvShape s = shape(shapes(in));
    GLNET_ASSERT(out.workspace.has_value(), "a convolution's gradients need its workspace");
    // dY becomes dZ = dY ⊙ act'(Y) first (the output's gradient is read by this op alone), which the gradients read.
    const ConvOp op(programs, activation_);
    if (const std::optional<Dispatch> toPreActivation = op.activationGradientInPlace(dOut.view, out.view, s)) plan.record(*toPreActivation);
    const BufferView& workspace = *out.workspace;
    const BufferView& dz = dOut.view;
    const std::size_t inputBytes = ConvOp::inputGradientWorkspaceBytes(s);
    const BufferView weightWorkspace(*workspace.buffer, workspace.offset + inputBytes, ConvOp::weightGradientWorkspaceBytes(s));
    if (targets[0]) {
      plan.record(op.inputGradient(dz, in[1].view, targets[0]->view, s, targets[0]->accumulate,
                                   BufferView(*workspace.buffer, workspace.offset, inputBytes)));
    }
    // dW and db together when both are written or both added (then db may ride along dW's GEMM).
    const bool together = targets[1] && targets[2] && targets[1]->accumulate == targets[2]->accumulate;
    if (targets[1]) {
      plan.record(op.weightGradient(dz, in[0].view, targets[1]->view, s, targets[1]->accumulate, weightWorkspace,
                                    together ? std::optional<BufferView>(targets[2]->view) : std::nullopt));
    }
    if (targets[2] && !together) plan.record(op.biasGradient(dz, targets[2]->view, s, targets[2]->accumulate));
  }

  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const ConvShape s = shape(shapes(in));
    const auto& x = *in[0].values;
    const auto& w = *in[1].values;
    std::vector<double> y(std::size_t{s.batch} * s.outChannels * s.outHeight() * s.outWidth());
    std::size_t index = 0;
    for (std::uint32_t n = 0; n < s.batch; ++n) {
      for (std::uint32_t oc = 0; oc < s.outChannels; ++oc) {
        for (std::uint32_t oh = 0; oh < s.outHeight(); ++oh) {
          for (std::uint32_t ow = 0; ow < s.outWidth(); ++ow) {
            double sum = (*in[2].values)[oc] + (residual_ ? (*in[3].values)[index] : 0.0);
            forWindow(s, n, oh, ow, [&](std::size_t xIndex, std::uint32_t c, std::uint32_t kh, std::uint32_t kw) {
              const double scale = inputScaled_ ? (*in.back().values)[std::size_t{n} * s.channels + c] : 1.0;
              sum += x[xIndex] * scale * w[((std::size_t{oc} * s.channels + c) * s.kernelHeight + kh) * s.kernelWidth + kw];
            });
            y[index++] = after_(ref::activate(activation_, sum));
          }
        }
      }
    }
    return y;
  }

  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>& y,
                                                     const std::vector<double>& dy) const override {
    const ConvShape s = shape(shapes(in));
    const auto& x = *in[0].values;
    const auto& w = *in[1].values;
    std::vector<std::vector<double>> grads{std::vector<double>(x.size(), 0.0), std::vector<double>(w.size(), 0.0),
                                           std::vector<double>(s.outChannels, 0.0)};
    std::size_t index = 0;
    for (std::uint32_t n = 0; n < s.batch; ++n) {
      for (std::uint32_t oc = 0; oc < s.outChannels; ++oc) {
        for (std::uint32_t oh = 0; oh < s.outHeight(); ++oh) {
          for (std::uint32_t ow = 0; ow < s.outWidth(); ++ow, ++index) {
            const double dz = dy[index] * ref::activationDerivative(activation_, y[index]);
            grads[2][oc] += dz;
            forWindow(s, n, oh, ow, [&](std::size_t xIndex, std::uint32_t c, std::uint32_t kh, std::uint32_t kw) {
              const std::size_t wIndex = ((std::size_t{oc} * s.channels + c) * s.kernelHeight + kh) * s.kernelWidth + kw;
              grads[0][xIndex] += dz * w[wIndex];
              grads[1][wIndex] += dz * x[xIndex];
            });
          }
        }
      }
    }
    return grads;
  }

 protected:
  // ConvOp's forward pass is the weights' transpose into the workspace, then the GEMM (and the sum of its split).
  enum class Part { both, transpose, gemm };
  void recordForward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out, bool pooled, Part part) const {
    GLNET_ASSERT(out.workspace.has_value(), "a convolution needs its workspace for the transposed weights");
    const ConvShape s = shape(shapes(in));
    if (!pooled && runsAsDense(s)) {
      if (part != Part::transpose) {
        plan.record(DenseOp::fewRowsForward(programs, activation_, true, after_, in[0].view, in[1].view, in[2].view, out.view,
                                            {s.batch, s.channels, s.outChannels}));
      }
      return;
    }
    if (part != Part::both && !inputScaled_ && WinogradConvOp::chosen(s)) {
      const WinogradConvOp winograd(programs, activation_, after_, residual_);
      if (part == Part::transpose) {
        plan.record(winograd.transformWeights(in[1].view, *out.workspace, s));
      } else {
        GLNET_ASSERT(out.scratch.has_value(), "Winograd's convolution needs its scratch memory");
        plan.record(winograd.forward(in[0].view, *out.workspace, in[2].view, out.view, s, *out.scratch, pooled,
                                     residual_ ? &in[3].view : nullptr));
      }
      return;
    }
    const std::vector<Dispatch> dispatches =
        ConvOp(programs, activation_, after_, residual_, inputScaled_)
            .forward(in[0].view, in[1].view, in[2].view, out.view, s, *out.workspace, pooled, residual_ ? &in[3].view : nullptr,
                     inputScaled_ ? &in.back().view : nullptr);
    if (part != Part::gemm) plan.record(dispatches[0]);
    if (part != Part::transpose) plan.record(std::vector<Dispatch>(dispatches.begin() + 1, dispatches.end()));
  }
  // A 1x1 convolution of 1x1 planes, [N, C, 1, 1] -> [N, OC, 1, 1] with weights [OC, C, 1, 1], is a dense layer on the
  // same memory. At a batch of 1 to 4 (a squeeze-excite block's two layers) DenseOp's few-rows kernel reads the
  // weights once, in one dispatch; the implicit GEMM would fill one row of a 64x64 tile and split its sum in two.
  bool runsAsDense(const ConvShape& s) const {
    return !residual_ && !inputScaled_ && s.height == 1 && s.width == 1 && s.kernelHeight == 1 && s.kernelWidth == 1 && s.padding == 0 &&
           s.leftPadding() == 0 &&
           DenseOp::fewRows({s.batch, s.channels, s.outChannels});
  }
  static std::vector<Shape> shapes(const std::vector<GpuTensor>& in) {
    std::vector<Shape> result;
    for (const GpuTensor& t : in) result.push_back(t.shape);
    return result;
  }
  static std::vector<Shape> shapes(const std::vector<HostTensor64>& in) {
    std::vector<Shape> result;
    for (const HostTensor64& t : in) result.push_back(t.shape);
    return result;
  }
  ConvShape shape(const std::vector<Shape>& in) const {
    return {in[0][0], in[0][1], in[0][2], in[0][3], in[1][0], in[1][2], in[1][3], padding_, stride_, widthPadding_};
  }
  // Calls visit(x index, c, kh, kw) for every input element under output (n, ·, oh, ow) inside the image.
  template <class Visit>
  static void forWindow(const ConvShape& s, std::uint32_t n, std::uint32_t oh, std::uint32_t ow, Visit visit) {
    for (std::uint32_t c = 0; c < s.channels; ++c) {
      for (std::uint32_t kh = 0; kh < s.kernelHeight; ++kh) {
        for (std::uint32_t kw = 0; kw < s.kernelWidth; ++kw) {
          const std::int64_t ih = std::int64_t{oh} * s.stride + kh - s.padding, iw = std::int64_t{ow} * s.stride + kw - s.leftPadding();
          if (ih < 0 || iw < 0 || ih >= s.height || iw >= s.width) continue;
          visit(((std::size_t{n} * s.channels + c) * s.height + static_cast<std::size_t>(ih)) * s.width + static_cast<std::size_t>(iw),
                c, kh, kw);
        }
      }
    }
  }
  Activation activation_;
  std::uint32_t padding_;
  std::optional<std::uint32_t> widthPadding_;
  std::uint32_t stride_;
  Pointwise after_;
  bool residual_;
  bool inputScaled_;
};

class MaxPool : public Op {
 public:
  std::string name() const override { return "max pool 2x2"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1 || in[0].size() != 4 || in[0][2] < 2 || in[0][3] < 2) {
      throw Error("max pool takes one [N, C, H, W] input with H, W ≥ 2; got " + describe(in.empty() ? Shape{} : in[0]));
    }
    return {in[0][0], in[0][1], in[0][2] / 2, in[0][3] / 2};
  }
  std::size_t workspaceBytes(const std::vector<Shape>& in) const override { return elementCount(outputShape(in)) * 4; }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    GLNET_ASSERT(out.workspace.has_value(), "max pooling needs its argmax workspace");
    const Shape& x = in[0].shape;
    plan.record(MaxPoolOp(programs).forward(in[0].view, out.view, *out.workspace, x[0] * x[1], x[2], x[3]));
  }
  void backward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out,
                const GpuTensor& dOut, const std::vector<std::optional<GradientTarget>>& targets) const override {
    if (!targets[0]) return;
    const Shape& x = in[0].shape;
    plan.record(MaxPoolOp(programs).backward(dOut.view, *out.workspace, targets[0]->view, x[0] * x[1], x[2], x[3],
                                             targets[0]->accumulate));
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    std::vector<double> y;
    forWindows(in[0], [&](std::size_t best, std::size_t) { y.push_back((*in[0].values)[best]); });
    return y;
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>& in, const std::vector<double>&,
                                                     const std::vector<double>& dy) const override {
    std::vector<double> dx(in[0].values->size(), 0.0);
    forWindows(in[0], [&](std::size_t best, std::size_t output) { dx[best] += dy[output]; });
    return {dx};
  }

 private:
  // Calls visit(input index of the window's first maximum, output index) for every window.
  template <class Visit>
  static void forWindows(const HostTensor64& x, Visit visit) {
    const std::size_t planes = std::size_t{x.shape[0]} * x.shape[1], h = x.shape[2], w = x.shape[3];
    std::size_t output = 0;
    for (std::size_t p = 0; p < planes; ++p) {
      for (std::size_t oh = 0; oh < h / 2; ++oh) {
        for (std::size_t ow = 0; ow < w / 2; ++ow) {
          std::size_t best = (p * h + 2 * oh) * w + 2 * ow;
          for (std::size_t k = 1; k < 4; ++k) {
            const std::size_t index = (p * h + 2 * oh + k / 2) * w + 2 * ow + k % 2;
            if (ref::beats((*x.values)[index], (*x.values)[best])) best = index;
          }
          visit(best, output++);
        }
      }
    }
  }
};

// A convolution followed by 2×2 max pooling in one GEMM whose stores pool, so that the convolution's full-size
// output is never written (inference graphs only: training needs it for the gradients). Its reference is the
// two ops' one after the other.
class Conv2dMaxPool : public Conv2d {
 public:
  using Conv2d::Conv2d;
  std::string name() const override { return Conv2d::name() + " + " + pool_.name(); }
  Shape outputShape(const std::vector<Shape>& in) const override { return pool_.outputShape({Conv2d::outputShape(in)}); }
  std::size_t workspaceBytes(const std::vector<Shape>& in) const override { return ConvOp::forwardWorkspaceBytes(shape(in)); }
  void forward(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    recordForward(programs, plan, in, out, true, out.prepared ? Part::gemm : Part::both);
  }
  void prepare(ProgramCache& programs, Plan& plan, const std::vector<GpuTensor>& in, const GpuTensor& out) const override {
    recordForward(programs, plan, in, out, true, Part::transpose);
  }
  void backward(ProgramCache&, Plan&, const std::vector<GpuTensor>&, const GpuTensor&, const GpuTensor&,
                const std::vector<std::optional<GradientTarget>>&) const override {
    GLNET_ASSERT(false, "a convolution fused with its pooling runs in forward-only graphs");
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override {
    const std::vector<double> convolved = Conv2d::referenceForward(in);
    return pool_.referenceForward({{&convolved, Conv2d::outputShape(shapes(in))}});
  }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>&, const std::vector<double>&,
                                                     const std::vector<double>&) const override {
    GLNET_ASSERT(false, "a convolution fused with its pooling runs in forward-only graphs");
    return {};
  }

 private:
  MaxPool pool_;
};

// [N, ...] as [N, the rest] (flatten), or as a given shape of as many elements: the same memory, seen anew.
class View : public Op {
 public:
  explicit View(std::optional<Shape> shape) : shape_(std::move(shape)) {}
  std::string name() const override { return shape_ ? "view as " + describe(*shape_) : "flatten"; }
  Shape outputShape(const std::vector<Shape>& in) const override {
    if (in.size() != 1 || in[0].empty()) throw Error(name() + " takes one tensor with a batch dimension");
    if (!shape_) return {in[0][0], static_cast<std::uint32_t>(elementCount(in[0]) / in[0][0])};
    if (elementCount(*shape_) != elementCount(in[0])) throw Error(name() + " does not fit " + describe(in[0]));
    return *shape_;
  }
  bool isView() const override { return true; }
  // CompiledGraph gives a view its input's memory and gradient, so it never asks a view to record anything.
  void forward(ProgramCache&, Plan&, const std::vector<GpuTensor>&, const GpuTensor&) const override {
    GLNET_ASSERT(false, "a view records no dispatch");
  }
  void backward(ProgramCache&, Plan&, const std::vector<GpuTensor>&, const GpuTensor&, const GpuTensor&,
                const std::vector<std::optional<GradientTarget>>&) const override {
    GLNET_ASSERT(false, "a view records no dispatch");
  }
  std::vector<double> referenceForward(const std::vector<HostTensor64>& in) const override { return *in[0].values; }
  std::vector<std::vector<double>> referenceBackward(const std::vector<HostTensor64>&, const std::vector<double>&,
                                                     const std::vector<double>& dy) const override {
    return {dy};
  }

 private:
  std::optional<Shape> shape_;
};

}  // namespace

std::shared_ptr<const Op> conv2dOp(Activation activation, std::uint32_t padding, std::uint32_t stride, Pointwise after, bool inputScaled,
                                   std::optional<std::uint32_t> widthPadding) {
  GLNET_ASSERT(stride >= 1, "a stride of at least 1");
  return std::make_shared<Conv2d>(activation, padding, stride, after, false, inputScaled, widthPadding);
}
std::shared_ptr<const Op> conv2dResidualOp(std::uint32_t padding, std::uint32_t stride, Pointwise after, bool inputScaled,
                                           std::optional<std::uint32_t> widthPadding) {
  GLNET_ASSERT(stride >= 1, "a stride of at least 1");
  return std::make_shared<Conv2d>(Activation::none, padding, stride, after, true, inputScaled, widthPadding);
}
std::shared_ptr<const Op> maxPoolOp() { return std::make_shared<MaxPool>(); }
std::shared_ptr<const Op> conv2dMaxPoolOp(Activation activation, std::uint32_t padding) {
  return std::make_shared<Conv2dMaxPool>(activation, padding, 1);
}
std::shared_ptr<const Op> flattenOp() { return std::make_shared<View>(std::nullopt); }
std::shared_ptr<const Op> viewOp(Shape shape) { return std::make_shared<View>(std::move(shape)); }

}  // namespace glnet
