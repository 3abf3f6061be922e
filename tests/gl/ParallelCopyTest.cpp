#include "gl/ParallelCopy.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

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
