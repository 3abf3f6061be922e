// onnx_conformance DATA_DIR [--table FILE] [--filter TEXT]: ONNX's own backend test cases (Debian's
// libonnx-testdata: node/, pytorch-converted/, pytorch-operator/, simple/), each model.onnx with
// test_data_set_*/input_N.pb and output_N.pb, run through glnet's importer and GPU graph and compared at ONNX's
// tolerance (|glnet − expected| ≤ 1e-7 + 1e-3·|expected|, as float32; bool outputs as 0 and 1). Inputs that are not float (shapes, axes,
// indices) are bound as constants, as glnet folds them at load; when the importer asks for constants (weights fed
// as inputs), every input but the first is. A case the importer refuses is skipped with the importer's one-line
// reason; one that loads must pass. Prints a table per op (the op types a case's model
// holds): passed, failed, skipped and the reasons, and exits 1 when any case failed.
#include "importer/Onnx.h"
#include "gl/Context.h"
#include "base/check.h"
#include "graph/CompiledGraph.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include <unistd.h>

using namespace glnet;
namespace fs = std::filesystem;

namespace {

struct TestTensor {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

// A test data file: a float TensorProto, or a bool one as floats 0 and 1 (glnet's booleans: comparisons, logic,
// IsNaN); anything else is a reason to skip the case.
TestTensor readTestTensor(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes.str())) throw Error(path.string() + ": not a TensorProto");
  const bool boolean = proto.data_type() == onnx::TensorProto::BOOL;
  if (proto.data_type() != onnx::TensorProto::FLOAT && !boolean) throw Error("data of ONNX type " + std::to_string(proto.data_type()) + " (glnet computes float32)");
  TestTensor tensor;
  std::size_t count = 1;
  for (const std::int64_t d : proto.dims()) {
    if (d < 0 || d > (1 << 26) || (d > 0 && count > (std::size_t{1} << 26) / static_cast<std::size_t>(d))) throw Error(path.string() + ": not a tensor glnet's tests read");
    tensor.shape.push_back(d);
    count *= static_cast<std::size_t>(d);
  }
  tensor.values.resize(count);
  if (boolean) {
    const bool raw = proto.has_raw_data();
    if ((raw ? proto.raw_data().size() : static_cast<std::size_t>(proto.int32_data_size())) != count) throw Error(path.string() + ": the wrong number of values");
    for (std::size_t i = 0; i < count; ++i) tensor.values[i] = (raw ? proto.raw_data()[i] != 0 : proto.int32_data(static_cast<int>(i)) != 0) ? 1.0f : 0.0f;
  } else if (proto.has_raw_data()) {
    if (proto.raw_data().size() != count * 4) throw Error(path.string() + ": raw data of the wrong size");
    std::memcpy(tensor.values.data(), proto.raw_data().data(), count * 4);
  } else {
    if (static_cast<std::size_t>(proto.float_data_size()) != count) throw Error(path.string() + ": the wrong number of values");
    std::copy(proto.float_data().begin(), proto.float_data().end(), tensor.values.begin());
  }
  return tensor;
}

// The op types of a model's graph, sorted, joined by "+": the table's row for the case.
std::string opTypesOf(const fs::path& model) {
  std::ifstream file(model, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  onnx::ModelProto proto;
  if (!proto.ParseFromString(bytes.str())) return "(unreadable)";
  std::set<std::string> ops;
  for (const onnx::NodeProto& node : proto.graph().node()) ops.insert(node.op_type());
  std::string key;
  for (const std::string& op : ops) key += (key.empty() ? "" : "+") + op;
  return key.empty() ? "(no nodes)" : key;
}

enum class Outcome { passed, failed, skipped };

struct Result {
  Outcome outcome;
  std::string detail;
};

std::string shapeText(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// The reason after the importer's "file: node 'name' (Op, opset N): " prefix.
std::string reasonOf(const std::string& message) {
  const std::size_t opset = message.find("opset ");
  const std::size_t colon = opset == std::string::npos ? std::string::npos : message.find("): ", opset);
  std::string reason = colon == std::string::npos ? message.substr(message.find(": ") == std::string::npos ? 0 : message.find(": ") + 2)
                                                  : message.substr(colon + 3);
  return reason.substr(0, 110);
}

std::string readBytes(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

// The model with the named graph inputs turned into initializers holding the test data, written to `out`: glnet
// takes shapes, axes, indices and weights as constants folded at load, where ONNX's node tests feed them as inputs.
void bindInputs(const onnx::ModelProto& original, const std::map<std::string, onnx::TensorProto>& bound, const fs::path& out) {
  onnx::ModelProto model = original;
  onnx::GraphProto& graph = *model.mutable_graph();
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> kept;
  for (const onnx::ValueInfoProto& input : graph.input()) {
    const auto found = bound.find(input.name());
    if (found == bound.end()) {
      *kept.Add() = input;
      continue;
    }
    onnx::TensorProto& initializer = *graph.add_initializer();
    initializer = found->second;
    initializer.set_name(input.name());
  }
  graph.mutable_input()->Swap(&kept);
  std::ofstream(out, std::ios::binary) << model.SerializeAsString();
}

Result runCase(const Context& context, const fs::path& directory, const fs::path& scratch) {
  const fs::path modelPath = directory / "model.onnx";
  std::vector<fs::path> sets;
  for (const auto& entry : fs::directory_iterator(directory)) {
    if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(entry.path());
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return {Outcome::skipped, "no test data"};
  onnx::ModelProto proto;
  if (!proto.ParseFromString(readBytes(modelPath))) return {Outcome::skipped, "the model does not parse"};
  std::set<std::string> initialized;
  for (const onnx::TensorProto& t : proto.graph().initializer()) initialized.insert(t.name());
  std::vector<std::string> inputNames;
  for (const onnx::ValueInfoProto& input : proto.graph().input()) {
    if (!initialized.count(input.name())) inputNames.push_back(input.name());
  }
  // Inputs that are not float are bound as constants from the first data set; then, when the importer asks
  // for constants, every input but the first. Cases whose bound inputs change between data sets run the first.
  std::map<std::string, onnx::TensorProto> integerInputs, allButFirst;
  for (std::size_t i = 0; i < inputNames.size(); ++i) {
    onnx::TensorProto tensor;
    const fs::path file = sets[0] / ("input_" + std::to_string(i) + ".pb");
    if (!fs::exists(file) || !tensor.ParseFromString(readBytes(file))) return {Outcome::skipped, "input " + std::to_string(i) + " is no tensor"};
    if (tensor.data_type() != onnx::TensorProto::FLOAT) integerInputs[inputNames[i]] = tensor;
    if (i > 0) allButFirst[inputNames[i]] = tensor;
  }
  for (int o = 0; fs::exists(sets[0] / ("output_" + std::to_string(o) + ".pb")); ++o) {
    onnx::TensorProto tensor;
    if (!tensor.ParseFromString(readBytes(sets[0] / ("output_" + std::to_string(o) + ".pb")))) return {Outcome::skipped, "output " + std::to_string(o) + " is no tensor"};
    if (tensor.data_type() != onnx::TensorProto::FLOAT && tensor.data_type() != onnx::TensorProto::BOOL) {
      return {Outcome::skipped, "an output of ONNX type " + std::to_string(tensor.data_type()) + " (glnet computes float32 and booleans as 0 and 1)"};
    }
  }
  std::vector<std::string> kept;  // the inputs fed each run, in order
  std::optional<OnnxModel> loaded;
  std::string refusal;
  for (const auto* bound : {&integerInputs, &allButFirst}) {
    if (bound == &allButFirst && (allButFirst.empty() || (refusal.find("must be a constant") == std::string::npos &&
                                                          refusal.find("must be constant") == std::string::npos))) {
      break;
    }
    fs::path path = modelPath;
    if (!bound->empty()) {
      path = scratch / "model.onnx";
      bindInputs(proto, *bound, path);
    }
    try {
      loaded.emplace(readOnnx(path.string(), 0));
      kept.clear();
      for (const std::string& name : inputNames) {
        if (!bound->count(name)) kept.push_back(name);
      }
      refusal.clear();
      break;
    } catch (const Error& error) {
      refusal = error.what();
    }
  }
  if (!loaded) return {Outcome::skipped, reasonOf(refusal)};
  std::vector<std::vector<TestTensor>> inputs(sets.size()), outputs(sets.size());
  try {
    for (std::size_t s = 0; s < sets.size(); ++s) {
      for (std::size_t i = 0; i < inputNames.size(); ++i) {
        if (std::find(kept.begin(), kept.end(), inputNames[i]) != kept.end()) inputs[s].push_back(readTestTensor(sets[s] / ("input_" + std::to_string(i) + ".pb")));
      }
      for (int i = 0; fs::exists(sets[s] / ("output_" + std::to_string(i) + ".pb")); ++i) outputs[s].push_back(readTestTensor(sets[s] / ("output_" + std::to_string(i) + ".pb")));
    }
  } catch (const Error& error) {
    return {Outcome::skipped, reasonOf(error.what())};
  }
  if (loaded->dynamicBatch && !inputs[0].empty() && !inputs[0][0].shape.empty() && inputs[0][0].shape[0] != 1) {
    try {
      loaded.emplace(readOnnx((kept.size() == inputNames.size() ? modelPath : scratch / "model.onnx").string(), static_cast<std::uint32_t>(inputs[0][0].shape[0])));
    } catch (const Error& error) {
      return {Outcome::skipped, reasonOf(error.what())};
    }
  }
  OnnxModel& m = *loaded;
  try {
    std::vector<Tensor> results;
    for (const auto& output : m.outputs) results.push_back(output.second);
    CompiledGraph compiled(context, m.graph, CompiledGraph::Memory::reused, results);
    Plan plan = compiled.forwardPlan([](Plan&) {});
    for (std::size_t s = 0; s < sets.size(); ++s) {
      if (inputs[s].size() != m.inputs.size() || outputs[s].size() != m.outputs.size()) {
        return {Outcome::failed, "the data has " + std::to_string(inputs[s].size()) + " inputs and " + std::to_string(outputs[s].size()) +
                                     " outputs; the model " + std::to_string(m.inputs.size()) + " and " + std::to_string(m.outputs.size())};
      }
      for (std::size_t i = 0; i < inputs[s].size(); ++i) {
        const Shape& shape = m.graph.tensor(m.inputs[i].second).shape;
        if (std::vector<std::int64_t>(shape.begin(), shape.end()) != inputs[s][i].shape) {
          return {Outcome::failed, "input " + m.inputs[i].first + " is " + shapeText(inputs[s][i].shape) + " in the data, " +
                                       describe(shape) + " in the graph"};
        }
        compiled.upload(m.inputs[i].second, inputs[s][i].values.data(), inputs[s][i].values.size() * sizeof(float));
      }
      plan.run();
      for (std::size_t o = 0; o < outputs[s].size(); ++o) {
        const Tensor tensor = m.outputs[o].second;
        const Shape& shape = m.graph.tensor(tensor).shape;
        const TestTensor& want = outputs[s][o];
        if (std::vector<std::int64_t>(shape.begin(), shape.end()) != want.shape) {
          return {Outcome::failed, "output " + m.outputs[o].first + " is " + describe(shape) + ", expected " + shapeText(want.shape)};
        }
        std::vector<float> got(want.values.size());
        const BufferView view = compiled.view(tensor);
        plan.read(*view.buffer, got.data(), got.size() * sizeof(float), view.offset);
        for (std::size_t k = 0; k < got.size(); ++k) {
          const double expected = want.values[k];
          const bool bothNan = std::isnan(expected) && std::isnan(got[k]);
          const bool sameInfinity = std::isinf(expected) && got[k] == expected;
          if (!bothNan && !sameInfinity && !(std::abs(got[k] - expected) <= 1e-7 + 1e-3 * std::abs(expected))) {
            std::ostringstream text;
            text << "output " << m.outputs[o].first << "[" << k << "] is " << got[k] << ", expected " << expected;
            return {Outcome::failed, text.str()};
          }
        }
      }
    }
  } catch (const Error& error) {
    return {Outcome::failed, std::string("run: ") + error.what()};
  }
  return {Outcome::passed, ""};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "usage: onnx_conformance DATA_DIR [--table FILE] [--filter TEXT] [--verbose]\n");
    return argc < 2 ? 2 : 0;
  }
  const fs::path data = argv[1];
  std::string tablePath, filter;
  bool verbose = false;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--table" && i + 1 < argc) tablePath = argv[++i];
    else if (flag == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (flag == "--verbose") verbose = true;
    else {
      std::fprintf(stderr, "onnx_conformance: error: unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  try {
    if (!fs::is_directory(data / "node")) throw Error(data.string() + " holds no node/ cases (install libonnx-testdata)");
    const Context context{ContextOptions{}};
    const fs::path scratch = fs::temp_directory_path() / ("glnet-conformance-" + std::to_string(::getpid()));
    fs::create_directories(scratch);
    struct Row {
      int passed = 0, failed = 0;
      std::map<std::string, int> skipped;  // reason → cases
      std::vector<std::string> failures;
    };
    std::map<std::string, Row> table;
    int passed = 0, failed = 0, skipped = 0;
    for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
      if (!fs::is_directory(data / suite)) continue;
      std::vector<fs::path> cases;
      for (const auto& entry : fs::directory_iterator(data / suite)) {
        if (fs::exists(entry.path() / "model.onnx") && entry.path().string().find(filter) != std::string::npos) cases.push_back(entry.path());
      }
      std::sort(cases.begin(), cases.end());
      for (const fs::path& directory : cases) {
        const std::string key = opTypesOf(directory / "model.onnx");
        const Result result = runCase(context, directory, scratch);
        Row& row = table[key];
        const std::string name = std::string(suite) + "/" + directory.filename().string();
        switch (result.outcome) {
          case Outcome::passed: ++row.passed, ++passed; break;
          case Outcome::failed:
            ++row.failed, ++failed;
            row.failures.push_back(name + ": " + result.detail);
            break;
          case Outcome::skipped: ++row.skipped[result.detail], ++skipped; break;
        }
        if (verbose) {
          std::printf("%-60s %s %s\n", name.c_str(), result.outcome == Outcome::passed ? "passed" : result.outcome == Outcome::failed ? "FAILED" : "skipped",
                      result.detail.c_str());
        }
      }
    }
    std::ostringstream out;
    out << "| op types of the case's model | passed | failed | skipped | reasons skipped (cases) |\n|---|---|---|---|---|\n";
    for (const auto& [key, row] : table) {
      int skips = 0;
      std::string reasons;
      for (const auto& [reason, count] : row.skipped) {
        skips += count;
        reasons += (reasons.empty() ? "" : "; ") + reason + " (" + std::to_string(count) + ")";
      }
      out << "| " << key << " | " << row.passed << " | " << row.failed << " | " << skips << " | " << reasons << " |\n";
    }
    out << "\n" << passed + failed + skipped << " cases: " << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
    for (const auto& [key, row] : table) {
      for (const std::string& failure : row.failures) out << "FAILED " << failure << "\n";
    }
    fs::remove_all(scratch);
    std::cout << out.str();
    if (!tablePath.empty()) std::ofstream(tablePath) << out.str();
    return failed == 0 ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "onnx_conformance: error: %s\n", error.what());
    return 1;
  }
}
