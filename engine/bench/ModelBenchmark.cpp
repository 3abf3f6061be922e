#include "bench/ModelBenchmark.h"

#include "base/Stopwatch.h"

#include <random>

namespace glnet {

std::vector<ModelBenchRow> benchmarkModel(OnnxRunner& runner, const std::vector<std::uint32_t>& batches, int warmup, int runs,
                                          std::uint32_t seed, const std::function<void(const std::string&)>& progress) {
  std::vector<ModelBenchRow> rows;
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  for (const std::uint32_t batch : batches) {
    if (progress) progress("batch " + std::to_string(batch));
    ModelBenchRow row;
    row.batch = batch;
    Stopwatch compileClock;
    const OnnxModel& model = runner.model(batch);
    row.compileMs = compileClock.milliseconds();
    row.activationBytes = runner.activationBytes(batch);
    std::vector<std::vector<float>> values;
    std::vector<const float*> feeds;
    for (const auto& input : model.inputs) {
      values.emplace_back(elementCount(model.graph.tensor(input.second).shape));
      for (float& v : values.back()) v = uniform(random);
      feeds.push_back(values.back().data());
    }
    for (int w = 0; w < warmup; ++w) runner.run(feeds, batch);
    std::vector<double> upload, issue, readback, endToEnd;
    for (int r = 0; r < runs; ++r) {
      RunTimes times;
      runner.run(feeds, batch, &times);
      upload.push_back(times.uploadMs);
      issue.push_back(times.issueMs);
      readback.push_back(times.readbackMs);
      endToEnd.push_back(times.uploadMs + times.issueMs + times.readbackMs);
    }
    row.uploadMs = summarize(upload);
    row.issueMs = summarize(issue);
    row.readbackMs = summarize(readback);
    row.endToEndMs = summarize(endToEnd);
    row.profile = runner.profile(batch, runs);
    row.gpuMs = summarize(row.profile.runMs);
    for (const NodeTime& node : row.profile.nodes) row.dispatches += node.dispatches;
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace glnet
