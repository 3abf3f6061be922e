#include "serve/CompletionQueue.h"

#include "base/log.h"

#include <optional>

namespace glnet {

CompletionQueue::CompletionQueue(const ContextOptions& contextOptions, const std::string& folder, const CompletionOptions& options)
    : options_(options) {
  // The worker owns the promise: the constructor may return (and its frame go) while set_value finishes.
  std::promise<void> ready;
  std::future<void> started = ready.get_future();
  worker_ = std::thread([this, contextOptions, folder, contextPositions = options.contextPositions, ready = std::move(ready)]() mutable {
    work(contextOptions, folder, contextPositions, ready);
  });
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
    if (ticket == running_) {
      cancelRunning_ = true;
      return;
    }
    for (auto job = waiting_.begin(); job != waiting_.end(); ++job) {
      if (job->ticket != ticket) continue;
      onDone = std::move(job->onDone);
      waiting_.erase(job);
      ++stats_.cancelled;
      break;
    }
    if (waiting_.empty() && running_ == 0) finished_.notify_all();
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
  finished_.wait(lock, [&] { return waiting_.empty() && running_ == 0; });
}

CompletionStats CompletionQueue::stats() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  CompletionStats stats = stats_;
  stats.waiting = waiting_.size();
  stats.running = running_ != 0 ? 1 : 0;
  return stats;
}

// Runs one completion to its end, its cancellation or its error; the lock is not held.
void CompletionQueue::run(Job& job) {
  CompletionOutcome outcome;
  std::size_t counted = 0;  // generated tokens already in stats_
  // Counts what `now` adds to stats_ and says whether the completion is cancelled.
  const auto count = [&](const GenerationStats& now) {
    const std::lock_guard<std::mutex> lock(mutex_);
    stats_.generatedTokens += now.generatedIds.size() - counted;
    counted = now.generatedIds.size();
    return cancelRunning_;
  };
  std::optional<Generation> generation;
  try {
    generation.emplace(*model_, job.request.prompt, job.request.settings);
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stats_.promptTokens += generation->stats().promptTokens;
    }
    bool cancelled = count(generation->stats());
    while (!cancelled) {
      const std::optional<std::string> piece = generation->next();
      if (!piece) break;
      if (!piece->empty()) job.onPiece(*piece);
      cancelled = count(generation->stats());
    }
    outcome.cancelled = cancelled;
  } catch (...) {
    outcome.error = std::current_exception();
    log::error("a completion of " + std::to_string(job.request.prompt.size()) + " prompt bytes failed");
  }
  if (generation) outcome.stats = generation->stats();
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    ++(outcome.error ? stats_.failed : outcome.cancelled ? stats_.cancelled : stats_.completed);
  }
  job.onDone(outcome);
}

void CompletionQueue::work(const ContextOptions& contextOptions, const std::string& folder, std::uint32_t contextPositions,
                           std::promise<void>& ready) {
  std::unique_ptr<Context> context;
  std::unique_ptr<LanguageModel> model;
  try {
    context = std::make_unique<Context>(contextOptions);
    deviceName_ = context->device().renderer;
    model = std::make_unique<LanguageModel>(*context, folder, contextPositions);
    // Set before any request can arrive (the constructor has not returned), so the lock is not needed.
    model_ = model.get();
    contextPositions_ = model->decoder().context();
    ready.set_value();
  } catch (...) {
    ready.set_exception(std::current_exception());
    return;
  }

  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    queued_.wait(lock, [&] { return !waiting_.empty() || stopping_; });
    if (waiting_.empty()) break;
    Job job = std::move(waiting_.front());
    waiting_.pop_front();
    running_ = job.ticket;
    cancelRunning_ = false;
    lock.unlock();
    run(job);
    lock.lock();
    running_ = 0;
    if (waiting_.empty()) finished_.notify_all();
  }
}

}  // namespace glnet
