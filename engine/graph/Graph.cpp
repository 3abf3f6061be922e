#include "graph/Graph.h"

#include "base/check.h"
#include "graph/Ops.h"

namespace glnet {

Tensor Graph::add(TensorNode node) {
  tensors_.push_back(std::move(node));
  return {static_cast<int>(tensors_.size() - 1)};
}

Tensor Graph::input(const std::string& name, Shape shape) { return add({name, std::move(shape), TensorRole::input, {}, -1, false}); }

Tensor Graph::indexInput(const std::string& name, Shape shape) {
  return add({name, std::move(shape), TensorRole::indexInput, {}, -1, false});
}

Tensor Graph::parameter(const std::string& name, Shape shape, std::vector<float> initial) {
  if (initial.size() != elementCount(shape)) {
    throw Error("parameter " + name + " of shape " + describe(shape) + " needs " + std::to_string(elementCount(shape)) +
                " values, got " + std::to_string(initial.size()));
  }
  return add({name, std::move(shape), TensorRole::parameter, std::move(initial), -1, true});
}

Tensor Graph::state(const std::string& name, Shape shape, std::vector<float> initial) {
  const Tensor t = parameter(name, std::move(shape), std::move(initial));
  tensors_[static_cast<std::size_t>(t.id)].needsGradient = false;
  return t;
}

void Graph::setInitial(Tensor parameter, std::vector<float> values) {
  TensorNode& node = tensors_.at(static_cast<std::size_t>(parameter.id));
  GLNET_ASSERT(node.role == TensorRole::parameter, "only a parameter has initial values");
  GLNET_ASSERT(values.size() == node.initial.size(), "a parameter keeps its size");
  node.initial = std::move(values);
}

Tensor Graph::apply(std::shared_ptr<const Op> op, const std::vector<Tensor>& inputs, std::string name) {
  std::vector<Shape> shapes;
  bool needsGradient = false;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    GLNET_ASSERT(inputs[i].id >= 0 && static_cast<std::size_t>(inputs[i].id) < tensors_.size(), "a tensor of another graph");
    const TensorNode& node = tensors_[static_cast<std::size_t>(inputs[i].id)];
    if (op->isIndexInput(i) != (node.role == TensorRole::indexInput)) {
      throw Error(op->name() + ": input " + std::to_string(i) + " (" + node.name + ") must " +
                  (op->isIndexInput(i) ? "" : "not ") + "be class indices");
    }
    shapes.push_back(node.shape);
    needsGradient = needsGradient || (node.needsGradient && op->passesGradient(i));
  }
  Shape shape = op->outputShape(shapes);
  if (name.empty()) name = op->name() + " " + std::to_string(ops_.size());
  const Tensor output = add({name, std::move(shape), TensorRole::computed, {}, static_cast<int>(ops_.size()),
                             needsGradient && op->differentiable()});
  std::vector<int> ids;
  for (const Tensor& t : inputs) ids.push_back(t.id);
  ops_.push_back({std::move(op), std::move(ids), output.id});
  return output;
}

std::vector<Tensor> Graph::parameters() const {
  std::vector<Tensor> result;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i].role == TensorRole::parameter) result.push_back({static_cast<int>(i)});
  }
  return result;
}

}  // namespace glnet
