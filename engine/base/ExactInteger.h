// Integer tensors (token ids, attention masks, indices) are held on the GPU as float32, which holds every integer of
// magnitude up to 2^24 exactly; larger ones are refused where they are read, never rounded.
#pragma once

#include <cstdint>

namespace glnet {

constexpr std::int64_t largestExactInteger = std::int64_t{1} << 24;

constexpr bool exactAsFloat(std::int64_t v) { return v >= -largestExactInteger && v <= largestExactInteger; }

}  // namespace glnet
