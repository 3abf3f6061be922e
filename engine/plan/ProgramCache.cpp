#include "plan/ProgramCache.h"

namespace glnet {

const Program& ProgramCache::get(const std::string& file, const std::vector<ShaderDefine>& defines,
                                 const std::vector<std::string>& includes) {
  std::string key = file;
  for (const ShaderDefine& define : defines) key += "|" + define.name + "=" + define.value;
  for (const std::string& include : includes) key += "|+" + include;
  auto& slot = programs_[key];
  if (!slot) {
    slot = std::make_unique<Program>(Program::compute(file, defines, includes));
    compileMilliseconds_ += slot->compileMilliseconds();
    compileTimes_.emplace_back(key + (slot->fromBinaryCache() ? " (binary cache)" : ""), slot->compileMilliseconds());
  }
  return *slot;
}

}  // namespace glnet
