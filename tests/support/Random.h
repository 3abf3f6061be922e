// Seeded random inputs for tests: fixed by default, GLNET_TEST_SEED overrides, printed at start-up.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

namespace glnet::test {

inline std::uint32_t seed() {
  const char* text = std::getenv("GLNET_TEST_SEED");
  return text && *text ? static_cast<std::uint32_t>(std::strtoul(text, nullptr, 10)) : 20261121u;
}

// A generator per test case, offset so test cases do not share streams.
inline std::mt19937 generator(std::uint32_t stream) { return std::mt19937(seed() * 7919u + stream); }

inline std::vector<float> uniformFloats(std::mt19937& random, std::size_t count, float low = -1.0f, float high = 1.0f) {
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> values(count);
  for (float& value : values) value = uniform(random);
  return values;
}

inline std::vector<std::uint8_t> randomBytes(std::mt19937& random, std::size_t count) {
  std::vector<std::uint8_t> bytes(count);
  for (auto& byte : bytes) byte = static_cast<std::uint8_t>(random() >> 24);
  return bytes;
}

}  // namespace glnet::test
