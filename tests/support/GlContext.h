// The one headless context shared by every GL test in this process (docs/ARCHITECTURE.md, "Testing principles").
#pragma once

#include "gl/Buffer.h"
#include "gl/Context.h"

#include <algorithm>

namespace glnet::test {

// Created on first use on the default device (GLNET_DEVICE chooses another), with KHR_debug on.
Context& glContext();

// A kernel's output buffer of `floats` floats (at least one), every word the NaN of nanPoison, so that an element the
// kernel leaves unwritten fails the comparison.
inline Buffer poisoned(std::size_t floats) {
  Buffer buffer(std::max<std::size_t>(floats, 1) * sizeof(float));
  buffer.fill(0x7fc00000u);
  return buffer;
}

}  // namespace glnet::test
