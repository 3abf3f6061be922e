#include "base/ParallelCopy.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>

using namespace glnet;

TEST_CASE("a parallel copy moves every byte exactly, at sizes that do not split evenly, many times over") {
  auto random = test::generator(7);
  for (const unsigned threads : {1u, 2u, 5u}) {
    CAPTURE(threads);
    ParallelCopy copier(threads);
    CHECK(copier.threads() == threads);
    for (const std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{65}, std::size_t{64 * 5 + 1},
                                   std::size_t{1000003}}) {
      CAPTURE(size);
      for (int repeat = 0; repeat < 3; ++repeat) {
        const std::vector<std::uint8_t> from = test::randomBytes(random, size);
        std::vector<std::uint8_t> to(size + 1, 0xA5);
        copier.copy(to.data(), from.data(), size);
        CHECK(std::equal(from.begin(), from.end(), to.begin()));  // memcmp may not take an empty vector's null data
        CHECK(to[size] == 0xA5);  // nothing written past the end
      }
    }
  }
}

TEST_CASE("stripes cover a range once, in whole 64-byte lines but the last, one call per thread at most") {
  for (const unsigned threads : {1u, 3u, 4u}) {
    CAPTURE(threads);
    ParallelCopy pool(threads);
    for (const std::size_t size : {std::size_t{1}, std::size_t{64}, std::size_t{64 * 7 + 5}, std::size_t{100000}}) {
      CAPTURE(size);
      std::vector<int> visits(size, 0);
      std::mutex mutex;
      std::vector<std::pair<std::size_t, std::size_t>> stripes;
      pool.forEachStripe(size, [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) ++visits[i];  // disjoint stripes: no two threads touch one element
        const std::lock_guard<std::mutex> lock(mutex);
        stripes.emplace_back(begin, end);
      });
      CHECK(std::all_of(visits.begin(), visits.end(), [](int count) { return count == 1; }));
      CHECK(stripes.size() <= threads);
      for (const auto& [begin, end] : stripes) {
        CHECK(begin % 64 == 0);
        CHECK((end % 64 == 0 || end == size));
      }
    }
  }
}
