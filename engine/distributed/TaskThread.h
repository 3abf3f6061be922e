// One thread that runs tasks in the order they are given: MPI sums off the GL thread, so that they overlap
// the GPU work the GL thread waits for (MPI progresses a sum only inside an MPI call, so a non-blocking sum
// started on the GL thread would stall while that thread waits on a fence).
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace glnet {

class TaskThread {
 public:
  TaskThread();
  // Waits for the tasks already given, then ends the thread.
  ~TaskThread();
  TaskThread(const TaskThread&) = delete;
  TaskThread& operator=(const TaskThread&) = delete;

  void add(std::function<void()> task);
  // Waits until every task given so far has run; rethrows the first exception one of them threw (the
  // tasks after it are dropped).
  void finish();

 private:
  void work();
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> tasks_;
  bool running_ = false;  // a task is out of the queue and running
  bool stopping_ = false;
  std::exception_ptr failure_;
  std::thread thread_;
};

}  // namespace glnet
