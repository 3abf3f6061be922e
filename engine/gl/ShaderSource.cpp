#include "gl/ShaderSource.h"

#include "base/check.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace glnet {

std::string shaderSource(const std::string& name) {
  if (const char* directory = std::getenv("GLNET_SHADER_DIR"); directory && *directory) {
    const std::string path = std::string(directory) + "/" + name;
    std::ifstream file(path, std::ios::binary);
    if (!file) {
      throw Error("shader " + name + " not found in GLNET_SHADER_DIR (" + path +
                  "); point GLNET_SHADER_DIR at glnet's shaders/ folder or unset it");
    }
    std::ostringstream text;
    text << file.rdbuf();
    return text.str();
  }
  const auto& shaders = embeddedShaders();
  const auto found = shaders.find(name);
  if (found == shaders.end()) {
    throw Error("shader " + name + " is not built into this binary; rebuild glnet or set GLNET_SHADER_DIR");
  }
  return std::string(found->second);
}

}  // namespace glnet
