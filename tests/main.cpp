#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "support/Random.h"

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  // The rule's tests expect the rule: a table this machine's glnet_bench --tune kept stays unread unless asked for
  // (tests/ops/GemmTuningTest.cpp turns tuning on for its own checks).
  setenv("GLNET_TUNE", "0", 0);
  std::printf("glnet tests: random seed %u (set GLNET_TEST_SEED to change it)\n", glnet::test::seed());
  doctest::Context context(argc, argv);
  return context.run();
}
