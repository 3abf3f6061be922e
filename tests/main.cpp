#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "support/Random.h"

#include <cstdio>

int main(int argc, char** argv) {
  std::printf("glnet tests: random seed %u (set GLNET_TEST_SEED to change it)\n", glnet::test::seed());
  doctest::Context context(argc, argv);
  return context.run();
}
