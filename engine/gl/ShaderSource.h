// Where shader text comes from: the copies embedded at build time, or GLNET_SHADER_DIR for edit-and-rerun.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace glnet {

// Filled by the build (cmake/EmbedShaders.cmake) from shaders/*.glsl.
const std::map<std::string, std::string_view>& embeddedShaders();

// The text of shaders/<name>; throws glnet::Error naming the file and where it was looked for.
std::string shaderSource(const std::string& name);

}  // namespace glnet
