// Compiled programs shared by every op of a model: one per shader file and set of defines.
#pragma once

#include "gl/Program.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace glnet {

class ProgramCache {
 public:
  const Program& get(const std::string& file, const std::vector<ShaderDefine>& defines = {},
                     const std::vector<std::string>& includes = {});
  double compileMilliseconds() const { return compileMilliseconds_; }
  std::size_t size() const { return programs_.size(); }
  // Each program's key (file and defines) with its compile and link time, in compile order.
  const std::vector<std::pair<std::string, double>>& compileTimes() const { return compileTimes_; }

 private:
  std::map<std::string, std::unique_ptr<Program>> programs_;
  double compileMilliseconds_ = 0;
  std::vector<std::pair<std::string, double>> compileTimes_;
};

}  // namespace glnet
