// The one headless context shared by every GL test in this process (docs/ARCHITECTURE.md, "Testing principles").
#pragma once

#include "gl/Context.h"

namespace glnet::test {

// Created on first use on the default device (GLNET_DEVICE chooses another), with KHR_debug on.
Context& glContext();

}  // namespace glnet::test
