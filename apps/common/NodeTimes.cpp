#include "common/NodeTimes.h"

namespace glnet::cli {

namespace {

double totalMs(const std::vector<NodeTime>& nodes) {
  double total = 0;
  for (const NodeTime& node : nodes) total += node.gpuMs;
  return total;
}

std::size_t dispatchesOf(const std::vector<NodeTime>& nodes) {
  std::size_t dispatches = 0;
  for (const NodeTime& node : nodes) dispatches += node.dispatches;
  return dispatches;
}

}  // namespace

void printNodeTimes(std::FILE* out, const OnnxRunner::Profile& profile, int runs, bool all) {
  const std::vector<NodeTime>& nodes = profile.nodes;
  const double total = totalMs(nodes);
  std::fprintf(out, "GPU time %.3f ms in %zu dispatches (%zu barriers) of %zu nodes (median per dispatch of %d runs); by node:\n", total,
               dispatchesOf(nodes), profile.barriers, nodes.size(), runs);
  constexpr std::size_t shown = 20;
  for (std::size_t k = 0; k < nodes.size() && (all || k < shown); ++k) {
    const NodeTime& n = nodes[k];
    std::fprintf(out, "  %8.3f ms %5.1f%%  %-40s %-28s %s%s%s\n", n.gpuMs, total > 0 ? 100 * n.gpuMs / total : 0.0, n.node.c_str(),
                 n.kernel.c_str(), n.outputShape.c_str(), n.dispatches > 1 ? (" (" + std::to_string(n.dispatches) + " dispatches)").c_str() : "",
                 all ? ("  [" + n.dispatchLabels + "]").c_str() : "");
  }
  if (nodes.size() > shown && !all) std::fprintf(out, "  ... %zu more nodes (--verbose lists them)\n", nodes.size() - shown);
}

nlohmann::json nodeTimesJson(const OnnxRunner::Profile& profile) {
  const std::vector<NodeTime>& nodes = profile.nodes;
  nlohmann::json list = nlohmann::json::array();
  for (const NodeTime& n : nodes) {
    list.push_back({{"node", n.node}, {"kernel", n.kernel}, {"output_shape", n.outputShape}, {"dispatches", n.dispatches}, {"dispatch_labels", n.dispatchLabels}, {"gpu_ms", n.gpuMs}});
  }
  return {{"gpu_ms", totalMs(nodes)}, {"dispatches", dispatchesOf(nodes)}, {"barriers", profile.barriers}, {"nodes", list}};
}

}  // namespace glnet::cli
