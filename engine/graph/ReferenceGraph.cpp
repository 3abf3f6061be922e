#include "graph/ReferenceGraph.h"

#include "base/check.h"

#include <algorithm>
#include <cmath>

namespace glnet {

std::vector<std::vector<double>> referenceValues(const Graph& graph, const std::map<int, std::vector<double>>& feeds,
                                                 const std::vector<std::vector<double>>& parameters) {
  const auto& tensors = graph.tensors();
  ReferencePass pass;
  pass.values.resize(tensors.size());
  const std::vector<Tensor> parameterList = graph.parameters();
  for (std::size_t p = 0; p < parameterList.size(); ++p) {
    const auto id = static_cast<std::size_t>(parameterList[p].id);
    pass.values[id] = parameters.empty() ? std::vector<double>(tensors[id].initial.begin(), tensors[id].initial.end())
                                         : parameters[p];
  }
  for (const auto& [id, values] : feeds) pass.values.at(static_cast<std::size_t>(id)) = values;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].role != TensorRole::computed) {
      GLNET_ASSERT(pass.values[i].size() == elementCount(tensors[i].shape), "tensor " + tensors[i].name + " was not fed");
    }
  }
  const auto host = [&](int id) { return HostTensor64{&pass.values[static_cast<std::size_t>(id)], tensors[static_cast<std::size_t>(id)].shape}; };
  for (const OpNode& node : graph.ops()) {
    std::vector<HostTensor64> inputs;
    for (const int id : node.inputs) inputs.push_back(host(id));
    pass.values[static_cast<std::size_t>(node.output)] = node.op->referenceForward(inputs);
  }
  return pass.values;
}

ReferencePass runReference(const Graph& graph, Tensor loss, const std::map<int, std::vector<double>>& feeds,
                           const std::vector<std::vector<double>>& parameters) {
  const auto& tensors = graph.tensors();
  ReferencePass pass;
  pass.values = referenceValues(graph, feeds, parameters);
  const auto host = [&](int id) { return HostTensor64{&pass.values[static_cast<std::size_t>(id)], tensors[static_cast<std::size_t>(id)].shape}; };

  pass.gradients.resize(tensors.size());
  const auto lossId = static_cast<std::size_t>(loss.id);
  pass.gradients[lossId].assign(pass.values[lossId].size(), 1.0 / static_cast<double>(pass.values[lossId].size()));
  for (auto node = graph.ops().rbegin(); node != graph.ops().rend(); ++node) {
    const auto output = static_cast<std::size_t>(node->output);
    if (!tensors[output].needsGradient || pass.gradients[output].empty()) continue;
    std::vector<HostTensor64> inputs;
    for (const int id : node->inputs) inputs.push_back(host(id));
    const auto gradients = node->op->referenceBackward(inputs, pass.values[output], pass.gradients[output]);
    for (std::size_t i = 0; i < node->inputs.size(); ++i) {
      const auto id = static_cast<std::size_t>(node->inputs[i]);
      if (!tensors[id].needsGradient || !node->op->passesGradient(i)) continue;
      auto& total = pass.gradients[id];
      if (total.empty()) {
        total = gradients[i];
      } else {
        for (std::size_t k = 0; k < total.size(); ++k) total[k] += gradients[i][k];
      }
    }
  }
  return pass;
}

void referenceUpdate(const Graph& graph, const ReferencePass& pass, const OptimizerSettings& settings, int step,
                     std::vector<std::vector<double>>& parameters, std::vector<std::vector<std::vector<double>>>& state) {
  const std::vector<Tensor> parameterList = graph.parameters();
  state.resize(OptimizerOp::stateBuffers(settings.kind));
  for (auto& buffer : state) buffer.resize(parameterList.size());
  double squaredNorm = 0;
  for (const Tensor& parameter : parameterList) {
    if (!graph.tensor(parameter).needsGradient) continue;
    for (const double g : pass.gradients[static_cast<std::size_t>(parameter.id)]) squaredNorm += g * g;
  }
  const double clipScale = settings.clipNorm > 0 ? std::min(1.0, settings.clipNorm / (std::sqrt(squaredNorm) + 1e-6)) : 1.0;
  const double lr = settings.learningRate, mu = settings.momentum;
  for (std::size_t p = 0; p < parameterList.size(); ++p) {
    const TensorNode& node = graph.tensor(parameterList[p]);
    const std::vector<double>& gradient = pass.gradients[static_cast<std::size_t>(parameterList[p].id)];
    std::vector<double>& values = parameters[p];
    for (auto& buffer : state) buffer[p].resize(values.size(), 0.0);
    if (!node.needsGradient) continue;  // state: its ops update it
    const double decay = node.shape.size() >= 2 ? settings.weightDecay : 0.0;
    for (std::size_t k = 0; k < values.size(); ++k) {
      double g = (gradient.empty() ? 0.0 : gradient[k]) * clipScale;
      if (settings.kind == OptimizerKind::adamw) {
        values[k] -= lr * decay * values[k];
      } else {
        g += decay * values[k];
      }
      switch (settings.kind) {
        case OptimizerKind::sgd:
          values[k] -= lr * g;
          break;
        case OptimizerKind::momentum: {
          double& v = state[0][p][k];
          v = mu * v + g;
          values[k] -= lr * (settings.nesterov ? g + mu * v : v);
          break;
        }
        case OptimizerKind::adam:
        case OptimizerKind::adamw: {
          double& m = state[0][p][k];
          double& v = state[1][p][k];
          m = mu * m + (1 - mu) * g;
          v = settings.beta2 * v + (1 - settings.beta2) * g * g;
          const double mHat = m / (1 - std::pow(mu, step));
          const double vHat = v / (1 - std::pow(static_cast<double>(settings.beta2), step));
          values[k] -= lr * mHat / (std::sqrt(vHat) + settings.epsilon);
          break;
        }
      }
    }
  }
}

}  // namespace glnet
