#include "distributed/TaskThread.h"
#include "base/check.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <vector>

using namespace glnet;

TEST_CASE("a task thread runs its tasks in order, off the caller's thread, and finish() waits for all of them") {
  TaskThread worker;
  std::vector<int> ran;  // written by the worker only; read after finish()
  std::atomic<bool> offCaller{true};
  const auto caller = std::this_thread::get_id();
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 50; ++i) {
      worker.add([&, i] {
        if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the caller reaches finish() first
        if (std::this_thread::get_id() == caller) offCaller = false;
        ran.push_back(round * 100 + i);
      });
    }
    worker.finish();
    REQUIRE(ran.size() == static_cast<std::size_t>(50 * (round + 1)));
    for (int i = 0; i < 50; ++i) CHECK(ran[static_cast<std::size_t>(round * 50 + i)] == round * 100 + i);
  }
  CHECK(offCaller);
}

TEST_CASE("a task thread's failure reaches finish() once, drops the tasks after it, and the thread goes on") {
  TaskThread worker;
  std::atomic<int> ran{0};
  worker.add([&] { ++ran; });
  worker.add([] { throw Error("rank 1 of 2: MPI_Allreduce failed"); });
  worker.add([&] { ran += 100; });
  CHECK_THROWS_WITH_AS(worker.finish(), "rank 1 of 2: MPI_Allreduce failed", Error);
  CHECK(ran == 1);
  worker.add([&] { ran += 10; });
  worker.finish();  // the failure was reported once
  CHECK(ran == 11);
}

TEST_CASE("a task thread destroyed with tasks queued runs them first") {
  std::atomic<int> ran{0};
  {
    TaskThread worker;
    for (int i = 0; i < 20; ++i) worker.add([&] { ++ran; });
  }
  CHECK(ran == 20);
}
