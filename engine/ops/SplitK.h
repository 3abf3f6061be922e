// Split-K for GEMMs with few outputs and a long sum (chosen in Gemm.cpp): the sum is cut
// into chunks run as groups along z, each writing a partial result to a workspace, then SplitSum.glsl adds
// them. Portable: no float atomics.
#pragma once

#include "numbers/Activation.h"
#include "ops/Pointwise.h"
#include "plan/Plan.h"
#include "plan/ProgramCache.h"

namespace glnet {

struct SplitK {
  std::uint32_t splits = 1;  // 1: no split
  std::uint32_t chunk = 0;   // t per split, a multiple of every configuration's GEMM_TILE_K
  static constexpr std::uint64_t chunkAlignment = 16;  // a multiple of every configuration's GEMM_TILE_K
  // The chunk that cuts a sum of `depth` into at most `parts` pieces.
  static std::uint64_t chunkFor(std::uint64_t depth, std::uint64_t parts) {
    return ((depth + parts - 1) / parts + chunkAlignment - 1) / chunkAlignment * chunkAlignment;
  }
  std::size_t workspaceBytes(std::uint64_t rows, std::uint64_t columns) const {
    return splits > 1 ? std::size_t{splits} * rows * columns * sizeof(float) : 0;
  }
};

class SplitSumOp {
 public:
  explicit SplitSumOp(ProgramCache& programs);
  // out[i] (+)= Σ_z partial[z·count + i].
  Dispatch operator()(const BufferView& partial, const BufferView& out, std::uint32_t count, std::uint32_t splits,
                      bool accumulate) const;
  // Slices of count + tailCount: out[i] (+)= the sum of element i < count, tail[j] (+)= that of count + j.
  Dispatch operator()(const BufferView& partial, const BufferView& out, std::uint32_t count, const BufferView& tail,
                      std::uint32_t tailCount, std::uint32_t splits, bool accumulate) const;

 private:
  // The dispatch of `slice` sums (SplitSum.glsl with `defines`), its lanes per sum chosen; buffers and uniforms unset.
  Dispatch sum(std::uint64_t slice, std::uint32_t splits, std::vector<ShaderDefine> defines) const;
  ProgramCache* programs_;
};

// The same finishing a forward pass: out[i] = after(act(Σ_z partial[z·count + i] + bias[(i / plane) mod columns])),
// plane 1 for a dense layer's [rows × columns], OH·OW for a convolution's [N, OC, OH, OW]; `after` (an imported
// model's function fused into its layer) is left out of the pooled sum.
class SplitBiasActivationOp {
 public:
  // `residual`: out[i] = after(act(Σ + bias + residual[i])), residual given to operator().
  SplitBiasActivationOp(ProgramCache& programs, Activation activation, const Pointwise& after = {}, bool residual = false);
  Dispatch operator()(const BufferView& partial, const BufferView& bias, const BufferView& out, std::uint32_t count,
                      std::uint32_t columns, std::uint32_t splits, std::uint32_t plane = 1,
                      const BufferView* residual = nullptr) const;
  // A convolution's partials [N, OC, height, width] summed, then 2×2 max pooling (stride 2, odd edges dropped),
  // bias and activation: out [N, OC, height/2, width/2].
  Dispatch pooled(const BufferView& partial, const BufferView& bias, const BufferView& out, std::uint32_t images,
                  std::uint32_t channels, std::uint32_t height, std::uint32_t width, std::uint32_t splits) const;

 private:
  const Program& program_;
  const Program& pooledProgram_;
};

}  // namespace glnet
