// The float64 CPU execution of a graph: forward, reverse-mode backward with the same rules as
// CompiledGraph, and the optimizers' updates. The yardstick the GPU is tested against.
#pragma once

#include "graph/Graph.h"
#include "ops/Optimizer.h"

#include <map>

namespace glnet {

struct ReferencePass {
  std::vector<std::vector<double>> values;     // per tensor
  std::vector<std::vector<double>> gradients;  // per tensor: d mean(loss) / d tensor; empty where none
};

// The value of every tensor (forward only). `feeds` gives every input and index input by tensor id;
// parameters come from `parameters` (graph.parameters() order), or their initial values when empty.
std::vector<std::vector<double>> referenceValues(const Graph& graph, const std::map<int, std::vector<double>>& feeds,
                                                 const std::vector<std::vector<double>>& parameters = {});

// Values and gradients of mean(loss). `feeds` gives every input and index input by tensor id; parameters come from `parameters` (in the order
// of graph.parameters()), or their initial values when empty.
ReferencePass runReference(const Graph& graph, Tensor loss, const std::map<int, std::vector<double>>& feeds,
                           const std::vector<std::vector<double>>& parameters = {});

// One optimizer step on `parameters` (graph.parameters() order) with the pass's gradients; `state` holds
// the optimizer's per-parameter state, grown on first use; `step` counts from 1.
void referenceUpdate(const Graph& graph, const ReferencePass& pass, const OptimizerSettings& settings, int step,
                     std::vector<std::vector<double>>& parameters, std::vector<std::vector<std::vector<double>>>& state);

}  // namespace glnet
