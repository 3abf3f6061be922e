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
  // Started (Program::start): programs asked for one after another compile side by side until a plan runs them.
  const Program& get(const std::string& file, const std::vector<ShaderDefine>& defines = {},
                     const std::vector<std::string>& includes = {});
  // Waits for every program asked for so far (finishPrograms).
  void finishAll() const;
  // The time during which some program was compiling (those compiled side by side count once; finishes every program).
  double compileMilliseconds() const;
  std::size_t size() const { return programs_.size(); }
  // Each program's key (file and defines) with the time from its start until it was ready, in the order they were
  // asked for (finishes every program).
  std::vector<std::pair<std::string, double>> compileTimes() const;

 private:
  std::map<std::string, std::unique_ptr<Program>> programs_;
  std::vector<std::pair<std::string, const Program*>> order_;
};

}  // namespace glnet
