// The general tensor operators of imported models (ONNX): pointwise functions, NumPy-broadcast arithmetic,
// layout changes (transpose, slice, concat, pad, expand, reshape), indexing (gather, scatter, triangles), pooling of any geometry, grouped and strided
// convolution, functions along an axis (softmax, reductions, layer normalization) and products of two computed
// tensors. Inference only, but for pooling, grouped convolution, concatenation and three pointwise functions. Each has its
// shader and a float64 reference.
#pragma once

#include "gl/Program.h"
#include "graph/Op.h"
#include "numbers/AxisKinds.h"
#include "numbers/BinaryKinds.h"
#include "ops/Pointwise.h"
#include "ops/StridedCopy.h"

#include <array>
#include <memory>
#include <optional>
#include <vector>

namespace glnet {

// The most axes a tensor of these ops may have (ONNX vision and transformer models use up to 5 or 6).
constexpr std::size_t largestRank = largestCopyRank;

struct PoolSettings {
  bool average = false;
  std::array<std::uint32_t, 2> kernel{1, 1}, strides{1, 1}, dilations{1, 1};
  std::array<std::uint32_t, 4> pads{0, 0, 0, 0};  // top, left, bottom, right
  bool ceilMode = false;
  bool countIncludePad = false;
};

struct ConvSettings {
  std::array<std::uint32_t, 2> strides{1, 1}, dilations{1, 1};
  std::array<std::uint32_t, 4> pads{0, 0, 0, 0};  // top, left, bottom, right
  std::uint32_t groups = 1;
};

// y = f(x); trainable for HardSwish, Gelu (both forms) and SiLU.
std::shared_ptr<const Op> pointwiseOp(Pointwise function);
// y = after(a ∘ b), shapes broadcast as NumPy does.
std::shared_ptr<const Op> broadcastOp(BinaryKind kind, Pointwise after = {});
// ONNX's Where: inputs (condition, x, y) broadcast together as NumPy does; y = condition ? x : y, where any nonzero
// condition (NaN included) is true. Only the chosen side is read, so a NaN there passes through.
std::shared_ptr<const Op> whereOp();
// x [N, C, spatial...], scale, (shift): y = after(x · scale[c] + shift[c]) with scale and shift of C values, or without
// shift y = after(x · scale[n, c]) with a scale of C or N·C values (a squeeze-excite gate).
std::shared_ptr<const Op> channelAffineOp(bool shift, Pointwise after = {});
// y = x with its axes permuted: y's axis k is x's axis permutation[k].
std::shared_ptr<const Op> transposeOp(std::vector<std::uint32_t> permutation);
// Per axis, elements start, start + step, ... (`size` of them); steps may be negative.
std::shared_ptr<const Op> sliceOp(std::vector<std::int64_t> starts, std::vector<std::int64_t> steps, Shape size);
// The inputs joined along `axis`; trainable.
std::shared_ptr<const Op> concatOp(std::uint32_t axis);
// `output` assembled from regions of one input, one region copy each: what Slices and a Concat of them make (a
// torch.roll's pieces, Swin's patch merging of every other row and column), in one dispatch per region instead of a
// copy per Slice and one for the Concat. Each region is a box of the output (the output's own strides) inside the
// input, no two share an element and together they hold all of the output's: the op refuses anything else, and its
// copies then run with no barrier between them.
std::shared_ptr<const Op> regionsOp(Shape output, std::vector<RegionCopy> regions);
// `before` and `after` elements of `value` around each axis.
std::shared_ptr<const Op> padOp(std::vector<std::uint32_t> before, std::vector<std::uint32_t> after, float value);
// x broadcast to `shape` (NumPy rules; the result's rank may be larger).
std::shared_ptr<const Op> expandOp(Shape shape);
// The same elements in another shape, as a view of the same memory.
std::shared_ptr<const Op> reshapeOp(Shape shape);
// 2-D pooling over [N, C, H, W]; trainable (the one operator here with a gradient).
std::shared_ptr<const Op> poolOp(PoolSettings settings);
// Y = after(conv(X, W) + b), X [N, C, H, W], W [OC, C/groups, KH, KW], b [OC]; trainable without `after`.
std::shared_ptr<const Op> groupedConvOp(ConvSettings settings, Pointwise after = {});
// Along axes [first, last) of x (merged into one): softmax, log-softmax and layer normalization keep the shape
// (layer normalization takes gamma and beta shaped like those axes); reductions drop the axes, or keep them as 1.
std::shared_ptr<const Op> axisOp(AxisKind kind, std::uint32_t first, std::uint32_t last, bool keepDims = true, float epsilon = 1e-5f);
// Layer normalization of x + r along axes [first, last): inputs x, gamma, beta and r shaped as x (a residual Add
// that nothing else reads, summed as the normalization reads it).
std::shared_ptr<const Op> layerNormalizationResidualOp(std::uint32_t first, std::uint32_t last, float epsilon);
// Y = A·B over the last two axes of two computed tensors, their leading axes broadcast (up to 4).
std::shared_ptr<const Op> batchedMatMulOp();

// Indexing (IndexingOps.cpp). Indices are floats holding integers, as glnet holds integer tensors; a negative one counts
// from the end of its axis. An index outside its axis, fractional or NaN reads nothing and gives NaN for the elements it
// would have read (a GPU cannot raise an error).
// Gather along `axis`: inputs data and indices; y = data[:axis] + indices + data[axis + 1:] (an embedding lookup at 0).
std::shared_ptr<const Op> gatherOp(std::uint32_t axis);
// GatherND: inputs data and indices [batch..., rows..., depth]; y [batch..., rows..., data[batch + depth:]...].
std::shared_ptr<const Op> gatherNdOp(std::uint32_t batchDims);
// ScatterND, reduction none: inputs data, indices [rows..., depth], updates; y = data with each row's update written at
// its index. Rows that share an index, or a bad index, are the caller's to refuse (the GPU writes them in any order).
std::shared_ptr<const Op> scatterNdOp();
// Trilu: the upper (column − row ≥ k) or lower (column − row ≤ k) triangle of the last two axes, zeros elsewhere.
std::shared_ptr<const Op> triluOp(bool upper, std::int64_t k);
// Scaled dot-product attention, fused (shaders/Attention.glsl): inputs Q, K, V and optionally an additive mask,
// O = softmax(scale·Q·Kᵀ + mask)·V per batch and head without writing the scores. Each operand is a rank-4 tensor
// holding its logical axes [batch, head, sequence, feature] in the order its layout says: logical axis k is the
// tensor's axis layout[k] (transposeOp's convention, so a Transpose(perm) feeding the op is read in place with
// layout = perm). Q is logically [B, H, Sq, D], K [B, H, Sk, D], V [B, H, Sk, Dv], the output [B, H, Sq, Dv] (its
// tensor's axis output[k] holds logical axis k); the mask broadcasts (NumPy) to [B, H, Sq, Sk]. K and V may have fewer
// heads than Q, a divisor Hkv of H (grouped-query attention): query head h reads K and V head h / (H / Hkv).
struct AttentionSettings {
  float scale = 1.0f;  // applied to Q·Kᵀ before the mask
  // Key j hidden from query i when j > i + Sk − Sq (a block of queries at the end of a cache); hidden keys are left
  // out. A query that sees no key (or only −inf) gets 0.
  bool causal = false;
  // A query that sees no key gets 0 (PyTorch's SDPA export turns softmax's NaN into 0 with Where(IsNaN(p), 0, p)), or
  // NaN as a plain Softmax gives.
  bool emptyRowsZero = true;
  using Layout = std::array<std::uint32_t, 4>;
  static constexpr Layout contiguous{0, 1, 2, 3};
  // K given as Kᵀ [B, H, D, Sk]. A Kᵀ that is Transpose(P)(T) is T read with layout {P[0], P[1], P[3], P[2]}
  // (exports' [B, S, H, D] → perm [0, 2, 3, 1] gives sequenceBeforeHeads).
  static constexpr Layout swapLastTwo{0, 1, 3, 2};
  static constexpr Layout sequenceBeforeHeads{0, 2, 1, 3};  // [B, S, H, D], the head split's reshape before its transpose
  Layout query = contiguous, key = contiguous, value = contiguous, output = contiguous;
  // An input read as a strided view instead of through its layout (Q, K and V as parts of one fused projection, a
  // [B, S, 3, H, D] tensor given once for all three): its logical sizes [B, H, S, D], each axis' stride and the first
  // element, in elements of the input tensor (of any shape), inside which every element of the view must lie.
  struct View {
    std::array<std::uint32_t, 4> sizes{}, strides{};
    std::uint32_t offset = 0;
  };
  std::optional<View> queryView, keyView, valueView;
  // Not 0: the mask is [P, H or 1, Sq or 1, Sk or 1] and batch b reads its entry b mod P, P dividing B (Swin's shifted
  // windows: the batch is image·P + window over P windows, the mask the windows' own).
  std::uint32_t maskBatchPeriod = 0;
};
std::shared_ptr<const Op> attentionOp(AttentionSettings settings);

// The shape two shapes broadcast to; throws glnet::Error when they do not.
Shape broadcastShapes(const Shape& a, const Shape& b);

}  // namespace glnet
