// Small hand-made ONNX models for the importer's tests: float inputs of fixed shapes, initializers, nodes, one float
// output "y"; loaded by readOnnx and run on the GPU (run), or refused (refusal).
#pragma once

#include "graph/CompiledGraph.h"
#include "importer/Onnx.h"
#include "support/GlContext.h"
#include "support/TempDir.h"

#include <onnx/onnx_pb.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace glnet::test {

// A model of float inputs with fixed shapes, int64 or float initializers and one float output "y".
class OnnxTestModel {
 public:
  explicit OnnxTestModel(int opset = 17, const std::string& name = "test") {
    model_.set_ir_version(8);
    model_.add_opset_import()->set_version(opset);
    graph_ = model_.mutable_graph();
    graph_->set_name(name);
    onnx::ValueInfoProto& y = *graph_->add_output();
    y.set_name("y");
    y.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  OnnxTestModel(const OnnxTestModel&) = delete;  // graph_ points into model_
  OnnxTestModel& operator=(const OnnxTestModel&) = delete;
  OnnxTestModel& input(const std::string& name, const std::vector<std::int64_t>& shape) {
    onnx::ValueInfoProto& x = *graph_->add_input();
    x.set_name(name);
    x.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (const std::int64_t d : shape) x.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    return *this;
  }
  OnnxTestModel& constant(const std::string& name, const std::vector<std::int64_t>& shape, const std::vector<double>& values, bool integer = true) {
    onnx::TensorProto& t = *graph_->add_initializer();
    t.set_name(name);
    t.set_data_type(integer ? onnx::TensorProto::INT64 : onnx::TensorProto::FLOAT);
    for (const std::int64_t d : shape) t.add_dims(d);
    for (const double v : values) {
      if (integer) t.add_int64_data(static_cast<std::int64_t>(v));
      else t.add_float_data(static_cast<float>(v));
    }
    return *this;
  }
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs, const std::string& output) {
    onnx::NodeProto& n = *graph_->add_node();
    n.set_op_type(op);
    n.set_name("/" + op + "_" + std::to_string(graph_->node_size()));
    for (const std::string& i : inputs) n.add_input(i);
    n.add_output(output);
    return n;
  }
  // A Constant node of float values (exporters put a function's constants just before the nodes reading them).
  onnx::NodeProto& constantNode(const std::string& output, const std::vector<std::int64_t>& shape, const std::vector<double>& values) {
    onnx::NodeProto& n = node("Constant", {}, output);
    onnx::AttributeProto& a = *n.add_attribute();
    a.set_name("value");
    a.set_type(onnx::AttributeProto::TENSOR);
    onnx::TensorProto& t = *a.mutable_t();
    t.set_data_type(onnx::TensorProto::FLOAT);
    for (const std::int64_t d : shape) t.add_dims(d);
    for (const double v : values) t.add_float_data(static_cast<float>(v));
    return n;
  }
  std::string save(const TempDir& dir) const { return dir.write("model.onnx", model_.SerializeAsString()); }

 private:
  onnx::ModelProto model_;
  onnx::GraphProto* graph_;
};

inline void attribute(onnx::NodeProto& node, const std::string& name, std::int64_t value) {
  onnx::AttributeProto& a = *node.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(value);
}

inline void attribute(onnx::NodeProto& node, const std::string& name, const std::string& value) {
  onnx::AttributeProto& a = *node.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::STRING);
  a.set_s(value);
}

// Loads the model, runs it on the inputs (in order) and returns y, poisoned with 7777 before the run; `shape` gets y's.
inline std::vector<float> run(const OnnxTestModel& model, const std::vector<std::vector<float>>& inputs, Shape* shape = nullptr) {
  TempDir dir;
  OnnxModel m = readOnnx(model.save(dir), 0);
  CompiledGraph compiled(glContext(), m.graph, CompiledGraph::Memory::kept, {m.output});
  Plan plan = compiled.forwardPlan([](Plan&) {});
  REQUIRE(inputs.size() == m.inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) compiled.upload(m.inputs[i].second, inputs[i].data(), inputs[i].size() * sizeof(float));
  std::vector<float> y(elementCount(m.graph.tensor(m.output).shape), 7777.0f);
  const bool view = std::any_of(m.graph.ops().begin(), m.graph.ops().end(), [&](const OpNode& op) { return op.output == m.output.id && op.op->isView(); });
  if (!view) compiled.upload(m.output, y.data(), y.size() * sizeof(float));  // a view's memory is its input's
  plan.run();
  const BufferView out = compiled.view(m.output);
  plan.read(*out.buffer, y.data(), y.size() * sizeof(float), out.offset);
  if (shape) *shape = m.graph.tensor(m.output).shape;
  return y;
}

inline std::string refusal(const OnnxTestModel& model) {
  TempDir dir;
  try {
    readOnnx(model.save(dir), 0);
  } catch (const Error& error) {
    return error.what();
  }
  return "loaded";
}

inline void attributeInts(onnx::NodeProto& node, const std::string& name, const std::vector<std::int64_t>& values) {
  onnx::AttributeProto& a = *node.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (const std::int64_t v : values) a.add_ints(v);
}

// What each node became (OnnxNodeSummary::glnetOp), by node name; of a name given twice, the last.
inline std::map<std::string, std::string> summaries(const OnnxTestModel& model) {
  TempDir dir;
  const OnnxModel m = readOnnx(model.save(dir), 0);
  std::map<std::string, std::string> became;
  for (const OnnxNodeSummary& node : m.nodes) became[node.name] = node.glnetOp;
  return became;
}

// What the model's fused attention became ("attention (fused: ...)"), or "" without one.
inline std::string fusedAttention(const OnnxTestModel& model) {
  TempDir dir;
  const OnnxModel m = readOnnx(model.save(dir), 0);
  for (const OnnxNodeSummary& node : m.nodes) {
    if (node.glnetOp.rfind("attention (fused", 0) == 0) return node.glnetOp;
  }
  return "";
}

// The GPU ops the model runs (views left out).
inline std::size_t opsRun(const OnnxTestModel& model) {
  TempDir dir;
  const OnnxModel m = readOnnx(model.save(dir), 0);
  return static_cast<std::size_t>(std::count_if(m.graph.ops().begin(), m.graph.ops().end(), [](const OpNode& op) { return !op.op->isView(); }));
}

// The node names OnnxTestModel::node gives: "/Op_index", index counting every node before it.
inline std::string named(const std::string& op, int index) { return "/" + op + "_" + std::to_string(index); }

// x [rows, inputs] · w [inputs, outputs] + b, in float64.
inline std::vector<double> affine(const std::vector<float>& x, const std::vector<double>& w, const std::vector<double>& b, std::size_t inputs) {
  const std::size_t outputs = b.size(), rows = x.size() / inputs;
  std::vector<double> z(rows * outputs);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t o = 0; o < outputs; ++o) {
      double sum = b[o];
      for (std::size_t i = 0; i < inputs; ++i) sum += double{x[r * inputs + i]} * w[i * outputs + o];
      z[r * outputs + o] = sum;
    }
  }
  return z;
}

inline std::vector<float> iota(std::size_t n, float start = 0) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}


}  // namespace glnet::test
