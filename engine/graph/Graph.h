// A graph of tensors and ops, built forward; reverse-mode differentiation and compilation into a Plan live
// in CompiledGraph (GPU) and ReferenceGraph (float64 CPU).
#pragma once

#include "graph/Op.h"
#include "graph/Ops.h"

#include <memory>
#include <string>
#include <vector>

namespace glnet {

struct Tensor {
  int id = -1;
};

enum class TensorRole { input, indexInput, parameter, computed };

struct TensorNode {
  std::string name;
  Shape shape;
  TensorRole role;
  std::vector<float> initial;  // parameters
  int producer = -1;           // index of the op node that computes it
  bool needsGradient = false;  // a trained parameter, or computed from one through differentiable ops
};

struct OpNode {
  std::shared_ptr<const Op> op;
  std::vector<int> inputs;
  int output;
};

class Graph {
 public:
  // Values supplied each step (a batch of images, regression targets).
  Tensor input(const std::string& name, Shape shape);
  // Class indices supplied each step (uint32 on the GPU).
  Tensor indexInput(const std::string& name, Shape shape);
  Tensor parameter(const std::string& name, Shape shape, std::vector<float> initial);
  // A parameter that ops update in their forward pass instead of the optimizer (BatchNormalization's running mean
  // and variance): saved and restored with the parameters, never differentiated.
  Tensor state(const std::string& name, Shape shape, std::vector<float> initial);
  // Replaces a parameter's values, same size (an importer folding a following BatchNormalization into them).
  void setInitial(Tensor parameter, std::vector<float> values);
  // Adds `op` applied to `inputs`; throws glnet::Error when the shapes do not fit.
  Tensor apply(std::shared_ptr<const Op> op, const std::vector<Tensor>& inputs, std::string name = "");

  Tensor dense(Tensor x, Tensor weight, Tensor bias, Activation activation) {
    return apply(denseOp(activation), {x, weight, bias});
  }

  const std::vector<TensorNode>& tensors() const { return tensors_; }
  const TensorNode& tensor(Tensor t) const { return tensors_.at(static_cast<std::size_t>(t.id)); }
  const std::vector<OpNode>& ops() const { return ops_; }
  // Trained parameters and state, in the order they were added.
  std::vector<Tensor> parameters() const;

  // A copy without the ops and parameters that no tensor of `kept` depends on (what an importer built before a fused
  // op made it redundant: the transposes a fused attention reads through), every input kept; `renumbered[id]` is each
  // tensor's id in the copy, -1 where it was dropped.
  Graph pruned(const std::vector<Tensor>& kept, std::vector<int>& renumbered) const;

 private:
  Tensor add(TensorNode node);
  std::vector<TensorNode> tensors_;
  std::vector<OpNode> ops_;
};

}  // namespace glnet
