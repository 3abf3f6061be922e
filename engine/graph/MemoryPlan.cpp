#include "graph/MemoryPlan.h"

#include <algorithm>

namespace glnet {

MemoryPlan planMemory(const Graph& graph, const std::vector<Tensor>& kept, std::size_t alignment) {
  const auto& tensors = graph.tensors();
  const auto& ops = graph.ops();
  MemoryPlan plan;
  plan.storage.resize(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const int producer = tensors[i].producer;
    const bool view = producer >= 0 && ops[static_cast<std::size_t>(producer)].op->isView();
    plan.storage[i] = view ? plan.storage[static_cast<std::size_t>(ops[static_cast<std::size_t>(producer)].inputs[0])] : static_cast<int>(i);
  }
  const int end = static_cast<int>(ops.size());
  std::vector<int> first(tensors.size(), end), last(tensors.size(), -1);
  std::vector<bool> read(tensors.size(), false);
  for (int n = 0; n < end; ++n) {
    const OpNode& node = ops[static_cast<std::size_t>(n)];
    const auto out = static_cast<std::size_t>(plan.storage[static_cast<std::size_t>(node.output)]);
    first[out] = std::min(first[out], n);
    for (const int id : node.inputs) {
      const auto owner = static_cast<std::size_t>(plan.storage[static_cast<std::size_t>(id)]);
      last[owner] = std::max(last[owner], n);
      read[static_cast<std::size_t>(id)] = true;
    }
  }
  std::vector<bool> own(tensors.size(), false);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].role == TensorRole::computed && !read[i]) own[static_cast<std::size_t>(plan.storage[i])] = true;  // a result
  }
  for (const Tensor t : kept) own[static_cast<std::size_t>(plan.storage[static_cast<std::size_t>(t.id)])] = true;
  const auto bytes = [&](std::size_t i) {
    return (std::max<std::size_t>(elementCount(tensors[i].shape), 1) * sizeof(float) + alignment - 1) / alignment * alignment;
  };
  std::vector<std::size_t> owners;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].role == TensorRole::computed && plan.storage[i] == static_cast<int>(i)) {
      plan.keptBytes += bytes(i);
      if (own[i]) {
        plan.resultBytes += bytes(i);
      } else {
        owners.push_back(i);
      }
    }
  }
  std::stable_sort(owners.begin(), owners.end(), [&](std::size_t a, std::size_t b) { return bytes(a) > bytes(b); });
  plan.offset.assign(tensors.size(), std::nullopt);
  std::vector<std::size_t> placed;
  for (const std::size_t t : owners) {
    last[t] = std::max(last[t], first[t]);  // written and never read: still written while its op runs
    std::vector<std::pair<std::size_t, std::size_t>> taken;
    for (const std::size_t other : placed) {
      if (first[other] <= last[t] && first[t] <= last[other]) taken.emplace_back(*plan.offset[other], *plan.offset[other] + bytes(other));
    }
    std::sort(taken.begin(), taken.end());
    std::size_t offset = 0;
    for (const auto& [begin, finish] : taken) {
      if (offset + bytes(t) <= begin) break;
      offset = std::max(offset, finish);
    }
    plan.offset[t] = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + bytes(t));
    placed.push_back(t);
  }
  return plan;
}

}  // namespace glnet
