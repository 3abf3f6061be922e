#include "bench/ModelBenchmark.h"

#include "base/Stopwatch.h"
#include "base/check.h"

#include <algorithm>
#include <random>

namespace glnet {

BenchInput parseBenchInput(const std::string& text) {
  if (text == "uniform") return {BenchInput::Kind::uniform};
  if (text == "ones") return {BenchInput::Kind::ones};
  if (text == "zeros") return {BenchInput::Kind::zeros};
  if (text.rfind("ids:", 0) == 0) {
    const std::string bound = text.substr(4);
    if (!bound.empty() && bound.size() <= 8 && std::all_of(bound.begin(), bound.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        std::stoul(bound) >= 1 && std::stoul(bound) <= (1u << 24)) {
      return {BenchInput::Kind::ids, static_cast<std::uint32_t>(std::stoul(bound))};
    }
  }
  throw UsageError("an input's values are uniform, ones, zeros or ids:V (whole numbers below V, 1 to 16777216), not '" + text + "'");
}

std::vector<ModelBenchRow> benchmarkModel(OnnxRunner& runner, const std::vector<std::uint32_t>& batches, int warmup, int runs,
                                          std::uint32_t seed, const std::function<void(const std::string&)>& progress,
                                          const ModelBenchSetup& setup) {
  for (const auto& [name, input] : setup.inputs) {
    const auto port = std::find_if(runner.inputs().begin(), runner.inputs().end(), [&](const OnnxPort& p) { return p.name == name; });
    if (port == runner.inputs().end()) throw UsageError(runner.path() + " has no input " + name);
    if (port->dtype == "bool" && input.kind == BenchInput::Kind::ids && input.bound > 2) {
      throw UsageError("input " + name + " is bool: its values are ones, zeros or ids:2, not ids:" + std::to_string(input.bound));
    }
  }
  std::vector<ModelBenchRow> rows;
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  // Every batch's shapes first, so that a bad batch or dimension is refused before any work.
  std::vector<InputShapes> bindings;
  for (const std::uint32_t batch : batches) bindings.push_back(runner.batchShapes(batch, setup.dimensions));
  for (std::size_t b = 0; b < batches.size(); ++b) {
    const std::uint32_t batch = batches[b];
    if (progress) progress("batch " + std::to_string(batch));
    ModelBenchRow row;
    row.batch = batch;
    row.shapes = bindings[b];
    const InputShapes& shapes = row.shapes;
    Stopwatch compileClock;
    const OnnxModel& model = runner.model(shapes);
    row.compileMs = compileClock.milliseconds();
    row.activationBytes = runner.activationBytes(shapes);
    std::vector<std::vector<float>> values;
    std::vector<const float*> feeds;
    for (std::size_t i = 0; i < model.inputs.size(); ++i) {
      const OnnxPort& port = runner.inputs()[i];
      const auto given = setup.inputs.find(port.name);
      const BenchInput input = given != setup.inputs.end() ? given->second : BenchInput{port.dtype == "float32" || port.dtype == "uint8"
                                                                                             ? BenchInput::Kind::uniform
                                                                                             : BenchInput::Kind::ones};
      values.emplace_back(elementCount(model.graph.tensor(model.inputs[i].second).shape));
      std::uniform_int_distribution<std::uint32_t> ids(0, std::max<std::uint32_t>(input.bound, 1) - 1);
      for (float& v : values.back()) {
        switch (input.kind) {
          case BenchInput::Kind::uniform: v = uniform(random); break;
          case BenchInput::Kind::ones: v = 1; break;
          case BenchInput::Kind::zeros: v = 0; break;
          case BenchInput::Kind::ids: v = static_cast<float>(ids(random)); break;
        }
      }
      feeds.push_back(values.back().data());
    }
    if (setup.tune) {
      row.tuning = tuneGemms(runner, shapes, feeds, runs, [&](const std::string& candidate) {
        if (progress) progress("batch " + std::to_string(batch) + ": tuning GEMMs, " + candidate);
      });
      Stopwatch tunedCompileClock;
      runner.model(shapes);
      row.compileMs = tunedCompileClock.milliseconds();
      row.activationBytes = runner.activationBytes(shapes);  // the tuned plan's: its split sums' workspace may differ
    }
    for (int w = 0; w < warmup; ++w) runner.run(feeds, shapes);
    std::vector<double> upload, issue, readback, endToEnd;
    for (int r = 0; r < runs; ++r) {
      RunTimes times;
      runner.run(feeds, shapes, &times);
      upload.push_back(times.uploadMs);
      issue.push_back(times.issueMs);
      readback.push_back(times.readbackMs);
      endToEnd.push_back(times.uploadMs + times.issueMs + times.readbackMs);
    }
    row.uploadMs = summarize(upload);
    row.issueMs = summarize(issue);
    row.readbackMs = summarize(readback);
    row.endToEndMs = summarize(endToEnd);
    row.profile = runner.profile(shapes, runs);
    row.gpuMs = summarize(row.profile.runMs);
    for (const NodeTime& node : row.profile.nodes) row.dispatches += node.dispatches;
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace glnet
