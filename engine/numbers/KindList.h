// The machinery of the kind lists: each kind whose number a shader sees is one X-macro list, a row per kind
// X(cppName, GLSL_SUFFIX, "printable name", more columns...), from which come the C++ enum (0, 1, ... in list order),
// its names, its count and the GLSL `#define <DEFINE>_<GLSL_SUFFIX> <number>` lines that every program's prologue
// holds (gl/Program.cpp), so shaders compare `#if POINTWISE == POINTWISE_ERF`, never a number. The lists:
// numbers/*Kinds.h and numbers/Activation.h, gathered by allKindDefines() in numbers/KindList.cpp.
#pragma once

#include "base/check.h"

#include <cstddef>
#include <optional>
#include <string>

namespace glnet {

// Specialised by GLNET_KIND_LIST for each list: define (the shader's define that receives it), count, names, glsl.
template <class Kind>
struct KindList;

// Row projections of the first three columns; a list may add columns after them (`...` takes them, and takes the
// name too so that a three-column row leaves `...` no empty argument, which C++17 forbids).
#define GLNET_KIND_ENUMERATOR(cpp, ...) cpp,
#define GLNET_KIND_NAME(cpp, glsl, ...) GLNET_KIND_FIRST(__VA_ARGS__, unused),
#define GLNET_KIND_GLSL(cpp, glsl, ...) #glsl,
#define GLNET_KIND_ONE(cpp, ...) +1
#define GLNET_KIND_FIRST(first, ...) first

// enum class KIND and its KindList from LIST(X), the shader receiving it as DEFINE.
#define GLNET_KIND_LIST(KIND, LIST, DEFINE)                                                                          \
  enum class KIND { LIST(GLNET_KIND_ENUMERATOR) };                                                                 \
  template <>                                                                                                      \
  struct KindList<KIND> {                                                                                          \
    static constexpr const char* define = DEFINE;                                                                  \
    static constexpr std::size_t count = 0 LIST(GLNET_KIND_ONE);                                                   \
    static constexpr const char* names[] = {LIST(GLNET_KIND_NAME)};                                                \
    static constexpr const char* glsl[] = {LIST(GLNET_KIND_GLSL)};                                                 \
    static_assert(sizeof names / sizeof *names == count && sizeof glsl / sizeof *glsl == count, "a row lost a column"); \
  }

template <class Kind>
constexpr std::size_t kindCount() {
  return KindList<Kind>::count;
}

// The kind's number: what the shader sees.
template <class Kind>
int kindNumber(Kind kind) {
  const auto number = static_cast<std::size_t>(kind);
  GLNET_ASSERT(number < KindList<Kind>::count, std::string("no such ") + KindList<Kind>::define + " kind");
  return static_cast<int>(number);
}

template <class Kind>
const char* kindName(Kind kind) {
  return KindList<Kind>::names[kindNumber(kind)];
}

// The kind a list names `name` ("relu", "adamw"), if it has one.
template <class Kind>
std::optional<Kind> findKind(const std::string& name) {
  for (std::size_t number = 0; number < KindList<Kind>::count; ++number) {
    if (name == KindList<Kind>::names[number]) return static_cast<Kind>(number);
  }
  return std::nullopt;
}

// A list's names as a message offers them, in the list's order: "sgd, momentum, adam or adamw".
template <class Kind>
std::string kindChoices() {
  std::string choices;
  for (std::size_t number = 0; number < KindList<Kind>::count; ++number) {
    choices += std::string(number == 0 ? "" : number + 1 == KindList<Kind>::count ? " or " : ", ") + KindList<Kind>::names[number];
  }
  return choices;
}

// The kind named `name`; else a UsageError "unknown WHAT 'NAME' (its choices)".
template <class Kind>
Kind parseKind(const std::string& name, const char* what) {
  if (const std::optional<Kind> kind = findKind<Kind>(name)) return *kind;
  throw UsageError(std::string("unknown ") + what + " '" + name + "' (" + kindChoices<Kind>() + ")");
}

// Every list's `#define <DEFINE>_<GLSL_SUFFIX> <number>` lines, for the programs' prologue.
const std::string& allKindDefines();

}  // namespace glnet
