// glnet_bench: where the time goes on this device — upload, issue, GPU per dispatch, fence, readback — for
// MNIST inference at several batch sizes, naive against chained execution, a training step, and the
// reference elementwise workload; table on stdout, --csv and --json files.
#include "common/Cli.h"
#include "gl/check.h"
#include "model/Benchmarks.h"
#include "model/Network.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>

using namespace glnet;

namespace {

std::vector<std::size_t> parseBatches(const std::string& text) {
  std::vector<std::size_t> batches;
  std::istringstream parts(text);
  std::string part;
  while (std::getline(parts, part, ',')) {
    char* end = nullptr;
    const long batch = std::strtol(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || batch < 1 || batch > 1000000) {
      throw UsageError("--batches takes sizes from 1 to 1000000 separated by commas, not '" + part + "'");
    }
    batches.push_back(static_cast<std::size_t>(batch));
  }
  return batches;
}

std::string csv(const BenchReport& report) {
  std::string text = "section,batch,stage,median_ms,p10_ms,p90_ms,runs\n";
  char line[512];
  for (const BenchRow& row : report.rows) {
    std::snprintf(line, sizeof line, "%s,%zu,\"%s\",%.6f,%.6f,%.6f,%zu\n", row.section.c_str(), row.batch, row.stage.c_str(),
                  row.ms.median, row.ms.p10, row.ms.p90, row.ms.runs);
    text += line;
  }
  return text;
}

nlohmann::json toJson(const Context& context, const BenchReport& report, const Network& model) {
  nlohmann::json rows = nlohmann::json::array();
  for (const BenchRow& row : report.rows) {
    rows.push_back({{"section", row.section}, {"batch", row.batch}, {"stage", row.stage}, {"median_ms", row.ms.median},
                    {"p10_ms", row.ms.p10}, {"p90_ms", row.ms.p90}, {"runs", row.ms.runs}});
  }
  nlohmann::json cold = nlohmann::json::object();
  for (const auto& [name, ms] : report.coldStart) cold[name] = ms;
  return {{"device", context.device().renderer}, {"gl_version", context.device().glVersion}, {"model", model.architecture},
          {"persistent_maps", report.persistentMaps}, {"training_dispatches", report.trainingDispatches},
          {"cold_start_ms", cold}, {"rows", rows}, {"failures", report.failures}};
}

}  // namespace

int main(int argc, char** argv) {
  return cli::run("glnet_bench", [&] {
    cli::Parser parser("glnet_bench",
                       "Measures MNIST inference stage by stage for each batch size (upload of uint8 pixels, CPU time to\n"
                       "issue the plan, GPU time per dispatch by timestamp queries, fence wait, readback by\n"
                       "glGetBufferSubData, glMapBufferRange and a persistent map), the naive way (sync and read after every\n"
                       "dispatch) against the chained plan, one training step, and the normalize-weigh-tanh workload on 1M\n"
                       "floats as 3 dispatches and fused. Results are checked against the CPU; times are median, p10 and p90.",
                       "[options]");
    parser.option("model", "FILE", "model to run (default: a random 784-128-10)")
        .option("batches", "N,N,...", "inference batch sizes", "1,8,64,512,4096,10000")
        .option("runs", "N", "measured runs per stage", "20")
        .option("warmup", "N", "unmeasured runs first", "3")
        .option("elementwise", "N", "floats in the elementwise workload", "1000000")
        .option("csv", "FILE", "write the rows as CSV")
        .option("json", "FILE", "write the report as JSON")
        .common(false);
    parser.parse(argc, argv);
    BenchSettings settings;
    settings.batches = parseBatches(parser.text("batches"));
    settings.runs = static_cast<int>(parser.integer("runs", 1, 100000));
    settings.warmup = static_cast<int>(parser.integer("warmup", 0, 100000));
    settings.elementwiseCount = static_cast<std::size_t>(parser.integer("elementwise", 1, 1 << 26));
    for (const char* file : {"csv", "json"}) {
      if (parser.has(file)) checkWritable(parser.text(file));
    }
    const Network model = parser.has("model") ? Network::load(parser.text("model")) : Network::create("784-128-10", Activation::relu, 1);
    const Context context(parser.contextOptions());
    std::printf("device %d: %s (%s)\nmodel %s; %d warm-up and %d measured runs; times in ms: median [p10, p90]\n",
                context.device().index, context.device().renderer.c_str(), context.device().glVersion.c_str(),
                model.architecture.c_str(), settings.warmup, settings.runs);
    std::fflush(stdout);
    const BenchReport report = runBenchmarks(context, model, settings, [](const std::string& workload) {
      std::fprintf(stderr, "glnet_bench: %s\n", workload.c_str());
    });

    std::printf("\ncold start:\n");
    for (const auto& [name, ms] : report.coldStart) std::printf("  %-70s %9.3f\n", name.c_str(), ms);
    std::string section;
    for (const BenchRow& row : report.rows) {
      if (row.section != section) {
        section = row.section;
        std::printf("\n%-20s %8s  %-42s %10s %10s %10s\n", section.c_str(), "batch", "stage", "median", "p10", "p90");
      }
      std::printf("%-20s %8zu  %-42s %10.4f %10.4f %10.4f\n", "", row.batch, row.stage.c_str(), row.ms.median, row.ms.p10, row.ms.p90);
    }
    if (!report.persistentMaps) std::printf("\npersistent maps: absent (no GL_ARB_buffer_storage)\n");
    std::printf("\nnaive (sync and read after each dispatch) against chained (one read at the end):\n");
    for (const std::size_t batch : settings.batches) {
      const BenchRow* naive = report.find("inference", batch, "naive: sync and read every dispatch");
      const BenchRow* chained = report.find("inference", batch, "chained, read by getBufferSubData");
      if (naive && chained && chained->ms.median > 0) {
        std::printf("  batch %6zu: %.4f ms against %.4f ms, %.1fx\n", batch, naive->ms.median, chained->ms.median,
                    naive->ms.median / chained->ms.median);
      }
    }
    std::printf("training step: %zu dispatches\n", report.trainingDispatches);
    if (parser.has("csv")) writeFileAtomically(parser.text("csv"), csv(report));
    if (parser.has("json")) writeFileAtomically(parser.text("json"), toJson(context, report, model).dump(2) + "\n");
    for (const std::string& failure : report.failures) std::fprintf(stderr, "glnet_bench: check failed: %s\n", failure.c_str());
    if (!report.failures.empty()) throw Error(std::to_string(report.failures.size()) + " correctness checks failed");
    std::printf("all results checked against the CPU: ok\n");
    return 0;
  });
}
