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

Graph Graph::pruned(const std::vector<Tensor>& kept, std::vector<int>& renumbered) const {
  std::vector<bool> needed(tensors_.size(), false);
  for (const Tensor& t : kept) needed.at(static_cast<std::size_t>(t.id)) = true;
  // Ops are in the order they were applied, each after its inputs' producers: one pass backwards finds them all.
  for (std::size_t n = ops_.size(); n-- > 0;) {
    if (!needed[static_cast<std::size_t>(ops_[n].output)]) continue;
    for (const int id : ops_[n].inputs) needed[static_cast<std::size_t>(id)] = true;
  }
  Graph copy;
  renumbered.assign(tensors_.size(), -1);
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const TensorRole role = tensors_[i].role;
    if (!needed[i] && role != TensorRole::input && role != TensorRole::indexInput) continue;
    renumbered[i] = static_cast<int>(copy.tensors_.size());
    copy.tensors_.push_back(tensors_[i]);
  }
  for (const OpNode& node : ops_) {
    const auto output = static_cast<std::size_t>(node.output);
    if (!needed[output]) continue;
    std::vector<int> inputs;
    for (const int id : node.inputs) inputs.push_back(renumbered[static_cast<std::size_t>(id)]);
    copy.tensors_[static_cast<std::size_t>(renumbered[output])].producer = static_cast<int>(copy.ops_.size());
    copy.ops_.push_back({node.op, std::move(inputs), renumbered[output]});
  }
  return copy;
}

}  // namespace glnet
