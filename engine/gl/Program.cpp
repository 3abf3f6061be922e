#include "gl/Program.h"

#include "gl/Api.h"
#include "base/AtomicFile.h"
#include "gl/Limits.h"
#include "gl/ShaderSource.h"
#include "base/check.h"
#include "gl/GlCheck.h"
#include "base/log.h"

#include <glad/gl.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <chrono>
#include <regex>
#include <sstream>
#include <thread>
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

// FNV-1a: a stable 64-bit hash for cache file names (std::hash may differ between library builds).
std::uint64_t stableHash(const std::string& text) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (const unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

std::string glString(GLenum name) {
  const auto* value = reinterpret_cast<const char*>(glGetString(name));
  return value ? value : "";
}

// The cache file of this source on this device and driver, or empty when binaries cannot be cached.
std::filesystem::path binaryCachePath(const std::string& source) {
  const std::string directory = Program::binaryCacheDirectory();
  GLint formats = 0;
  glGetIntegerv(GL_NUM_PROGRAM_BINARY_FORMATS, &formats);
  if (directory.empty() || formats <= 0) return {};
  char name[24];
  std::snprintf(name, sizeof name, "%016llx.bin", static_cast<unsigned long long>(stableHash(source)));
  return std::filesystem::path(directory) / (Program::deviceCacheName() + name);
}

bool loadBinary(GLuint program, const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return false;
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (bytes.size() <= sizeof(GLenum)) return false;
  GLenum format = 0;
  std::memcpy(&format, bytes.data(), sizeof format);
  glProgramBinary(program, format, bytes.data() + sizeof format, static_cast<GLsizei>(bytes.size() - sizeof format));
  GLint linked = 0;
  glGetProgramiv(program, GL_LINK_STATUS, &linked);
  while (glGetError() != GL_NO_ERROR) {
  }
  return linked != 0;
}

void storeBinary(GLuint program, const std::filesystem::path& path) {
  GLint length = 0;
  glGetProgramiv(program, GL_PROGRAM_BINARY_LENGTH, &length);
  if (length <= 0) return;
  std::string bytes(sizeof(GLenum) + static_cast<std::size_t>(length), '\0');
  GLenum format = 0;
  glGetProgramBinary(program, length, nullptr, &format, bytes.data() + sizeof format);
  std::memcpy(bytes.data(), &format, sizeof format);
  try {
    std::filesystem::create_directories(path.parent_path());
    writeFileAtomically(path.string(), bytes);
  } catch (const std::exception& error) {
    log::debug(std::string("program binary not cached: ") + error.what());
  }
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

// The prologue, common.glsl, the includes and the shader, each piece ending in a newline and knowing its
// first line in the whole text.
std::vector<SourcePiece> sourcePieces(const std::string& file, const std::vector<ShaderDefine>& defines,
                                      const std::vector<std::string>& includes, Api api) {
  std::ostringstream prologue;
  // ES has no default float precision in compute shaders, and mediump would silently break fp32 results.
  prologue << (api == Api::gles ? "#version 310 es\nprecision highp float;\nprecision highp int;\n#define GLNET_ES 1\n"
                                : "#version 430 core\n");
  prologue << "#define GLNET_GROUP_SIZE " << currentLimits().groupSize() << "\n" << allKindDefines();
  for (const ShaderDefine& define : defines) {
    GLNET_ASSERT(isIdentifier(define.name), "shader define names must be identifiers: " + define.name);
    GLNET_ASSERT(define.value.find('\n') == std::string::npos, "shader define values are one line");
    prologue << "#define " << define.name << ' ' << define.value << '\n';
  }
  std::vector<SourcePiece> pieces{{file + " (injected defines)", prologue.str()}, {commonFile, shaderSource(commonFile)}};
  for (const std::string& include : includes) pieces.push_back({include, shaderSource(include)});
  pieces.push_back({file, shaderSource(file)});
  int line = 1;
  for (SourcePiece& piece : pieces) {
    if (piece.text.empty() || piece.text.back() != '\n') piece.text += '\n';
    piece.firstLine = line;
    line += countLines(piece.text);
  }
  return pieces;
}

std::string joined(const std::vector<SourcePiece>& pieces) {
  std::string text;
  for (const SourcePiece& piece : pieces) text += piece.text;
  return text;
}

// GLNET_SHADER_DUMP: every program built is written there once per API, named by shader and source hash.
void dumpForValidation(const std::string& file, const std::vector<ShaderDefine>& defines,
                       const std::vector<std::string>& includes) {
  const char* directory = std::getenv("GLNET_SHADER_DUMP");
  if (!directory || !*directory) return;
  for (const Api api : {Api::gl, Api::gles}) {
    const std::string text = joined(sourcePieces(file, defines, includes, api));
    char name[24];
    std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(stableHash(text)));
    const std::filesystem::path path =
        std::filesystem::path(directory) / (file.substr(0, file.find('.')) + "-" + name + "." + apiName(api) + ".comp");
    try {
      std::filesystem::create_directories(path.parent_path());
      if (!std::filesystem::exists(path)) writeFileAtomically(path.string(), text);
    } catch (const std::exception& error) {
      throw Error("GLNET_SHADER_DUMP: could not write " + path.string() + ": " + error.what());
    }
  }
}

}  // namespace

// What a started program keeps until it is finished: its shader (for the compile log), its text's pieces (to place
// an error), where its binary goes, and when it started.
struct Program::PendingLink {
  GLuint shader = 0;  // deleted with the link, or once the link is checked
  std::vector<SourcePiece> pieces;
  std::filesystem::path cached;
  std::string failure;  // set once finishing failed: thrown again by every later finish
  ~PendingLink() { deleteShader(); }
  void deleteShader() {
    if (shader) glDeleteShader(shader);
    shader = 0;
  }
};

Program Program::compute(const std::string& file, const std::vector<ShaderDefine>& defines,
                         const std::vector<std::string>& includes) {
  Program program = start(file, defines, includes);
  program.finish();
  return program;
}

Program Program::start(const std::string& file, const std::vector<ShaderDefine>& defines,
                       const std::vector<std::string>& includes) {
  const auto startedAt = std::chrono::steady_clock::now();
  auto pending = std::make_unique<PendingLink>();
  dumpForValidation(file, defines, includes);
  pending->pieces = sourcePieces(file, defines, includes, currentApi());
  const std::string text = joined(pending->pieces);

  Program program;
  program.name_ = file;
  program.startedAt_ = startedAt;
  program.id_ = glCreateProgram();
  pending->cached = binaryCachePath(text);
  program.fromBinaryCache_ = !pending->cached.empty() && loadBinary(program.id_, pending->cached);
  if (!program.fromBinaryCache_) {
    // No status is asked here: asking would wait for this compile before the next one starts.
    pending->shader = glCreateShader(GL_COMPUTE_SHADER);
    const char* pointer = text.c_str();
    glShaderSource(pending->shader, 1, &pointer, nullptr);
    glCompileShader(pending->shader);
    glProgramParameteri(program.id_, GL_PROGRAM_BINARY_RETRIEVABLE_HINT, GL_TRUE);
    glAttachShader(program.id_, pending->shader);
    glLinkProgram(program.id_);
  }
  program.pending_ = std::move(pending);
  // A binary from the cache is linked already: finished now, its time is its load's.
  if (program.fromBinaryCache_) program.finish();
  return program;
}

void Program::finish() const {
  if (!pending_) return;
  PendingLink& pending = *pending_;
  if (!pending.failure.empty()) throw Error(pending.failure);
  try {
    if (pending.shader) {
      GLint ok = 0;
      glGetShaderiv(pending.shader, GL_COMPILE_STATUS, &ok);
      if (!ok) {
        const std::string log = infoLog(pending.shader, false);
        log::debug("compile log of " + name_ + ":\n" + log);
        throw Error(describeCompileError(log, pending.pieces));
      }
      glGetProgramiv(id_, GL_LINK_STATUS, &ok);
      if (!ok) throw Error(name_ + ": link failed: " + trim(infoLog(id_, true)));
      glDetachShader(id_, pending.shader);
      pending.deleteShader();
      if (!pending.cached.empty()) storeBinary(id_, pending.cached);
    }
    GL_CHECK(glGetProgramiv(id_, GL_COMPUTE_WORK_GROUP_SIZE, localSize_.data()));
    // A device may link a kernel past a limit glnet was told to keep to (ContextOptions::minimumDevice).
    GLint blocks = 0;
    GL_CHECK(glGetProgramInterfaceiv(id_, GL_SHADER_STORAGE_BLOCK, GL_ACTIVE_RESOURCES, &blocks));
    if (currentLimits().maxComputeStorageBlocks > 0 && blocks > currentLimits().maxComputeStorageBlocks) {
      throw Error(name_ + " binds " + std::to_string(blocks) + " storage buffers; this device allows " +
                  std::to_string(currentLimits().maxComputeStorageBlocks) +
                  " per compute shader (GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS)");
    }
  } catch (const Error& error) {
    pending.deleteShader();
    pending.failure = error.what();
    throw;
  }
  readyAt_ = std::chrono::steady_clock::now();
  pending_.reset();
  log::debug((fromBinaryCache_ ? "loaded the cached binary of " : "compiled ") + name_ + " in " +
             std::to_string(compileMilliseconds()) + " ms");
}

bool Program::ready() const {
  if (!pending_ || !pending_->failure.empty() || !currentLimits().parallelCompile) return true;
  GLint done = GL_TRUE;
  glGetProgramiv(id_, GL_COMPLETION_STATUS_KHR, &done);
  return done != GL_FALSE;
}

void finishPrograms(std::vector<const Program*> programs) {
  while (!programs.empty()) {
    const auto waiting = std::stable_partition(programs.begin(), programs.end(), [](const Program* p) { return !p->ready(); });
    if (waiting == programs.end()) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    for (auto done = waiting; done != programs.end(); ++done) (*done)->finish();
    programs.erase(waiting, programs.end());
  }
}

const std::array<int, 3>& Program::localSize() const {
  finish();
  return localSize_;
}

std::chrono::steady_clock::time_point Program::readyAt() const {
  finish();
  return readyAt_;
}

double Program::compileMilliseconds() const {
  return std::chrono::duration<double, std::milli>(readyAt() - startedAt_).count();
}

std::string Program::deviceCacheName() {
  const std::string identity = glString(GL_VENDOR) + "\n" + glString(GL_RENDERER) + "\n" + glString(GL_VERSION) + "\n";
  char name[20];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(stableHash(identity)));
  return name;
}

std::string Program::binaryCacheDirectory() {
  const char* enabled = std::getenv("GLNET_CACHE");
  if (enabled && std::string(enabled) == "0") return {};
  if (const char* directory = std::getenv("GLNET_CACHE_DIR"); directory && *directory) return directory;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/glnet";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/glnet";
  return {};
}

Program::~Program() {
  pending_.reset();
  if (id_) glDeleteProgram(id_);
}

Program::Program(Program&& other) noexcept
    : id_(std::exchange(other.id_, 0u)),
      name_(std::move(other.name_)),
      localSize_(other.localSize_),
      startedAt_(other.startedAt_),
      readyAt_(other.readyAt_),
      fromBinaryCache_(other.fromBinaryCache_),
      pending_(std::move(other.pending_)) {}

Program& Program::operator=(Program&& other) noexcept {
  if (this != &other) {
    pending_.reset();
    if (id_) glDeleteProgram(id_);
    id_ = std::exchange(other.id_, 0u);
    name_ = std::move(other.name_);
    localSize_ = other.localSize_;
    startedAt_ = other.startedAt_;
    readyAt_ = other.readyAt_;
    fromBinaryCache_ = other.fromBinaryCache_;
    pending_ = std::move(other.pending_);
  }
  return *this;
}

}  // namespace glnet
