#include "gl/SelfCheck.h"

#include "gl/Buffer.h"
#include "gl/Program.h"
#include "gl/Sync.h"

#include <glad/gl.h>

#include <chrono>
#include <cmath>
#include <random>
#include <vector>

namespace glnet {
namespace {
double millisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

SelfCheckResult runSelfCheck(std::size_t elements, std::uint32_t seed) {
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
  auto start = std::chrono::steady_clock::now();
  Buffer xBuffer = Buffer::of(x);
  Buffer yBuffer = Buffer::of(y);
  Fence uploaded;
  uploaded.wait();
  result.uploadMilliseconds = millisecondsSince(start);

  const auto groups = static_cast<GLuint>((elements + saxpy.localSize()[0] - 1) / saxpy.localSize()[0]);
  const GLuint rows = (groups + 65534) / 65535;
  glUseProgram(saxpy.id());
  glProgramUniform1f(saxpy.id(), 0, a);
  glProgramUniform1ui(saxpy.id(), 1, static_cast<GLuint>(elements));
  glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 0, xBuffer.id());
  glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 1, yBuffer.id());
  TimerQuery before, after;
  before.record();
  glDispatchCompute(rows > 1 ? 65535 : groups, rows, 1);
  after.record();

  start = std::chrono::steady_clock::now();
  const std::vector<float> gpu = yBuffer.read<float>();
  result.readbackMilliseconds = millisecondsSince(start);
  result.dispatchGpuMilliseconds = static_cast<double>(after.nanoseconds() - before.nanoseconds()) / 1e6;

  for (std::size_t i = 0; i < elements; ++i) {
    const double reference = static_cast<double>(a) * x[i] + y[i];
    const double error = std::abs(gpu[i] - reference);
    result.maxAbsoluteError = std::max(result.maxAbsoluteError, error);
    if (!(error <= 1e-6 + 1e-6 * std::abs(reference))) ++result.mismatches;
  }
  return result;
}

}  // namespace glnet
