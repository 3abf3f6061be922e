// The operators glnet's graphs are built from. Each has a shader binding (engine/ops), a gradient rule and
// a float64 reference; adding one means one shader, one class like these, one reference and one test.
#pragma once

#include "graph/Op.h"
#include "numbers/Activation.h"
#include "ops/Pointwise.h"

#include <memory>
#include <optional>

namespace glnet {

// Y = act(X·Wᵀ + b), X [rows, in], W [out, in], b [out]; the MLP layer, fused into one GEMM each way. `after`: an
// imported model's function of act(...), forward-only (an imported GELU).
std::shared_ptr<const Op> denseOp(Activation activation, Pointwise after = {});
// Y = after(X·Wᵀ + b + R), R [rows, out] a fourth input (a transformer's residual connection), forward-only.
std::shared_ptr<const Op> denseResidualOp(Pointwise after = {});
// Y = X·Wᵀ, W [out, in].
std::shared_ptr<const Op> matMulOp();
// Y = X + b, b [columns] broadcast over rows.
std::shared_ptr<const Op> biasAddOp();
// Y = relu(X), tanh(X) or sigmoid(X).
std::shared_ptr<const Op> activationOp(Activation activation);
// Y = act(A + B), A and B of one shape.
std::shared_ptr<const Op> addOp(Activation activation = Activation::none);
std::shared_ptr<const Op> multiplyOp();
// Y[r] = softmax(X[r]) row by row, [rows, columns]; inference only (passes no gradient).
std::shared_ptr<const Op> softmaxOp();
// loss[r] = −log softmax(logits)[r, labels[r]]; labels are class indices. With label smoothing ε the target is
// (1 − ε)·onehot + ε/classes.
std::shared_ptr<const Op> softmaxCrossEntropyOp(float smoothing = 0.0f);
// loss[r] = mean over the row of (Y − T)²; T gets no gradient.
std::shared_ptr<const Op> meanSquaredErrorOp();
// correct[r] = 1 when argmax(logits[r]) = labels[r]; a metric, not differentiable.
std::shared_ptr<const Op> correctOp();
// Y = act(conv(X, W) + b), NCHW: X [N, C, H, W], W [OC, C, KH, KW], b [OC]; `padding` 0 is valid, (kernel − 1)/2
// keeps the size ("same") at stride 1.
// `after`: an imported model's function after the activation (forward-only graphs). `inputScaled`: a last input S
// [N, C] or [N, C, 1, 1] scales X per image and channel as the convolution reads it, conv(X ⊙ S) (forward-only
// graphs, 1x1 kernels without padding: the squeeze-excite gate before a block's projection). `widthPadding`: left and
// right where they differ from `padding` (then top and bottom only), as a 1×k or k×1 kernel's "same" padding.
std::shared_ptr<const Op> conv2dOp(Activation activation, std::uint32_t padding, std::uint32_t stride = 1, Pointwise after = {},
                                   bool inputScaled = false, std::optional<std::uint32_t> widthPadding = std::nullopt);
// X, W, b and a residual R shaped as the output: after(conv(X) + b + R) (forward-only graphs: ResNet's last
// convolution of a block, its identity added and the ReLU after, as one op); `inputScaled` and `widthPadding` as conv2dOp's.
std::shared_ptr<const Op> conv2dResidualOp(std::uint32_t padding, std::uint32_t stride = 1, Pointwise after = {}, bool inputScaled = false,
                                           std::optional<std::uint32_t> widthPadding = std::nullopt);
// x [N, C, ...], gamma, beta, running mean, running variance [C]: y = act((x − mean)/sqrt(var + ε)·gamma + beta) per
// channel. Training: the batch's mean and variance, gradients to x, gamma and beta, and the running statistics (state
// tensors) moved by `momentum` towards the batch's as PyTorch does; otherwise the running statistics (forward only).
// With `residual`, a sixth input r of x's shape is added before the activation: y = act(normalized + r) (a residual
// block's end, its add and ReLU without passes of their own), and r gets dy·act'(y).
std::shared_ptr<const Op> batchNormOp(bool training, float momentum = 0.1f, float epsilon = 1e-5f, Activation activation = Activation::none,
                                      bool residual = false);
// qkv [..., S, 3·heads·D] (each position's queries, keys and values of `heads` heads side by side, PyTorch's
// MultiheadAttention in-projection): O = softmax(Q·Kᵀ/√D)·V per head, [..., S, heads·D]; `causal`: query i sees keys up
// to i. An optional second input [..., S] is added to the scores of each key (a padding mask: 0, or −inf for a padded
// position). Trainable: the backward pass recomputes the scores instead of keeping them.
std::shared_ptr<const Op> selfAttentionOp(std::uint32_t heads, bool causal = false);
// x [..., C], gamma and beta [C]: y = (x − mean)/sqrt(var + ε)·gamma + beta over each row of C values (PyTorch's
// LayerNorm(C)); trainable, the same in training and inference.
std::shared_ptr<const Op> layerNormOp(float epsilon = 1e-5f);
// Inverted dropout of a fraction `rate` of x's elements, the rest scaled by 1/(1 − rate); which ones follows from
// (salt, the plan's step parameter, the element's index), the same on every device and drawn again by backward. The
// float64 reference draws the mask of step `referenceStep`. Training graphs only: inference leaves the layer out.
std::shared_ptr<const Op> dropoutOp(float rate, std::uint32_t salt, std::uint32_t referenceStep = 1);
// The keep (true) or drop of element `index` at `step`: the hash of Dropout.glsl.
bool dropoutKeeps(std::uint32_t index, std::uint32_t salt, std::uint32_t step, float rate);
// 2×2 max pooling, stride 2: [N, C, H, W] → [N, C, H/2, W/2].
std::shared_ptr<const Op> maxPoolOp();
// conv2dOp followed by maxPoolOp in one dispatch that never writes the convolution's output; forward only.
std::shared_ptr<const Op> conv2dMaxPoolOp(Activation activation, std::uint32_t padding);
// [N, d1, d2, ...] → [N, d1·d2·...] in (C, H, W) order, as a view of the same memory.
std::shared_ptr<const Op> flattenOp();
// [N, C, H, W] → [N, H·W, C]: each pixel a position of C features, as a vision transformer takes patches; trainable.
std::shared_ptr<const Op> tokensOp();
// ids [N, ...] (whole numbers held as floats) and table [V, E]: y [N, ..., E] = table[id] (PyTorch's Embedding); NaN
// where an id is outside the table, fractional or NaN, a negative id counted from the end (ONNX's Gather). Trainable: the table's gradient sums the rows of each id in a
// fixed order (deterministic); the ids get none.
std::shared_ptr<const Op> embeddingOp();
// [N, ..., S, E] → [N, ..., E]: the first position's features (BERT's [CLS] token as the sequence's summary); trainable.
std::shared_ptr<const Op> firstPositionOp();
// The input seen as `shape` (as many elements, the batch included): no dispatch, the gradient passes as it is.
std::shared_ptr<const Op> viewOp(Shape shape);

}  // namespace glnet
