// Decoder's GPU state, shared by its files (DecoderUpload.cpp: the weights; Decoder.cpp: prompts and the public calls;
// DecoderStep.cpp: the decode step of every started sequence). Internal to engine/decoder/.
#pragma once

#include "decoder/Decoder.h"
#include "graph/InferenceOps.h"
#include "plan/ProgramCache.h"

#include <map>

namespace glnet {

// A dense layer's weight: float32 for the prompt's pass (the GEMM of graph/), and packed 16-bit for the decode step when
// the storage is fp16 or bf16 (half the bytes a step reads).
struct DecoderMatrix {
  Buffer full, packed;
  const Buffer& forStep() const { return packed.bytes() ? packed : full; }
};

struct DecoderLayerBuffers {
  Buffer attentionNorm, attentionNormBias, qkvBias, outputBias, mlpNorm, mlpNormBias, upBias, downBias;
  Buffer cache;  // one CacheShape::layerFloats() per sequence
  DecoderMatrix qkv, output, up, down;
};

// The activations of one pass of `rows` rows.
struct DecoderPassBuffers {
  Buffer ids, x, xAlternate, normed, qkv, attention, hidden, gated, logits, scratch;
};

struct Decoder::State {
  const Context& context;
  DecoderConfig config;
  std::uint32_t contextPositions;
  std::uint32_t sequenceCount;
  CacheShape cache;  // its context rounded up (see the constructor)
  ProgramCache programs;
  Buffer tokenTable, positionTable, finalNorm, finalNormBias, cosines, sines, zeros;
  DecoderMatrix lmHead;  // the token table's packed copy when the embeddings are tied and the storage 16-bit
  std::vector<DecoderLayerBuffers> layers;
  WeightStorage storage;
  std::size_t gpuWeightBytes = 0;   // every weight buffer
  std::size_t stepWeightBytes = 0;  // what a decode step reads
  bool llama;

  struct Sequence {
    std::uint32_t position = 0;  // tokens in its cache
    std::uint32_t draws = 0;     // the sampling counter: 1 for the prompt's choice, then one per step
    SamplingSettings sampling;
    bool decoding = false;  // started: a chosen token waits to be fed by the next step
  };
  std::vector<Sequence> sequences;

  // The prefill of the last prompt length, sequence and sampling (and whether it keeps every row's logits).
  struct Prefill {
    std::uint32_t rows = 0, sequence = 0;
    bool allLogits = false;
    SamplingSettings sampling;
    DecoderPassBuffers buffers;
    std::optional<Plan> plan;
  };
  Prefill prefill;

  // The decode step: its buffers hold a row per sequence; its plans are recorded for the started sequences' rows and
  // sampling (the composition), and replayed while that stays.
  DecoderPassBuffers step;
  Buffer positions;  // uint32 per row: each sequence's position, uploaded before each step
  Buffer chosen;     // uint32 per row: the chosen ids for the host
  Buffer chooserScratch;
  struct StepPlan {
    Plan plan;
    std::vector<int> drawParameters;  // per row, -1 where the row is not started
  };
  struct Composition {
    std::uint32_t rows = 0;
    std::vector<std::optional<SamplingSettings>> sampling;  // per row: the started ones'
  };
  Composition composition;
  std::optional<StepPlan> shortStep, longStep;  // the attention in one pass, or in chunks (DecodeAttention)
  const Plan* lastStep = nullptr;               // the plan of the last step run, for reports
  static constexpr int splitsParameter = 0;

  State(const Context& context, DecoderConfig given, std::uint32_t positions, WeightStorage weights, std::uint32_t sequences);

  // Weights (DecoderUpload.cpp).
  Buffer upload(const std::vector<float>& values);
  Buffer upload(const HostTensor& tensor) { return upload(tensor.values); }
  DecoderMatrix uploadMatrix(const std::vector<float>& values, bool prefillReads = true);
  void uploadWeights(const DecoderWeights& weights);

  // Prompts (Decoder.cpp).
  void apply(Plan& plan, const Op& op, const std::vector<GpuTensor>& in, const BufferView& out, const Buffer& scratch);
  DecoderPassBuffers passBuffers(std::uint32_t rows, std::uint32_t logitRows, bool stepPass = false) const;
  struct Ops {
    std::shared_ptr<const Op> norm, projection, projectionGelu, residual;
  };
  Ops ops() const;
  std::vector<GpuTensor> normInputs(const BufferView& x, std::uint32_t rows, const Buffer& gamma, const Buffer& beta) const;
  BufferView cacheOf(const DecoderLayerBuffers& layer, std::uint32_t sequence) const;
  void buildPrefill(std::uint32_t rows, bool allLogits, std::uint32_t sequence, const SamplingSettings& sampling);
  void runPrompt(const std::vector<std::uint32_t>& ids, bool allLogits, std::uint32_t sequence, const SamplingSettings& sampling);
  void checkIds(const std::vector<std::uint32_t>& ids) const;
  void checkSequence(std::uint32_t sequence) const;
  // The next tokens of `rows` rows from row `row` on, from `logits` (from its row `logitsRow`), into `chosen` and the
  // decode step's ids.
  void recordChoice(Plan& plan, const Buffer& logits, std::uint32_t logitsRow, std::uint32_t row, const SamplingSettings& sampling,
                    int drawParameter, std::uint32_t rows = 1);
  std::uint32_t readChosen(std::uint32_t sequence);

  // Decode steps (DecoderStep.cpp).
  void recordStepPass(Plan& plan, std::uint32_t rows, bool singlePass);
  Composition currentComposition() const;
  StepPlan buildStep(const Composition& wanted, bool singlePass);
  // One step of every started sequence: ids by row (`noToken` for the others; `vocabulary` where the logits hold a NaN).
  std::vector<std::uint32_t> runStep(std::vector<std::pair<std::string, double>>* timed);
  bool singlePassFits() const;
  // Throws unless sequence 0 is started and no other (next()'s precondition).
  void checkOnlyFirst() const;
};

bool sameSampling(const SamplingSettings& a, const SamplingSettings& b);
inline std::size_t floatBytes(std::size_t count) { return count * sizeof(float); }

}  // namespace glnet
