#include "distributed/TaskThread.h"

#include <utility>

namespace glnet {

TaskThread::TaskThread() : thread_([this] { work(); }) {}

TaskThread::~TaskThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void TaskThread::add(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  changed_.notify_all();
}

void TaskThread::finish() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return tasks_.empty() && !running_; });
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

void TaskThread::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, with nothing left to run
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    running_ = true;
    lock.unlock();
    std::exception_ptr failure;
    try {
      task();
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    running_ = false;
    if (failure) {
      if (!failure_) failure_ = failure;
      tasks_.clear();
    }
    changed_.notify_all();
  }
}

}  // namespace glnet
