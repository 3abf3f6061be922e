#include "gl/Program.h"
#include "plan/SelfCheck.h"
#include "gl/ShaderSource.h"
#include "base/check.h"
#include "plan/Plan.h"

#include <glad/gl.h>
#include "support/GlContext.h"

#include <doctest/doctest.h>

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
    const ShaderDirectory directory("Broken.glsl",
                                    "layout(local_size_x = 1) in;\n"
                                    "void main() {\n"
                                    "  float x = 1.0 +* ;\n"
                                    "}\n");
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
      Dispatch d;
      d.program = &program;
      d.buffers = {{0, x, Access::read}, {1, y, Access::readWrite}};
      d.uniforms = {Uniform::f32(0, 2.0f), Uniform::u32(1, 3)};
      plan.record(d);
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
