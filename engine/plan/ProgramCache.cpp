#include "plan/ProgramCache.h"

#include <algorithm>
#include <chrono>

namespace glnet {

const Program& ProgramCache::get(const std::string& file, const std::vector<ShaderDefine>& defines,
                                 const std::vector<std::string>& includes) {
  std::string key = file;
  for (const ShaderDefine& define : defines) key += "|" + define.name + "=" + define.value;
  for (const std::string& include : includes) key += "|+" + include;
  auto& slot = programs_[key];
  if (!slot) {
    slot = std::make_unique<Program>(Program::start(file, defines, includes));
    order_.emplace_back(std::move(key), slot.get());
  }
  return *slot;
}

void ProgramCache::finishAll() const {
  std::vector<const Program*> started;
  for (const auto& entry : order_) {
    if (entry.second->pending()) started.push_back(entry.second);
  }
  finishPrograms(std::move(started));
}

double ProgramCache::compileMilliseconds() const {
  finishAll();
  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<Clock::time_point, Clock::time_point>> spans;
  for (const auto& entry : order_) spans.emplace_back(entry.second->startedAt(), entry.second->readyAt());
  std::sort(spans.begin(), spans.end());
  Clock::duration covered{};
  Clock::time_point reached{};
  for (const auto& [started, ready] : spans) {
    const Clock::time_point from = std::max(started, reached);
    if (ready > from) covered += ready - from;
    reached = std::max(reached, ready);
  }
  return std::chrono::duration<double, std::milli>(covered).count();
}

std::vector<std::pair<std::string, double>> ProgramCache::compileTimes() const {
  finishAll();
  std::vector<std::pair<std::string, double>> times;
  for (const auto& [key, program] : order_) {
    times.emplace_back(key + (program->fromBinaryCache() ? " (binary cache)" : ""), program->compileMilliseconds());
  }
  return times;
}

}  // namespace glnet
