// glnet_run: runs an ONNX model on a NumPy input and writes its output as .npy.
#include "common/Cli.h"
#include "formats/Npy.h"
#include "formats/Onnx.h"
#include "gl/Stopwatch.h"
#include "gl/check.h"
#include "graph/CompiledGraph.h"
#include "graph/ReferenceGraph.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>

using namespace glnet;

namespace {

// "name=FILE" or "FILE": the name (empty when not given) and the file.
std::pair<std::string, std::string> namedFile(const std::string& text) {
  const std::size_t equals = text.find('=');
  if (equals == std::string::npos) return {"", text};
  return {text.substr(0, equals), text.substr(equals + 1)};
}

}  // namespace

int main(int argc, char** argv) {
  return cli::run("glnet_run", [&] {
    cli::Parser parser("glnet_run",
                       "Runs an ONNX model (as torch.onnx.export writes it) on the GPU: the input from a NumPy .npy file\n"
                       "(float32 or float64, C order), the output written as float32 .npy. The whole model is checked when\n"
                       "it loads; an op, attribute or shape glnet cannot run yet is refused in one line naming the node.",
                       "--model M.onnx --input [NAME=]X.npy --output [NAME=]Y.npy [options]");
    parser.option("model", "FILE", "the ONNX model")
        .option("input", "[NAME=]FILE", "the input tensor as .npy (NAME: the model's input name, checked when given)")
        .option("output", "[NAME=]FILE", "where to write the output tensor as .npy")
        .option("batch", "N", "images per run for a model with a dynamic batch: the input's rows are repeated to fill it "
                              "(default: the input's first dimension)")
        .option("repeat", "N", "run the model N times (with --time: the median is reported)", "1")
        .flag("time", "print upload, GPU run and readback times")
        .flag("check", "also run the model in float64 on the CPU and report the largest difference")
        .flag("profile", "time every dispatch on the GPU (timestamp queries, --repeat runs) and list the nodes by GPU time")
        .common(true);
    parser.parse(argc, argv);
    for (const char* required : {"model", "input", "output"}) {
      if (!parser.has(required)) throw UsageError(std::string("--") + required + " is required");
    }
    const auto [inputName, inputPath] = namedFile(parser.text("input"));
    const auto [outputName, outputPath] = namedFile(parser.text("output"));
    const int repeat = static_cast<int>(parser.integer("repeat", 1, 1000000));
    const bool json = parser.has("json");
    checkWritable(outputPath);
    const ContextOptions contextOptions = parser.contextOptions();

    const NpyArray input = readNpy(inputPath);
    if (input.shape.empty() || input.shape[0] < 1) throw Error(inputPath + ": the input needs a batch dimension of at least 1");
    const auto rows = static_cast<std::uint32_t>(input.shape[0]);
    const auto batch = parser.has("batch") ? static_cast<std::uint32_t>(parser.integer("batch", 1, 1 << 20)) : rows;
    const OnnxModel model = readOnnx(parser.text("model"), batch);
    if (!inputName.empty() && inputName != model.inputName) {
      throw UsageError("the model's input is named " + model.inputName + ", not " + inputName);
    }
    if (!outputName.empty() && outputName != model.outputName) {
      throw UsageError("the model's output is named " + model.outputName + ", not " + outputName);
    }
    if (batch != rows && !model.dynamicBatch) {
      throw UsageError("--batch " + std::to_string(batch) + " differs from the input's " + std::to_string(rows) + " rows, and the model's batch is fixed");
    }
    const Shape& shape = model.graph.tensor(model.input).shape;
    const std::vector<std::int64_t> perRow(input.shape.begin() + 1, input.shape.end());
    if (perRow != std::vector<std::int64_t>(shape.begin() + 1, shape.end())) {
      std::string wanted;
      for (std::size_t i = 1; i < shape.size(); ++i) wanted += (i > 1 ? ", " : "") + std::to_string(shape[i]);
      throw Error(inputPath + ": each row of the input must be [" + wanted + "] for input " + model.inputName);
    }
    const std::size_t rowValues = input.values.size() / rows;
    std::vector<float> values(std::size_t{batch} * rowValues);
    for (std::size_t r = 0; r < batch; ++r) {
      std::copy_n(input.values.begin() + static_cast<std::ptrdiff_t>((r % rows) * rowValues), rowValues,
                  values.begin() + static_cast<std::ptrdiff_t>(r * rowValues));
    }

    const Context context(contextOptions);
    std::FILE* info = json ? stderr : stdout;
    std::fprintf(info, "device %d: %s\n", context.device().index, context.device().renderer.c_str());
    Stopwatch compileClock;
    std::vector<Tensor> results;
    for (const auto& output : model.outputs) results.push_back(output.second);
    CompiledGraph compiled(context, model.graph, CompiledGraph::Memory::reused, results);
    Plan plan = compiled.forwardPlan([](Plan&) {});
    const double compileMs = compileClock.milliseconds();
    const Shape& outputShape = model.graph.tensor(model.output).shape;
    NpyArray output{{outputShape.begin(), outputShape.end()}, std::vector<float>(elementCount(outputShape))};
    std::vector<double> uploadMs, runMs, readMs;
    for (int r = 0; r < repeat; ++r) {
      Stopwatch clock;
      compiled.upload(model.input, values.data(), values.size() * sizeof(float));
      uploadMs.push_back(clock.restart());
      plan.run();
      runMs.push_back(clock.restart());
      const BufferView view = compiled.view(model.output);
      plan.read(*view.buffer, output.values.data(), output.values.size() * sizeof(float), view.offset);
      readMs.push_back(clock.restart());
    }
    if (!std::all_of(output.values.begin(), output.values.end(), [](float v) { return std::isfinite(v); })) {
      throw Error("the output holds NaN or infinite values; " + outputPath + " was not written");
    }
    writeNpy(outputPath, output);

    nlohmann::json report = {{"device", context.device().renderer}, {"model", parser.text("model")}, {"batch", batch},
                             {"output", outputPath}, {"output_shape", output.shape}, {"activation_bytes", compiled.activationBytes()}};
    std::fprintf(info, "ran %s (%zu nodes, opset %lld) on %u rows; wrote %s\n", parser.text("model").c_str(), model.nodes.size(),
                 static_cast<long long>(model.opset), batch, outputPath.c_str());
    std::fprintf(info, "activation memory: %.1f MiB (intermediate tensors sharing memory by liveness, and the ops' scratch)\n",
                 static_cast<double>(compiled.activationBytes()) / (1 << 20));
    if (parser.has("check")) {
      const std::vector<std::vector<double>> reference =
          referenceValues(model.graph, {{model.input.id, std::vector<double>(values.begin(), values.end())}});
      const std::vector<double>& expected = reference[static_cast<std::size_t>(model.output.id)];
      double worst = 0, largest = 0;
      for (std::size_t i = 0; i < expected.size(); ++i) {
        worst = std::max(worst, std::abs(expected[i] - output.values[i]));
        largest = std::max(largest, std::abs(expected[i]));
      }
      report["check"] = {{"max_abs_difference", worst}, {"max_abs_reference", largest}};
      std::fprintf(info, "float64 check: largest difference %.3g, largest output %.3g (%.3g relative)\n", worst, largest,
                   largest > 0 ? worst / largest : worst);
    }
    if (parser.has("time")) {
      const auto median = [](std::vector<double> v) {
        std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
        return v[v.size() / 2];
      };
      report["times_ms"] = {{"compile", compileMs}, {"upload", median(uploadMs)}, {"issue", median(runMs)}, {"readback", median(readMs)}};
      std::fprintf(info, "times in ms (median of %d): compile %.2f, upload %.3f, issue %.3f (CPU time to submit the dispatches), "
                         "readback %.3f (waits for the GPU, then copies the output)\n",
                   repeat, compileMs, median(uploadMs), median(runMs), median(readMs));
    }
    if (parser.has("profile")) {
      // Median per dispatch over the runs, summed per op node: where the GPU time goes.
      std::vector<std::vector<double>> perStep;
      for (int r = 0; r < repeat; ++r) {
        const std::vector<double> times = plan.runTimed();
        perStep.resize(times.size());
        for (std::size_t i = 0; i < times.size(); ++i) perStep[i].push_back(times[i]);
      }
      const std::vector<int>& stepNodes = compiled.forwardStepNodes();
      std::map<int, double> perNode;
      double total = 0;
      for (std::size_t i = 0; i < perStep.size(); ++i) {
        std::vector<double>& v = perStep[i];
        std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
        perNode[i < stepNodes.size() ? stepNodes[i] : -1] += v[v.size() / 2];
        total += v[v.size() / 2];
      }
      std::vector<std::pair<double, int>> ranked;
      for (const auto& [node, ms] : perNode) ranked.emplace_back(ms, node);
      std::sort(ranked.rbegin(), ranked.rend());
      nlohmann::json nodes = nlohmann::json::array();
      std::fprintf(info, "GPU time %.3f ms in %zu dispatches (median per dispatch of %d runs); by node:\n", total, perStep.size(), repeat);
      for (std::size_t k = 0; k < ranked.size(); ++k) {
        const auto [ms, node] = ranked[k];
        const OpNode* op = node >= 0 ? &model.graph.ops()[static_cast<std::size_t>(node)] : nullptr;
        const std::string name = op ? model.graph.tensors()[static_cast<std::size_t>(op->output)].name : "(other)";
        const std::string kernel = op ? op->op->name() : "";
        const std::string shape = op ? describe(model.graph.tensors()[static_cast<std::size_t>(op->output)].shape) : "";
        nodes.push_back({{"node", name}, {"kernel", kernel}, {"output_shape", shape}, {"gpu_ms", ms}});
        if (k < 20 || parser.has("verbose")) std::fprintf(info, "  %8.3f ms %5.1f%%  %-40s %-28s %s\n", ms, 100 * ms / total, name.c_str(), kernel.c_str(), shape.c_str());
      }
      if (ranked.size() > 20 && !parser.has("verbose")) std::fprintf(info, "  ... %zu more nodes (--verbose lists them)\n", ranked.size() - 20);
      report["profile"] = {{"gpu_ms", total}, {"dispatches", perStep.size()}, {"nodes", nodes}};
    }
    if (json) std::cout << report.dump(2) << "\n";
    return 0;
  });
}
