#include "gl/Program.h"
#include "gl/SelfCheck.h"
#include "gl/ShaderSource.h"
#include "gl/check.h"
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
    test::glContext();
    for (const std::size_t elements : {std::size_t{1}, std::size_t{255}, std::size_t{257}, std::size_t{100003},
                                       std::size_t{65535} * 256 + 77}) {
      CAPTURE(elements);
      const SelfCheckResult result = runSelfCheck(elements, 11u + static_cast<std::uint32_t>(elements));
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

  TEST_CASE("a missing shader is a clear error") {
    test::glContext();
    CHECK_THROWS_WITH_AS(Program::compute("NoSuchShader.glsl"), doctest::Contains("NoSuchShader.glsl"), Error);
  }
}
