#include "train/GradientExchange.h"

#include "ops/GradientCompression.h"
#include "ops/StridedCopy.h"

#include <algorithm>

namespace glnet {

namespace {

// A plan of one dispatch: to = from, or to += from (`add`), over every float of `from`.
Plan copyPlan(const Context& context, ProgramCache& programs, const BufferView& from, const BufferView& to, bool add) {
  Plan plan(context.limits());
  const auto floats = static_cast<std::uint32_t>(from.room() / sizeof(float));
  plan.record(regionCopy(programs, add ? "accumulated gradients +=" : "accumulated gradients =", from, to, RegionCopy{{floats}, 0, 0, {1}, {1}}, add));
  plan.finishPrograms();  // in the set-up, where every rank fails alike, not at a first run mid-training
  return plan;
}

// The gradient arena in buckets for sums that overlap the backward pass. A parameter's gradient is complete
// after the last step of `plan` that writes it; in that order, gradients next to each other in the arena
// (apart from alignment padding that stays zero on every rank) share a bucket up to `bucketBytes`, as PyTorch DDP
// groups them.
std::vector<GradientBucket> gradientBuckets(CompiledGraph& graph, const Plan& plan, std::size_t bucketBytes) {
  // `parameter`: the piece's place in the arena, so that pieces p and p + 1 are neighbours there.
  struct Piece {
    std::size_t parameter, begin, end, ready;
  };
  std::vector<Piece> pieces;
  const std::vector<Tensor>& parameters = graph.graph().parameters();
  for (std::size_t p = 0; p < parameters.size(); ++p) {
    // State lies after the trained parameters in the arena, and its gradient stays zero.
    if (!graph.graph().tensor(parameters[p]).needsGradient) continue;
    const BufferView view = graph.view(parameters[p]);  // the parameter arena: same offsets as the gradients'
    const std::size_t end = view.offset + view.bytes;
    pieces.push_back({0, view.offset, end, plan.lastStepWriting(graph.gradientArena(), view.offset, view.bytes).value_or(0)});
  }
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
  for (std::size_t p = 0; p < pieces.size(); ++p) pieces[p].parameter = p;
  std::stable_sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.ready < b.ready; });
  std::vector<GradientBucket> buckets;
  std::size_t first = 0, last = 0;  // the parameters of the open bucket
  for (const Piece& piece : pieces) {
    if (!buckets.empty()) {
      GradientBucket& open = buckets.back();
      const bool before = piece.parameter + 1 == first, after = piece.parameter == last + 1;
      const std::size_t begin = before ? piece.begin : open.offset, end = after ? piece.end : open.offset + open.bytes;
      if ((before || after) && end - begin <= bucketBytes) {
        open = {begin, end - begin, piece.ready};
        first = std::min(first, piece.parameter);
        last = std::max(last, piece.parameter);
        continue;
      }
    }
    buckets.push_back({piece.begin, piece.end - piece.begin, piece.ready});
    first = last = piece.parameter;
  }
  return buckets;
}

}  // namespace

GradientExchange::GradientExchange(const Context& context, CompiledGraph& graph, const Plan& gradientPlan, ProgramCache& programs,
                                   const TrainingOptions& options, const Communicator& ranks)
    : ranks_(ranks), graph_(graph), accumulate_(options.accumulate) {
  if (options.accumulate > 1) {
    const BufferView gradients(graph_.gradientArena());
    accumulation_.emplace(Accumulation{Buffer(gradients.room()), Plan(context.limits()), Plan(context.limits()), Plan(context.limits())});
    const BufferView summed(accumulation_->sum);  // once the buffer is in place: a view holds its address
    accumulation_->keep = copyPlan(context, programs, gradients, summed, false);
    accumulation_->add = copyPlan(context, programs, gradients, summed, true);
    accumulation_->restore = copyPlan(context, programs, summed, gradients, true);
  }
  if (!ranks.distributed()) return;
  // The window itself is made by open(): it is collective, and a rank may still fail here before the ranks agree
  // that all is well.
  sumsThroughSharedMemory_ = options.allReduce == TrainingOptions::AllReduce::sharedMemory ||
                             (options.allReduce == TrainingOptions::AllReduce::automatic && ranks.allOnOneHost());
  if (options.compressGradients) {
    Buffer& arena = graph_.gradientArena();
    const std::size_t floats = arena.bytes() / sizeof(float), packedBytes = GradientCompressionOp::packedBytes(floats);
    const std::vector<float> zeros(floats, 0.0f);
    compression_.emplace(Compression{Buffer(arena.bytes(), zeros.data()), Buffer(packedBytes), HostMirror(packedBytes), Plan(context.limits()),
                                     Plan(context.limits())});
    const GradientCompressionOp compression(programs);
    compression_->compress.record(compression.compress(arena, compression_->residuals, compression_->packed, static_cast<std::uint32_t>(floats)));
    compression_->expand.record(compression.expand(compression_->packed, arena, static_cast<std::uint32_t>(floats)));
    return;
  }
  gradientMirror_.emplace(graph_.gradientArena().bytes());
  // Buckets overlap the sum with the backward pass of the step's one batch; accumulated gradients are complete only
  // after the last batch's.
  if (options.allReduceBucketBytes > 0 && ranks.callableFromSeveralThreads() && options.accumulate == 1) {
    buckets_ = gradientBuckets(graph_, gradientPlan, options.allReduceBucketBytes);
    sumThread_ = std::make_unique<TaskThread>();
  }
}

void GradientExchange::open() {
  if (!sumsThroughSharedMemory_ || hostSum_) return;
  const std::size_t sumBytes = compression_ ? compression_->packed.bytes() : graph_.gradientArena().bytes();
  hostSum_ = std::make_unique<HostSum>(ranks_, sumBytes, HostSum::threadsPerRank(ranks_));
}

std::size_t GradientExchange::run(const Plan& gradientPlan, const std::function<void(std::uint32_t batch)>& selectBatch,
                                  const Stopwatch& stepClock, StepTiming& timing) {
  if (TimerQuery::measuresGpu()) stepStarted_.record();
  if (!buckets_.empty()) {
    selectBatch(0);
    sumGradientsInBuckets(gradientPlan, stepClock, timing);
    return buckets_.size();
  }
  for (std::uint32_t batch = 0; batch < accumulate_; ++batch) {
    selectBatch(batch);
    gradientPlan.run();
    if (!accumulation_) continue;
    const bool last = batch + 1 == accumulate_;
    (last ? accumulation_->restore : batch == 0 ? accumulation_->keep : accumulation_->add).run();
  }
  if (TimerQuery::measuresGpu()) backwardDone_.record();
  std::size_t sums = 0;
  if (ranks_.distributed()) {
    sumGradients(stepClock, timing);
    sums = 1;
  }
  timing.gpuMs = gpuMilliseconds();
  return sums;
}

double GradientExchange::gpuMilliseconds() const {
  return TimerQuery::measuresGpu() ? glnet::gpuMilliseconds(stepStarted_, backwardDone_) : 0.0;
}

void GradientExchange::sumOverRanks(float* values, std::size_t count) const {
  if (hostSum_) return hostSum_->sum(values, count);
  ranks_.sum(values, count);
}

void GradientExchange::sumGradients(const Stopwatch& stepClock, StepTiming& timing) {
  if (compression_) return sumCompressedGradients(stepClock, timing);
  Fence(/*after the backward pass: what follows is communication only*/).wait();
  timing.backwardDoneMs = stepClock.milliseconds();
  sumInPieces(graph_.gradientArena(), *gradientMirror_, timing,
              [this](void* values, std::size_t bytes) { sumOverRanks(static_cast<float*>(values), bytes / sizeof(float)); });
}

void GradientExchange::sumCompressedGradients(const Stopwatch& stepClock, StepTiming& timing) {
  Compression& compression = *compression_;
  compression.compress.run();
  Fence(/*after the backward pass and the packing*/).wait();
  timing.backwardDoneMs = stepClock.milliseconds();
  const auto sum = [this](void* values, std::size_t bytes) {
    auto* packed = static_cast<std::uint16_t*>(values);
    if (hostSum_) return hostSum_->sumBfloat16(packed, bytes / sizeof(std::uint16_t));
    ranks_.sumBfloat16(packed, bytes / sizeof(std::uint16_t));
  };
  sumInPieces(compression.packed, compression.mirror, timing, sum, &compression.expand);
}

void GradientExchange::sumInPieces(Buffer& buffer, HostMirror& mirror, StepTiming& timing,
                          const std::function<void(void* values, std::size_t bytes)>& sum, const Plan* then) {
  const Stopwatch total;
  // About 1 MB a piece, at most 8: enough to overlap, few enough that the sums' fixed costs stay small. Multiples
  // of 64 bytes keep every piece whole in floats and bfloat16 values.
  const std::size_t bytes = buffer.bytes();
  const std::size_t pieces = std::clamp<std::size_t>(bytes >> 20, 1, 8);
  const std::size_t pieceBytes = (bytes / pieces + 63) / 64 * 64;
  std::vector<Fence> pulled;
  for (std::size_t offset = 0; offset < bytes; offset += pieceBytes) {
    pulled.push_back(mirror.startPull(buffer, offset, std::min(pieceBytes, bytes - offset)));
  }
  auto* host = static_cast<std::uint8_t*>(mirror.data());
  for (std::size_t p = 0; p < pulled.size(); ++p) {
    const std::size_t offset = p * pieceBytes, length = std::min(pieceBytes, bytes - offset);
    Stopwatch clock;
    pulled[p].wait();
    timing.readMs += clock.restart();
    sum(host + offset, length);
    timing.allReduceMs += clock.restart();
    mirror.push(buffer, offset, length);  // flushed: the GPU copies this piece back while the host sums the next
  }
  // The update waits for the last piece anyway, so count it here.
  const Stopwatch clock;
  if (then) then->run();
  Fence().wait();
  timing.writeMs = clock.milliseconds();
  timing.exposedMs = total.milliseconds();
}

void GradientExchange::sumGradientsInBuckets(const Plan& gradientPlan, const Stopwatch& stepClock, StepTiming& timing) {
  Buffer& arena = graph_.gradientArena();
  std::vector<Fence> copied;
  copied.reserve(buckets_.size());
  std::size_t next = 0;
  gradientPlan.run([&](std::size_t step) {
    for (; next < buckets_.size() && buckets_[next].readyAfterStep == step; ++next) {
      copied.push_back(gradientMirror_->startPull(arena, buckets_[next].offset, buckets_[next].bytes));
    }
  });
  if (TimerQuery::measuresGpu()) backwardDone_.record();
  const Fence computed;
  auto* gradients = static_cast<std::uint8_t*>(gradientMirror_->data());
  const Stopwatch clock;
  double firstSum = -1;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    copied[b].wait();
    if (firstSum < 0) firstSum = clock.milliseconds();
    const GradientBucket bucket = buckets_[b];
    sumThread_->add([this, gradients, bucket] {
      sumOverRanks(reinterpret_cast<float*>(gradients + bucket.offset), bucket.bytes / sizeof(float));
    });
  }
  // From here the GPU has nothing left of the step but the update, which waits for the sums.
  computed.wait();
  timing.backwardDoneMs = stepClock.milliseconds();
  const double backwardDone = clock.milliseconds();
  sumThread_->finish();
  const double summed = clock.milliseconds();
  gradientMirror_->push(arena);
  Fence().wait();
  const double written = clock.milliseconds();
  timing.allReduceMs = summed - firstSum;
  timing.writeMs = written - summed;
  timing.exposedMs = written - backwardDone;
  timing.gpuMs = gpuMilliseconds();
}

}  // namespace glnet
