#include "gl/Program.h"

#include "gl/ShaderSource.h"
#include "gl/check.h"
#include "gl/log.h"

#include <glad/gl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <regex>
#include <sstream>
#include <utility>

namespace glnet {
namespace {

constexpr const char* commonFile = "common.glsl";

// The pieces of the compiled text in order, each with the absolute line it starts on. Drivers disagree on
// #line source-string numbers (Mesa reports 0 for some errors after `#line 1 2`), so errors are traced
// back by absolute line instead.
struct SourcePiece {
  std::string name;
  std::string text;
  int firstLine = 1;
};

int countLines(const std::string& text) { return static_cast<int>(std::count(text.begin(), text.end(), '\n')); }

std::string lineOf(const std::string& text, int line) {
  std::istringstream lines(text);
  std::string current;
  for (int i = 1; std::getline(lines, current); ++i) {
    if (i == line) return current;
  }
  return {};
}

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r");
  const auto last = text.find_last_not_of(" \t\r");
  return first == std::string::npos ? std::string() : text.substr(first, last - first + 1);
}

// Turns the first error of a driver's log (Mesa "2:14(3): error: ...", NVIDIA "2(14) : error C0000: ...")
// into "File.glsl:14: error: ... (source: `...`)"; the whole log goes to the debug log.
std::string describeCompileError(const std::string& log, const std::vector<SourcePiece>& pieces) {
  static const std::regex located(R"(^\s*(\d+)[:(](\d+)\)?(\(\d+\))?\s*:?\s*(.*)$)");
  std::istringstream lines(log);
  std::string line;
  int errors = 0;
  std::string first;
  while (std::getline(lines, line)) {
    std::smatch match;
    if (!std::regex_match(line, match, located)) continue;
    const std::string message = trim(match[4].str());
    if (message.find("error") == std::string::npos) continue;
    ++errors;
    if (!first.empty()) continue;
    const int absolute = std::stoi(match[2].str());
    const SourcePiece* piece = &pieces.front();
    for (const SourcePiece& candidate : pieces) {
      if (candidate.firstLine <= absolute) piece = &candidate;
    }
    const int number = absolute - piece->firstLine + 1;
    first = piece->name + ":" + std::to_string(number) + ": " + message;
    const std::string source = trim(lineOf(piece->text, number));
    if (!source.empty()) first += " (source: `" + source + "`)";
  }
  if (first.empty()) return pieces.back().name + ": " + trim(log);
  if (errors > 1) first += " (and " + std::to_string(errors - 1) + " more errors; GLNET_DEBUG=1 shows the log)";
  return first;
}

bool isIdentifier(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (unsigned char c : name) {
    if (!std::isalnum(c) && c != '_') return false;
  }
  return true;
}

std::string infoLog(GLuint object, bool isProgram) {
  GLint length = 0;
  isProgram ? glGetProgramiv(object, GL_INFO_LOG_LENGTH, &length) : glGetShaderiv(object, GL_INFO_LOG_LENGTH, &length);
  std::string text(static_cast<std::size_t>(length > 0 ? length : 1), '\0');
  isProgram ? glGetProgramInfoLog(object, length, nullptr, text.data())
            : glGetShaderInfoLog(object, length, nullptr, text.data());
  return text.c_str();
}

}  // namespace

Program Program::compute(const std::string& file, const std::vector<ShaderDefine>& defines,
                         const std::vector<std::string>& includes) {
  const auto start = std::chrono::steady_clock::now();
  std::ostringstream prologue;
  prologue << "#version 430 core\n";
  for (const ShaderDefine& define : defines) {
    GLNET_ASSERT(isIdentifier(define.name), "shader define names must be identifiers: " + define.name);
    GLNET_ASSERT(define.value.find('\n') == std::string::npos, "shader define values are one line");
    prologue << "#define " << define.name << ' ' << define.value << '\n';
  }
  std::vector<SourcePiece> pieces{{file + " (injected defines)", prologue.str()}, {commonFile, shaderSource(commonFile)}};
  for (const std::string& include : includes) pieces.push_back({include, shaderSource(include)});
  pieces.push_back({file, shaderSource(file)});
  std::string text;
  int line = 1;
  for (SourcePiece& piece : pieces) {
    if (piece.text.empty() || piece.text.back() != '\n') piece.text += '\n';
    piece.firstLine = line;
    line += countLines(piece.text);
    text += piece.text;
  }

  const GLuint shaderObject = glCreateShader(GL_COMPUTE_SHADER);
  const char* pointer = text.c_str();
  glShaderSource(shaderObject, 1, &pointer, nullptr);
  glCompileShader(shaderObject);
  GLint ok = 0;
  glGetShaderiv(shaderObject, GL_COMPILE_STATUS, &ok);
  if (!ok) {
    const std::string log = infoLog(shaderObject, false);
    glDeleteShader(shaderObject);
    log::debug("compile log of " + file + ":\n" + log);
    throw Error(describeCompileError(log, pieces));
  }
  Program program;
  program.name_ = file;
  program.id_ = glCreateProgram();
  glAttachShader(program.id_, shaderObject);
  glLinkProgram(program.id_);
  glDetachShader(program.id_, shaderObject);
  glDeleteShader(shaderObject);
  glGetProgramiv(program.id_, GL_LINK_STATUS, &ok);
  if (!ok) throw Error(file + ": link failed: " + trim(infoLog(program.id_, true)));
  GL_CHECK(glGetProgramiv(program.id_, GL_COMPUTE_WORK_GROUP_SIZE, program.localSize_.data()));
  program.compileMilliseconds_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  log::debug("compiled " + file + " in " + std::to_string(program.compileMilliseconds_) + " ms");
  return program;
}

Program::~Program() {
  if (id_) glDeleteProgram(id_);
}

Program::Program(Program&& other) noexcept
    : id_(std::exchange(other.id_, 0u)),
      name_(std::move(other.name_)),
      localSize_(other.localSize_),
      compileMilliseconds_(other.compileMilliseconds_) {}

Program& Program::operator=(Program&& other) noexcept {
  if (this != &other) {
    if (id_) glDeleteProgram(id_);
    id_ = std::exchange(other.id_, 0u);
    name_ = std::move(other.name_);
    localSize_ = other.localSize_;
    compileMilliseconds_ = other.compileMilliseconds_;
  }
  return *this;
}

}  // namespace glnet
