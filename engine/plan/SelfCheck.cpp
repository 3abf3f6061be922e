#include "plan/SelfCheck.h"

#include "gl/Buffer.h"
#include "base/Stopwatch.h"
#include "gl/Sync.h"
#include "plan/Groups.h"
#include "plan/Plan.h"

#include <cmath>
#include <random>
#include <vector>

namespace glnet {

SelfCheckResult runSelfCheck(const Context& context, std::size_t elements, std::uint32_t seed) {
  SelfCheckResult result;
  result.elements = elements;
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(elements), y(elements);
  for (std::size_t i = 0; i < elements; ++i) {
    x[i] = uniform(random);
    y[i] = uniform(random);
  }
  const float a = uniform(random);

  const Program saxpy = Program::compute("Saxpy.glsl");
  result.compileMilliseconds = saxpy.compileMilliseconds();
  Stopwatch stopwatch;
  Buffer xBuffer = Buffer::of(x);
  Buffer yBuffer = Buffer::of(y);
  Fence().wait();
  result.uploadMilliseconds = stopwatch.restart();

  Plan plan(context.limits());
  Dispatch dispatch;
  dispatch.program = &saxpy;
  dispatch.label = "saxpy";
  dispatch.buffers = {{0, xBuffer, Access::read}, {1, yBuffer, Access::readWrite}};
  dispatch.uniforms = {Uniform::f32(0, a), Uniform::u32(1, static_cast<std::uint32_t>(elements))};
  dispatch.invocations = elements;
  dispatch.linear = true;
  plan.record(dispatch);
  TimerQuery before, after;
  before.record();
  plan.run();
  after.record();

  stopwatch.restart();
  std::vector<float> gpu(elements);
  plan.read(yBuffer, gpu.data(), elements * sizeof(float));
  result.readbackMilliseconds = stopwatch.milliseconds();
  result.dispatchGpuMilliseconds = gpuMilliseconds(before, after);

  for (std::size_t i = 0; i < elements; ++i) {
    const double reference = static_cast<double>(a) * x[i] + y[i];
    const double error = std::abs(gpu[i] - reference);
    result.maxAbsoluteError = std::max(result.maxAbsoluteError, error);
    if (!(error <= 1e-6 + 1e-6 * std::abs(reference))) ++result.mismatches;
  }
  return result;
}

}  // namespace glnet
