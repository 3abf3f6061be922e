// Compiled programs shared by every op of a model: one per shader file and set of defines.
#pragma once

#include "gl/Buffer.h"
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
  // Counters, one per tile, for the split GEMMs that sum their own partials (Gemm.glsl's GEMM_SPLIT_FINISH): zeros
  // made on first use, which every such dispatch leaves at zero. Kept here because a plan that records one holds
  // this cache's programs, so the counters live as long as the plans that bind them.
  static constexpr std::uint32_t tileArrivalCount = 4096;
  const Buffer& tileArrivals();

 private:
  std::unique_ptr<Buffer> tileArrivals_;
  std::map<std::string, std::unique_ptr<Program>> programs_;
  double compileMilliseconds_ = 0;
  std::vector<std::pair<std::string, double>> compileTimes_;
};

}  // namespace glnet
