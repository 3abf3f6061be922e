#include "serve/CompletionQueue.h"

#include "base/Stopwatch.h"
#include "base/log.h"

#include <algorithm>
#include <optional>

namespace glnet {

CompletionQueue::CompletionQueue(const ContextOptions& contextOptions, const std::string& folder, const CompletionOptions& options)
    : options_(options) {
  // The worker owns the promise: the constructor may return (and its frame go) while set_value finishes.
  std::promise<void> ready;
  std::future<void> started = ready.get_future();
  if (options.batch == 0 || options.batch > Decoder::largestBatch) {
    throw UsageError(optionName("max-batch") + " takes 1 to " + std::to_string(Decoder::largestBatch) + " completions, not " +
                     std::to_string(options.batch));
  }
  running_.assign(options.batch, 0);
  worker_ = std::thread([this, contextOptions, folder, ready = std::move(ready)]() mutable { work(contextOptions, folder, ready); });
  try {
    started.get();
  } catch (...) {
    worker_.join();
    throw;
  }
}

CompletionQueue::~CompletionQueue() {
  drain();
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  worker_.join();
}

CompletionQueue::Ticket CompletionQueue::submit(CompletionRequest request, PieceCallback onPiece, DoneCallback onDone) {
  const GenerationSettings& settings = request.settings;
  if (settings.maxNewTokens == 0) throw UsageError("a completion generates at least 1 token");
  for (const std::string& stop : settings.stops) {
    if (stop.empty()) throw UsageError("a stop text must not be empty");
  }
  settings.sampling.check();
  // Refused here rather than by the worker, so that the caller can answer a client's mistake as such.
  const std::size_t promptTokens = model_->tokenizer().encode(request.prompt).size();
  if (promptTokens == 0) throw Error("the prompt holds no token");
  if (promptTokens >= contextPositions_) {
    throw Error("the prompt's " + std::to_string(promptTokens) + " tokens leave no room for a completion in the context of " +
                std::to_string(contextPositions_) + " positions");
  }
  Ticket ticket = 0;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (draining_) throw Unavailable("the server is shutting down");
    if (waiting_.size() >= options_.maxWaiting) {
      ++stats_.refused;
      throw Unavailable(std::to_string(waiting_.size()) + " completions are waiting, the most the queue takes");
    }
    ticket = nextTicket_++;
    waiting_.push_back({ticket, std::move(request), std::move(onPiece), std::move(onDone)});
  }
  queued_.notify_one();
  return ticket;
}

void CompletionQueue::cancel(Ticket ticket) {
  DoneCallback onDone;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(running_.begin(), running_.end(), ticket) != running_.end()) {
      cancelled_.push_back(ticket);
      return;
    }
    for (auto job = waiting_.begin(); job != waiting_.end(); ++job) {
      if (job->ticket != ticket) continue;
      onDone = std::move(job->onDone);
      waiting_.erase(job);
      ++stats_.cancelled;
      break;
    }
    if (waiting_.empty() && !anyRunning()) finished_.notify_all();
  }
  if (onDone) {
    CompletionOutcome outcome;
    outcome.cancelled = true;
    onDone(outcome);
  }
}

void CompletionQueue::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  draining_ = true;
  finished_.wait(lock, [&] { return waiting_.empty() && !anyRunning(); });
}

bool CompletionQueue::anyRunning() const {
  return std::any_of(running_.begin(), running_.end(), [](Ticket ticket) { return ticket != 0; });
}

CompletionStats CompletionQueue::stats() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  CompletionStats stats = stats_;
  stats.waiting = waiting_.size();
  stats.running = static_cast<std::size_t>(std::count_if(running_.begin(), running_.end(), [](Ticket ticket) { return ticket != 0; }));
  return stats;
}

void CompletionQueue::finish(Running& running, std::exception_ptr error, bool cancelled) {
  CompletionOutcome outcome;
  outcome.error = std::move(error);
  outcome.cancelled = cancelled && !outcome.error;
  if (outcome.error) log::error("a completion of " + std::to_string(running.job.request.prompt.size()) + " prompt bytes failed");
  if (running.generation) outcome.stats = running.generation->stats();
  running.generation.reset();  // its sequence takes no more steps
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    ++(outcome.error ? stats_.failed : outcome.cancelled ? stats_.cancelled : stats_.completed);
    running_[running.sequence] = 0;
    cancelled_.erase(std::remove(cancelled_.begin(), cancelled_.end(), running.job.ticket), cancelled_.end());
    if (waiting_.empty() && !anyRunning()) finished_.notify_all();
  }
  running.job.onDone(outcome);
}

bool CompletionQueue::handOn(Running& running) {
  std::string piece;
  try {
    piece = running.generation->advance();
  } catch (...) {
    finish(running, std::current_exception(), false);
    return false;
  }
  if (!piece.empty()) running.job.onPiece(piece);
  bool cancelled = false;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const std::size_t generated = running.generation->stats().generatedIds.size();
    stats_.generatedTokens += generated - running.counted;
    running.counted = generated;
    cancelled = std::find(cancelled_.begin(), cancelled_.end(), running.job.ticket) != cancelled_.end();
  }
  if (running.generation->ended() || cancelled) {
    finish(running, nullptr, cancelled);
    return false;
  }
  return true;
}

bool CompletionQueue::begin(Running& running, std::uint32_t sequence) {
  running.sequence = sequence;
  try {
    running.generation.emplace(*model_, running.job.request.prompt, running.job.request.settings, sequence);
  } catch (...) {
    finish(running, std::current_exception(), false);
    return false;
  }
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stats_.promptTokens += running.generation->stats().promptTokens;
  }
  return handOn(running);
}

void CompletionQueue::serve() {
  std::vector<std::optional<Running>> bySequence(running_.size());
  const auto anyDecoding = [&] { return std::any_of(bySequence.begin(), bySequence.end(), [](const auto& running) { return running.has_value(); }); };
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    queued_.wait(lock, [&] { return !waiting_.empty() || stopping_ || anyDecoding(); });
    if (waiting_.empty() && !anyDecoding()) break;  // stopping
    // Waiting completions take the free sequences, in arrival order.
    std::vector<std::uint32_t> joining;
    for (std::uint32_t sequence = 0; sequence < bySequence.size() && !waiting_.empty(); ++sequence) {
      if (bySequence[sequence]) continue;
      bySequence[sequence].emplace();
      bySequence[sequence]->job = std::move(waiting_.front());
      waiting_.pop_front();
      running_[sequence] = bySequence[sequence]->job.ticket;
      joining.push_back(sequence);
    }
    lock.unlock();
    for (const std::uint32_t sequence : joining) {
      if (!begin(*bySequence[sequence], sequence)) bySequence[sequence].reset();
    }
    if (anyDecoding()) {
      std::vector<std::uint32_t> ids;
      std::exception_ptr failure;
      Stopwatch step;
      try {
        ids = model_->decoder().step();
      } catch (...) {
        failure = std::current_exception();
      }
      const double seconds = step.seconds();
      if (!failure) {
        const std::lock_guard<std::mutex> stepLock(mutex_);
        ++stats_.decodeSteps;
      }
      for (std::optional<Running>& running : bySequence) {
        if (!running) continue;
        if (failure) {
          finish(*running, failure, false);
          running.reset();
          continue;
        }
        try {
          running->generation->accept(ids[running->sequence], seconds);
        } catch (...) {
          finish(*running, std::current_exception(), false);
          running.reset();
          continue;
        }
        if (!handOn(*running)) running.reset();
      }
    }
    lock.lock();
  }
}

void CompletionQueue::work(const ContextOptions& contextOptions, const std::string& folder, std::promise<void>& ready) {
  std::unique_ptr<Context> context;
  std::unique_ptr<LanguageModel> model;
  try {
    context = std::make_unique<Context>(contextOptions);
    deviceName_ = context->device().renderer;
    // Fewer completions at once where this device cannot bind so many caches (a warning, as for a classifier's batch).
    const std::uint32_t fitting = Decoder::sequencesThatFit(context->limits(), readDecoderConfig(folder), options_.contextPositions);
    if (fitting > 0 && fitting < options_.batch) {
      log::warn(optionName("max-batch") + " " + std::to_string(options_.batch) + " lowered to " + std::to_string(fitting) +
                ": this device binds at most that many KV caches of the context at once");
      options_.batch = fitting;
      const std::lock_guard<std::mutex> lock(mutex_);
      running_.assign(fitting, 0);
    }
    model = std::make_unique<LanguageModel>(*context, folder, options_.contextPositions, std::nullopt, options_.batch);
    // Set before any request can arrive (the constructor has not returned), so the lock is not needed.
    model_ = model.get();
    contextPositions_ = model->decoder().context();
    ready.set_value();
  } catch (...) {
    ready.set_exception(std::current_exception());
    return;
  }
  serve();
}

}  // namespace glnet
