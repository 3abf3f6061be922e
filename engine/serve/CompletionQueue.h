// Text completions for a server: callers on any thread submit prompts; one worker thread owns the GL context and the
// LanguageModel (GL calls stay on the context's thread) and runs them, handing each piece of text to the caller's
// callback as it is generated. Up to `batch` completions decode together (continuous batching): one decode step, a
// single GPU replay that reads each weight once, advances every running completion by a token; a waiting completion
// (a bounded FIFO) joins at the next step that has room, its prompt run first, and a finished one leaves at once.
#pragma once

#include "decoder/LanguageModel.h"
#include "gl/Context.h"
#include "serve/Unavailable.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace glnet {

struct CompletionOptions {
  std::uint32_t contextPositions = 0;  // the KV cache's positions; 0: the config's, at most Decoder::defaultContextLimit
  std::size_t maxWaiting = 64;         // completions waiting to start beyond which submit() refuses (Unavailable)
  std::uint32_t batch = 8;             // completions decoding together (1 to Decoder::largestBatch)
};

struct CompletionRequest {
  std::string prompt;
  GenerationSettings settings;
};

// How a completion ended: its statistics (stopReason says why it stopped) and, when it did not run to its end,
// the error it met or its cancellation.
struct CompletionOutcome {
  GenerationStats stats;
  std::exception_ptr error;  // null unless it failed
  bool cancelled = false;
};

struct CompletionStats {
  std::size_t waiting = 0;  // submitted, not started
  std::size_t running = 0;
  std::uint64_t completed = 0, failed = 0, cancelled = 0, refused = 0;  // refused: by a full queue
  std::uint64_t promptTokens = 0, generatedTokens = 0;                  // of every completion started
  std::uint64_t decodeSteps = 0;  // GPU steps, each advancing every running completion: generated tokens per step is the batch
};

class CompletionQueue {
 public:
  using Ticket = std::uint64_t;
  // Both run on the worker thread (onDone of a completion cancelled before it started: on cancel's caller); they
  // should hand the text on and return, as every other completion waits meanwhile. Neither may throw.
  using PieceCallback = std::function<void(const std::string& piece)>;
  using DoneCallback = std::function<void(const CompletionOutcome& outcome)>;

  // Starts the worker, which creates the context and loads the model; throws what that throws (glnet::Error naming
  // the folder's file and what is wrong with it).
  CompletionQueue(const ContextOptions& contextOptions, const std::string& folder, const CompletionOptions& options);
  // Drains the queue, then stops the worker.
  ~CompletionQueue();
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  // Queues a completion: onPiece gets each non-empty piece of its text in order, then onDone once. Throws
  // glnet::Error, before queuing, for a request that cannot run (a prompt of no tokens or one that leaves no room
  // in the context, settings out of range), and Unavailable when maxWaiting completions wait or draining has begun.
  Ticket submit(CompletionRequest request, PieceCallback onPiece, DoneCallback onDone);
  // Ends a waiting or running completion (a client gone): its onDone gets cancelled = true. A ticket that has
  // finished, or was never given, is ignored.
  void cancel(Ticket ticket);
  // Refuses new work and returns once every queued completion has finished.
  void drain();

  CompletionStats stats() const;
  const std::string& deviceName() const { return deviceName_; }
  std::uint32_t contextPositions() const { return contextPositions_; }
  // Completions decoding together: CompletionOptions::batch, or fewer where the device binds fewer caches.
  std::uint32_t batch() const { return options_.batch; }

 private:
  struct Job {
    Ticket ticket = 0;
    CompletionRequest request;
    PieceCallback onPiece;
    DoneCallback onDone;
  };
  // A completion decoding in one of the model's sequences.
  struct Running {
    Job job;
    std::uint32_t sequence = 0;
    std::optional<Generation> generation;
    std::size_t counted = 0;  // generated tokens already in stats_
  };
  void work(const ContextOptions& contextOptions, const std::string& folder, std::promise<void>& ready);
  // The worker's loop: admits waiting completions while sequences are free, steps the running ones together.
  void serve();
  // Runs a joining completion's prompt and hands on its first piece; false when it has finished.
  bool begin(Running& running, std::uint32_t sequence);
  // Hands on the piece of the token chosen last; false when the completion has finished (its outcome handed on).
  bool handOn(Running& running);
  // Hands on its outcome and frees its sequence.
  void finish(Running& running, std::exception_ptr error, bool cancelled);
  bool anyRunning() const;  // the lock held

  CompletionOptions options_;
  std::string deviceName_;
  std::uint32_t contextPositions_ = 0;
  // The model lives on the worker (its GL objects go with the context there); its tokenizer is read on any thread.
  LanguageModel* model_ = nullptr;
  mutable std::mutex mutex_;
  std::condition_variable queued_, finished_;
  std::deque<Job> waiting_;
  Ticket nextTicket_ = 1;
  std::vector<Ticket> running_;  // by sequence: 0 where none runs
  std::vector<Ticket> cancelled_;  // running completions whose cancellation the worker has yet to see
  bool draining_ = false, stopping_ = false;
  CompletionStats stats_;
  std::thread worker_;
};

}  // namespace glnet
