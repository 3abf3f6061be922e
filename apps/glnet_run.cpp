// glnet_run: runs an ONNX model on a NumPy input and writes its output as .npy.
#include "common/Cli.h"
#include "common/NodeTimes.h"
#include "formats/Npy.h"
#include "base/Stopwatch.h"
#include "base/check.h"
#include "graph/ReferenceGraph.h"
#include "model/OnnxRunner.h"
#include "plan/Statistics.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>

using namespace glnet;

namespace {

// "name=FILE" or "FILE" of --`option`: the name (empty when not given) and the file. "=FILE" is refused, not taken
// for a file given by position.
std::pair<std::string, std::string> namedFile(const std::string& text, const std::string& option) {
  const std::size_t equals = text.find('=');
  if (equals == std::string::npos) return {"", text};
  if (equals == 0) throw UsageError("--" + option + ": empty " + option + " name before '='");
  return {text.substr(0, equals), text.substr(equals + 1)};
}

}  // namespace

int main(int argc, char** argv) {
  return cli::run("glnet_run", [&] {
    cli::Parser parser("glnet_run",
                       "Runs an ONNX model (as torch.onnx.export writes it) on the GPU: its inputs from NumPy .npy files\n"
                       "(float32, float64 or float16; uint8 pixels; int64, int32 or bool token ids and masks; C order), each\n"
                       "symbolic dimension (batch, sequence) taking the file's length; its outputs written as float32 .npy. The whole model is checked when\n"
                       "it loads; an op, attribute or shape glnet cannot run yet is refused in one line naming the node.",
                       "--model M.onnx --input [NAME=]X.npy --output [NAME=]Y.npy [options]");
    parser.option("model", "FILE", "the ONNX model")
        .option("input", "[NAME=]FILE", "an input tensor as .npy, by the model's input NAME or in the model's order; once per input")
        .option("output", "[NAME=]FILE", "where to write an output tensor as .npy, by NAME or in the model's order; as many as wanted")
        .option("batch", "N", "images per run for a model with a dynamic batch: the input's rows are repeated to fill it "
                              "(default: the input's first dimension)")
        .option("repeat", "N", "run the model N times (with --time: the median is reported)", "1")
        .option("warmup", "N", "unmeasured runs first (a GPU raises its clocks under load: give a few hundred for steady timings)", "0")
        .flag("time", "print upload, GPU run and readback times")
        .flag("check", "also run the model in float64 on the CPU and report the largest difference")
        .flag("profile", "time every dispatch on the GPU (timestamp queries, --repeat runs) and list the nodes by GPU time")
        .common(true);
    parser.repeatable("input").repeatable("output");
    parser.parse(argc, argv);
    for (const char* required : {"model", "input", "output"}) {
      if (!parser.has(required)) throw UsageError(std::string("--") + required + " is required");
    }
    const int repeat = static_cast<int>(parser.integer("repeat", 1, 1000000));
    const int warmup = static_cast<int>(parser.integer("warmup", 0, 1000000));
    const bool json = parser.has("json");
    const ContextOptions contextOptions = parser.contextOptions();

    // Inputs by name, or in the model's order where no name is given; the first one's rows are the batch.
    std::vector<std::pair<std::string, std::string>> inputFiles, outputFiles;
    for (const std::string& text : parser.texts("input")) inputFiles.push_back(namedFile(text, "input"));
    for (const std::string& text : parser.texts("output")) outputFiles.push_back(namedFile(text, "output"));
    for (const auto& [name, path] : outputFiles) checkWritable(path);
    std::vector<NpyArray> arrays;
    for (const auto& [name, path] : inputFiles) {
      arrays.push_back(readNpy(path));
      if (arrays.back().shape.empty() || arrays.back().shape[0] < 1) throw Error(path + ": the input needs a first dimension of at least 1");
    }
    // Each file's place among the model's inputs (outputs): by name, else by position.
    const auto match = [](const std::vector<OnnxPort>& ports, const std::vector<std::pair<std::string, std::string>>& files,
                          const char* what) {
      if (files.size() > ports.size()) {
        throw UsageError(std::to_string(files.size()) + " --" + what + " files for the model's " + std::to_string(ports.size()) + " " + what + "s");
      }
      std::vector<std::size_t> places;
      for (std::size_t f = 0; f < files.size(); ++f) {
        std::size_t place = f;
        if (!files[f].first.empty()) {
          const auto found = std::find_if(ports.begin(), ports.end(), [&](const OnnxPort& port) { return port.name == files[f].first; });
          if (found == ports.end()) {
            std::string names;
            for (const OnnxPort& port : ports) names += (names.empty() ? "" : ", ") + port.name;
            throw UsageError(std::string("the model's ") + what + (ports.size() > 1 ? "s are " : " is named ") + names + ", not " + files[f].first);
          }
          place = static_cast<std::size_t>(found - ports.begin());
        }
        if (std::find(places.begin(), places.end(), place) != places.end()) throw UsageError(std::string("two files for ") + what + " " + ports[place].name);
        places.push_back(place);
      }
      return places;
    };
    const Context context(contextOptions);
    std::FILE* info = json ? stderr : stdout;
    std::fprintf(info, "device %d: %s\n", context.device().index, context.device().renderer.c_str());
    OnnxRunner runner(context, parser.text("model"));
    const std::vector<std::size_t> inputPlaces = match(runner.inputs(), inputFiles, "input");
    if (inputFiles.size() != runner.inputs().size()) {
      throw UsageError("the model has " + std::to_string(runner.inputs().size()) + " inputs; give each with --input [NAME=]FILE");
    }
    // The batch: the rows of the file for the model's first input, or --batch.
    const std::size_t batchFile = static_cast<std::size_t>(std::find(inputPlaces.begin(), inputPlaces.end(), 0) - inputPlaces.begin());
    const auto rows = static_cast<std::uint32_t>(arrays[batchFile].shape[0]);
    const auto batch = parser.has("batch") ? static_cast<std::uint32_t>(parser.integer("batch", 1, 1 << 20)) : rows;
    if (batch != rows && !runner.dynamicBatch()) {
      throw UsageError("--batch " + std::to_string(batch) + " differs from the input's " + std::to_string(rows) + " rows, and the model's batch is fixed");
    }
    // Per input: its shape (the file's, each symbolic dimension taking the file's length, the batch --batch's) and its
    // values (rows repeated when the batch exceeds the file's).
    InputShapes shapes(runner.inputs().size());
    std::vector<std::vector<float>> values(runner.inputs().size());
    for (std::size_t f = 0; f < inputFiles.size(); ++f) {
      const OnnxPort& port = runner.inputs()[inputPlaces[f]];
      const std::string& name = port.name;
      const NpyArray& array = arrays[f];
      const std::string& path = inputFiles[f].second;
      const bool integerFile = array.dtype != "float32" && array.dtype != "float64" && array.dtype != "float16";
      if (port.dtype == "uint8" && array.dtype != "uint8") {
        throw Error(path + ": input " + name + " is uint8 (the model converts its pixels itself); this file holds " + array.dtype);
      }
      if (port.dtype == "float32" && integerFile) {
        throw Error(path + ": input " + name + " takes float32; this file holds " + array.dtype +
                    (array.dtype == "uint8" ? " (the model does not convert pixels: give float32 with its preprocessing applied)" : ""));
      }
      if ((port.dtype == "int64" || port.dtype == "int32") && (!integerFile || array.dtype == "bool")) {
        throw Error(path + ": input " + name + " takes " + port.dtype + " (token ids, indices); this file holds " + array.dtype +
                    " (save it with .astype(np.int64))");
      }
      if (port.dtype == "bool" && !integerFile) {
        throw Error(path + ": input " + name + " takes bool; this file holds " + array.dtype + " (save it with .astype(bool))");
      }
      if (port.dtype == "bool" && std::any_of(array.values.begin(), array.values.end(), [](float v) { return v != 0 && v != 1; })) {
        throw Error(path + ": input " + name + " takes bool; this file holds " + array.dtype + " values other than 0 and 1");
      }
      // The file's shape against the input's, each symbolic dimension shown by its name, so that a missing axis shows.
      bool fits = array.shape.size() == port.shape.size();
      for (std::size_t i = 0; fits && i < port.shape.size(); ++i) fits = !port.symbols[i].empty() || array.shape[i] == port.shape[i];
      if (!fits) {
        const auto list = [](const std::vector<std::string>& dimensions) {
          std::string text;
          for (const std::string& d : dimensions) text += (text.empty() ? "" : ", ") + d;
          return "[" + text + "]";
        };
        std::vector<std::string> got, wanted;
        for (const std::int64_t d : array.shape) got.push_back(std::to_string(d));
        for (std::size_t i = 0; i < port.shape.size(); ++i) {
          wanted.push_back(port.symbols[i].empty() ? std::to_string(port.shape[i]) : i == 0 && port.batched ? "N" : port.symbols[i]);
        }
        const bool noBatchAxis = port.batched && array.shape.size() + 1 == port.shape.size() &&
                                 std::equal(array.shape.begin(), array.shape.end(), port.shape.begin() + 1, [&](std::int64_t d, std::uint32_t p) { return d == p; });
        throw Error(path + ": got " + list(got) + "; expected " + list(wanted) + " for input " + name +
                    (noBatchAxis ? " (the batch axis is missing: save x[np.newaxis])" : ""));
      }
      Shape& shape = shapes[inputPlaces[f]];
      for (const std::int64_t d : array.shape) {
        if (d < 1 || d > (1 << 24)) throw Error(path + ": a dimension of " + std::to_string(d) + " in input " + name);
        shape.push_back(static_cast<std::uint32_t>(d));
      }
      const auto fileRows = static_cast<std::size_t>(array.shape[0]);
      if (port.batched && parser.has("batch")) shape[0] = batch;
      const std::size_t rowValues = array.values.size() / fileRows;
      values[inputPlaces[f]].resize(std::size_t{shape[0]} * rowValues);
      for (std::size_t r = 0; r < shape[0]; ++r) {
        std::copy_n(array.values.begin() + static_cast<std::ptrdiff_t>((r % fileRows) * rowValues), rowValues,
                    values[inputPlaces[f]].begin() + static_cast<std::ptrdiff_t>(r * rowValues));
      }
    }
    Stopwatch compileClock;
    const OnnxModel& model = runner.model(shapes);
    const double compileMs = compileClock.milliseconds();
    const std::vector<std::size_t> outputPlaces = match(runner.outputs(), outputFiles, "output");
    std::vector<const float*> feeds;
    for (const std::vector<float>& v : values) feeds.push_back(v.data());
    std::vector<std::vector<float>> results;
    std::vector<double> uploadMs, runMs, readMs;
    for (int w = 0; w < warmup; ++w) runner.run(feeds, shapes);
    for (int r = 0; r < repeat; ++r) {
      RunTimes times;
      try {
        results = runner.run(feeds, shapes, &times);
      } catch (const GpuFailure&) {
        throw;
      } catch (const Error& e) {
        throw Error(std::string(e.what()) + "; no output was written");
      }
      uploadMs.push_back(times.uploadMs);
      runMs.push_back(times.issueMs);
      readMs.push_back(times.readbackMs);
    }
    std::vector<NpyArray> outputs;
    for (const std::size_t place : outputPlaces) {
      const Shape& shape = model.graph.tensor(model.outputs[place].second).shape;
      outputs.push_back({{shape.begin(), shape.end()}, std::move(results[place])});
    }
    std::string written;
    for (std::size_t o = 0; o < outputs.size(); ++o) {
      writeNpy(outputFiles[o].second, outputs[o]);
      written += (written.empty() ? "" : ", ") + outputFiles[o].second;
    }
    const std::string outputPath = written;
    const NpyArray& output = outputs[0];
    nlohmann::json report = {{"device", context.device().renderer}, {"model", parser.text("model")}, {"batch", batch},
                             {"output", outputPath}, {"output_shape", output.shape}, {"activation_bytes", runner.activationBytes(shapes)}};
    std::fprintf(info, "ran %s (%zu nodes, opset %lld) on %u rows; wrote %s\n", parser.text("model").c_str(), runner.nodeCount(),
                 static_cast<long long>(runner.opset()), batch, outputPath.c_str());
    std::fprintf(info, "activation memory: %.1f MiB (intermediate tensors sharing memory by liveness, and the ops' scratch)\n",
                 static_cast<double>(runner.activationBytes(shapes)) / (1 << 20));
    if (parser.has("check")) {
      std::map<int, std::vector<double>> references;
      for (std::size_t i = 0; i < model.inputs.size(); ++i) references[model.inputs[i].second.id] = std::vector<double>(values[i].begin(), values[i].end());
      const std::vector<std::vector<double>> reference = referenceValues(model.graph, references);
      double worst = 0, largest = 0;
      for (std::size_t o = 0; o < outputs.size(); ++o) {
        const std::vector<double>& expected = reference[static_cast<std::size_t>(model.outputs[outputPlaces[o]].second.id)];
        for (std::size_t i = 0; i < expected.size(); ++i) {
          // NaN on both sides agrees, and so do equal infinities (whose difference is NaN); a NaN on one side only is the
          // largest difference there is (std::max would drop a NaN).
          const double got = outputs[o].values[i];
          const bool nanExpected = std::isnan(expected[i]), nanGot = std::isnan(got);
          worst = std::max(worst, nanExpected || nanGot ? (nanExpected == nanGot ? 0.0 : INFINITY) : expected[i] == got ? 0.0 : std::abs(expected[i] - got));
          if (!nanExpected) largest = std::max(largest, std::abs(expected[i]));
        }
      }
      report["check"] = {{"max_abs_difference", worst}, {"max_abs_reference", largest}};
      std::fprintf(info, "float64 check: largest difference %.3g, largest output %.3g (%.3g relative)\n", worst, largest,
                   largest > 0 ? worst / largest : worst);
    }
    if (parser.has("time")) {
      const auto median = [](const std::vector<double>& v) { return summarize(v).median; };
      report["times_ms"] = {{"compile", compileMs}, {"upload", median(uploadMs)}, {"issue", median(runMs)}, {"readback", median(readMs)}};
      std::fprintf(info, "times in ms (median of %d): compile %.2f, upload %.3f, issue %.3f (CPU time to submit the dispatches), "
                         "readback %.3f (waits for the GPU, then copies the output)\n",
                   repeat, compileMs, median(uploadMs), median(runMs), median(readMs));
    }
    if (parser.has("profile")) {
      const OnnxRunner::Profile profile = runner.profile(shapes, repeat);
      report["profile"] = cli::nodeTimesJson(profile);
      cli::printNodeTimes(info, profile, repeat, parser.has("verbose"));
    }
    if (json) std::cout << report.dump(2) << "\n";
    return 0;
  });
}
