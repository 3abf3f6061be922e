#include "gl/Program.h"
#include "plan/SelfCheck.h"
#include "gl/ShaderSource.h"
#include "base/check.h"
#include "plan/Plan.h"
#include "plan/ProgramCache.h"

#include <glad/gl.h>
#include "support/EnvironmentSetting.h"
#include "support/GlContext.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <unistd.h>

using namespace glnet;

namespace {

// A GLNET_SHADER_DIR holding common.glsl and the given shader, set for the lifetime of the object.
class ShaderDirectory {
 public:
  ShaderDirectory(const std::string& name, const std::string& text)
      : path_(std::filesystem::temp_directory_path() / ("glnet-shaders-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
    std::ofstream(path_ / "common.glsl") << embeddedShaders().at("common.glsl");
    std::ofstream(path_ / name) << text;
    setenv("GLNET_SHADER_DIR", path_.c_str(), 1);
  }
  ~ShaderDirectory() {
    unsetenv("GLNET_SHADER_DIR");
    std::filesystem::remove_all(path_);
  }

 private:
  std::filesystem::path path_;
};

// A compute shader whose third line does not parse.
constexpr const char* brokenShader =
    "layout(local_size_x = 1) in;\n"
    "void main() {\n"
    "  float x = 1.0 +* ;\n"
    "}\n";

// y += 2x over three elements with Saxpy.glsl's `program`.
Dispatch twiceXAddedToY(const Program& program, Buffer& x, Buffer& y) {
  Dispatch d;
  d.program = &program;
  d.buffers = {{0, x, Access::read}, {1, y, Access::readWrite}};
  d.uniforms = {Uniform::f32(0, 2.0f), Uniform::u32(1, 3)};
  return d;
}

}  // namespace

TEST_SUITE("gl") {
  TEST_CASE("a dispatch computes y = a*x + y exactly as the CPU does, at sizes beyond one group row") {
    const Context& context = test::glContext();
    for (const std::size_t elements : {std::size_t{1}, std::size_t{255}, std::size_t{257}, std::size_t{100003},
                                       std::size_t{65535} * 256 + 77}) {
      CAPTURE(elements);
      const SelfCheckResult result = runSelfCheck(context, elements, 11u + static_cast<std::uint32_t>(elements));
      CHECK(result.mismatches == 0u);
      CHECK(result.maxAbsoluteError <= 2e-6);
    }
  }

  TEST_CASE("a shader syntax error names the file and line with the offending source") {
    test::glContext();
    const ShaderDirectory directory("Broken.glsl", brokenShader);
    try {
      Program::compute("Broken.glsl");
      FAIL("expected a compile error");
    } catch (const Error& error) {
      const std::string message = error.what();
      INFO(message);
      CHECK(message.rfind("Broken.glsl:3:", 0) == 0);
      CHECK(message.find("float x = 1.0 +* ;") != std::string::npos);
      CHECK(message.find('\n') == std::string::npos);
    }
  }

  TEST_CASE("a started program with a syntax error fails where it is finished, with compute's message, every time") {
    test::glContext();
    const ShaderDirectory directory("Broken.glsl", brokenShader);
    std::string eager;
    try {
      Program::compute("Broken.glsl");
    } catch (const Error& error) {
      eager = error.what();
    }
    REQUIRE(eager.rfind("Broken.glsl:3:", 0) == 0);
    const Program started = Program::start("Broken.glsl");
    CHECK(started.pending());
    CHECK_THROWS_WITH_AS(started.finish(), eager.c_str(), Error);
    CHECK_THROWS_WITH_AS(started.localSize(), eager.c_str(), Error);
    // A plan that records it fails at its first run with the same line, and again at the next.
    Buffer x = Buffer::of(std::vector<float>{1});
    Plan plan(test::glContext().limits());
    Dispatch d;
    d.program = &started;
    d.buffers = {{0, x, Access::readWrite}};
    plan.record(d);
    CHECK_THROWS_WITH_AS(plan.finishPrograms(), eager.c_str(), Error);
    CHECK_THROWS_WITH_AS(plan.run(), eager.c_str(), Error);
    CHECK_THROWS_WITH_AS(plan.run(), eager.c_str(), Error);
  }

  TEST_CASE("programs started side by side are finished by the plan that runs them and compute what compute's do") {
    test::glContext();
    const test::TempDir directory;
    const test::EnvironmentSetting cache("GLNET_CACHE_DIR", directory.path().string());
    std::vector<Program> started;
    for (int i = 0; i < 6; ++i) {
      started.push_back(Program::start("Saxpy.glsl", {{"LOCAL_SIZE_X", std::to_string(32 << (i % 3))},
                                                        {"START_PROBE", std::to_string(::getpid() * 8 + i)}}));
    }
    for (const Program& program : started) CHECK(program.pending() != program.fromBinaryCache());
    Buffer x = Buffer::of(std::vector<float>{1, 2, 3}), y = Buffer::of(std::vector<float>{10, 20, 30});
    Plan plan(test::glContext().limits());
    for (const Program& program : started) plan.record(twiceXAddedToY(program, x, y));
    plan.run();
    // Six times y += 2x.
    CHECK(y.read<float>() == std::vector<float>{22, 44, 66});
    for (std::size_t i = 0; i < started.size(); ++i) {
      CAPTURE(i);
      CHECK_FALSE(started[i].pending());
      CHECK(started[i].localSize()[0] == (32 << (i % 3)));
      CHECK(started[i].compileMilliseconds() >= 0.0);
    }
    // Started again, each comes from the binary cache its first finish stored (where the driver has binaries).
    GLint formats = 0;
    glGetIntegerv(GL_NUM_PROGRAM_BINARY_FORMATS, &formats);
    const Program again = Program::start("Saxpy.glsl", {{"LOCAL_SIZE_X", "32"}, {"START_PROBE", std::to_string(::getpid() * 8)}});
    CHECK(again.fromBinaryCache() == (formats > 0));
  }

  TEST_CASE("a program cache counts the time programs compiled side by side once") {
    test::glContext();
    // Sources no binary cache holds (a cached binary is ready at its start), so that both compile.
    const test::TempDir directory;
    const test::EnvironmentSetting cache("GLNET_CACHE_DIR", directory.path().string());
    ProgramCache programs;
    const Program& first = programs.get("Saxpy.glsl", {{"LOCAL_SIZE_X", "64"}});
    const Program& second = programs.get("Saxpy.glsl", {{"LOCAL_SIZE_X", "128"}});
    CHECK(&programs.get("Saxpy.glsl", {{"LOCAL_SIZE_X", "64"}}) == &first);
    const std::vector<std::pair<std::string, double>> times = programs.compileTimes();
    REQUIRE(times.size() == 2);
    CHECK(times[0].first.find("LOCAL_SIZE_X=64") != std::string::npos);
    CHECK(times[1].first.find("LOCAL_SIZE_X=128") != std::string::npos);
    const double overlapping = first.compileMilliseconds() + second.compileMilliseconds();
    const double longest = std::max(first.compileMilliseconds(), second.compileMilliseconds());
    // Both were started before either was finished: their spans overlap, counted once.
    CHECK(programs.compileMilliseconds() < overlapping);
    CHECK(programs.compileMilliseconds() >= longest - 1e-9);
  }

  TEST_CASE("injected defines reach the shader and the declared local size is reported") {
    test::glContext();
    const Program program = Program::compute("Saxpy.glsl", {{"LOCAL_SIZE_X", "64"}});
    CHECK(program.localSize()[0] == 64);
    CHECK(program.localSize()[1] == 1);
  }

  TEST_CASE("linked binaries are cached on disk and reused; a corrupt entry or GLNET_CACHE=0 compiles afresh") {
    test::glContext();
    const auto directory = std::filesystem::temp_directory_path() / ("glnet-cache-" + std::to_string(::getpid()));
    setenv("GLNET_CACHE_DIR", directory.c_str(), 1);
    const std::vector<ShaderDefine> unique = {{"LOCAL_SIZE_X", "32"}, {"CACHE_PROBE", std::to_string(::getpid())}};
    GLint formats = 0;
    glGetIntegerv(GL_NUM_PROGRAM_BINARY_FORMATS, &formats);
    // Every variant must compute y = a·x + y.
    const auto works = [](const Program& program) {
      Buffer x = Buffer::of(std::vector<float>{1, 2, 3}), y = Buffer::of(std::vector<float>{10, 20, 30});
      Plan plan(test::glContext().limits());
      plan.record(twiceXAddedToY(program, x, y));
      plan.run();
      return y.read<float>() == std::vector<float>{12, 24, 36};
    };
    const Program first = Program::compute("Saxpy.glsl", unique);
    CHECK_FALSE(first.fromBinaryCache());
    CHECK(works(first));
    const Program second = Program::compute("Saxpy.glsl", unique);
    CHECK(second.fromBinaryCache() == (formats > 0));
    CHECK(works(second));
    for (const auto& entry : std::filesystem::directory_iterator(directory)) std::ofstream(entry.path()) << "garbage";
    const Program third = Program::compute("Saxpy.glsl", unique);
    CHECK_FALSE(third.fromBinaryCache());
    CHECK(works(third));
    setenv("GLNET_CACHE", "0", 1);
    CHECK(Program::binaryCacheDirectory().empty());
    CHECK_FALSE(Program::compute("Saxpy.glsl", unique).fromBinaryCache());
    unsetenv("GLNET_CACHE");
    unsetenv("GLNET_CACHE_DIR");
    std::filesystem::remove_all(directory);
  }

  TEST_CASE("a kernel that binds more storage buffers than the device allows fails naming the limit") {
    test::glContext();
    std::string declarations;
    const int blocks = currentLimits().maxComputeStorageBlocks + 1;
    for (int i = 0; i < blocks; ++i) {
      declarations += "layout(std430, binding = " + std::to_string(i) + ") buffer B" + std::to_string(i) +
                      " { float v" + std::to_string(i) + "[]; };\n";
    }
    std::string body = "void main() {\n";
    for (int i = 0; i < blocks; ++i) body += "  v" + std::to_string(i) + "[gl_GlobalInvocationID.x] = 1.0;\n";
    const ShaderDirectory directory("ManyBlocks.glsl", "layout(local_size_x = 64) in;\n" + declarations + body + "}\n");
    try {
      Program::compute("ManyBlocks.glsl");
      FAIL("expected glnet::Error");
    } catch (const Error& error) {
      const std::string message = error.what();
      INFO(message);
      // The driver may refuse it at link already (real limit), or glnet after the link (a limit it keeps to).
      CHECK((message.find("GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS") != std::string::npos ||
             message.find("ManyBlocks.glsl") != std::string::npos));
    }
  }

  TEST_CASE("a missing shader is a clear error") {
    test::glContext();
    CHECK_THROWS_WITH_AS(Program::compute("NoSuchShader.glsl"), doctest::Contains("NoSuchShader.glsl"), Error);
  }
}
