// glnet_bench: where the time goes on this device — upload, issue, GPU per dispatch, fence, readback — for
// MNIST inference at several batch sizes, naive against chained execution, a training step, and the
// reference elementwise workload; table on stdout, --csv and --json files. With --gemm: the GEMM core in every
// operand layout of the dense and convolution ops, ms, TFLOP/s and the configuration chosen per shape.
#include "common/Cli.h"
#include "common/NodeTimes.h"
#include "common/Tuning.h"
#include "bench/ModelBenchmark.h"
#include "importer/Onnx.h"
#include "gl/Sync.h"
#include "base/check.h"
#include "bench/Benchmarks.h"
#include "bench/GemmBenchmarks.h"
#include "ops/Gemm.h"
#include "ops/GemmTuning.h"
#include "model/Network.h"
#include "train/TrainingTuning.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <optional>
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

// Today's UTC date, recorded with the device so that charts and tables say where and when they were measured.
std::string todayUtc() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[16];
  std::strftime(text, sizeof text, "%Y-%m-%d", &utc);
  return text;
}

std::string csv(const Context& context, const BenchReport& report) {
  std::string text = "section,batch,stage,median_ms,p10_ms,p90_ms,runs,device,date\n";
  std::string device = context.device().renderer;
  std::replace(device.begin(), device.end(), '"', '\'');
  char line[768];
  for (const BenchRow& row : report.rows) {
    std::snprintf(line, sizeof line, "%s,%zu,\"%s\",%.6f,%.6f,%.6f,%zu,\"%s\",%s\n", row.section.c_str(), row.batch, row.stage.c_str(),
                  row.ms.median, row.ms.p10, row.ms.p90, row.ms.runs, device.c_str(), todayUtc().c_str());
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
  return {{"device", context.device().renderer}, {"gl_version", context.device().glVersion}, {"date", todayUtc()}, {"model", model.architecture},
          {"persistent_maps", report.persistentMaps}, {"training_dispatches", report.trainingDispatches},
          {"training_barriers", report.trainingBarriers},
          {"cold_start_ms", cold}, {"rows", rows}, {"failures", report.failures}};
}

nlohmann::json gemmJson(const Context& context, const std::vector<GemmResult>& results) {
  nlohmann::json rows = nlohmann::json::array();
  for (const GemmResult& r : results) {
    const GemmCase& c = r.gemmCase;
    nlohmann::json row = {{"name", c.name}, {"layout", gemmLayoutName(c.layout)}, {"rows", c.rows()}, {"columns", c.columns()},
                          {"depth", c.depth()}, {"flops", c.flops()}, {"forced", r.forced}, {"dispatches", r.dispatches},
                          {"median_ms", r.ms.median}, {"p10_ms", r.ms.p10}, {"p90_ms", r.ms.p90}, {"runs", r.ms.runs},
                          {"tflops", r.tflops}, {"worst_error_units", r.worstError}, {"passed", r.passed}};
    if (c.layout == GemmLayout::convForward || c.layout == GemmLayout::convInputGradient || c.layout == GemmLayout::convWeightGradient) {
      const ConvShape& s = c.conv;
      row["conv"] = {{"batch", s.batch}, {"channels", s.channels}, {"height", s.height}, {"width", s.width},
                     {"out_channels", s.outChannels}, {"kernel", s.kernelHeight}, {"padding", s.padding}};
    } else {
      row["dense"] = {{"rows", c.dense.rows}, {"inputs", c.dense.inputs}, {"outputs", c.dense.outputs}};
    }
    rows.push_back(row);
  }
  return {{"device", context.device().renderer}, {"gl_version", context.device().glVersion}, {"date", todayUtc()}, {"gemm", rows}};
}

// glnet_bench --gemm: one line per case (and per forced configuration with --gemm-every-config).
int runGemm(const cli::Parser& parser) {
  GemmBenchSettings settings;
  settings.runs = static_cast<int>(parser.integer("runs", 1, 100000));
  settings.warmup = static_cast<int>(parser.integer("warmup", 0, 100000));
  if (parser.has("gemm-filter")) settings.filter = parser.text("gemm-filter");
  if (parser.has("gemm-max-gflop")) settings.maxGigaflop = parser.number("gemm-max-gflop");
  settings.everyConfiguration = parser.has("gemm-every-config");
  if (parser.has("json-out")) checkWritable(parser.text("json-out"));
  const bool json = parser.has("json");
  std::FILE* out = json ? stderr : stdout;  // with --json, stdout holds the JSON alone
  // Checked before any progress line, so that a wrong name is the only line on stderr.
  if (const char* forced = std::getenv("GLNET_GEMM_CONFIG"); forced && *forced) gemmConfigNamed(forced);
  const Context context(parser.contextOptions());
  std::fprintf(out, "device %d: %s (%s)\nGEMM through the dense and convolution ops; %d warm-up and %d measured runs; %s time\n",
              context.device().index, context.device().renderer.c_str(), context.device().glVersion.c_str(), settings.warmup,
              settings.runs, TimerQuery::clockName());
  std::fflush(stdout);
  const std::vector<GemmResult> results = runGemmBenchmarks(context, settings, [](const std::string& name) {
    std::fprintf(stderr, "glnet_bench: %s\n", name.c_str());
  });
  if (results.empty()) throw UsageError("no GEMM case matches --gemm-filter and --gemm-max-gflop");
  std::fprintf(out, "\n%-52s %-8s %10s %8s  %s\n", "case (GEMM rows x columns x depth)", "forced", "median ms", "TFLOP/s", "dispatches");
  std::size_t failures = 0;
  for (const GemmResult& r : results) {
    const std::string name = r.gemmCase.name + " (" + std::to_string(r.gemmCase.rows()) + "x" +
                             std::to_string(r.gemmCase.columns()) + "x" + std::to_string(r.gemmCase.depth()) + ")";
    std::fprintf(out, "%-52s %-8s %10.4f %8.2f  %s%s\n", name.c_str(), r.forced.empty() ? "rule" : r.forced.c_str(), r.ms.median,
                r.tflops, r.dispatches.c_str(), r.passed ? "" : "  CHECK FAILED");
    if (!r.passed) ++failures;
  }
  if (parser.has("json-out")) writeFileAtomically(parser.text("json-out"), gemmJson(context, results).dump(2) + "\n");
  if (json) std::cout << gemmJson(context, results).dump(2) << "\n";
  if (failures) throw Error(std::to_string(failures) + " GEMM results differ from float64 beyond tolerance");
  std::fprintf(out, "all results checked against float64 on %d sampled elements each: ok\n", gemmCheckedElements);
  return 0;
}

// A GEMM tuning's report line (what --tune did before the measurements).
void printTuning(std::FILE* out, const GemmTuningReport& t) {
  std::fprintf(out, "  GEMM tuning (before the runs above): %zu shapes under %zu candidates in %.1f s, %zu changed from the rule; "
                    "their GPU time %.4f ms, tuned %.4f ms; the whole plan %.4f ms, tuned %.4f ms%s; %s\n",
               t.shapes, t.candidates, t.seconds, t.changed, t.ruleMs, t.tunedMs, t.ruleTotalMs, t.tunedTotalMs,
               t.reverted ? " (not faster: the changes were dropped)" : "",
               t.path.empty() ? "kept for this process only (GLNET_CACHE=0)" : ("kept in " + t.path).c_str());
}

// glnet_bench --model M.onnx: any ONNX model, per batch size.
int runModelBench(const cli::Parser& parser, const std::vector<std::size_t>& batchSizes, int warmup, int runs) {
  const bool json = parser.has("json");
  std::FILE* out = json ? stderr : stdout;
  const Context context(parser.contextOptions());
  OnnxRunner runner(context, parser.text("model"));
  if (parser.has("tune")) checkCurrentGemmTuningWritable();
  std::vector<std::uint32_t> batches;
  for (const std::size_t batch : batchSizes) batches.push_back(static_cast<std::uint32_t>(batch));
  if (!runner.dynamicBatch() && (batches.size() != 1 || batches[0] != runner.ownBatch())) {
    std::fprintf(out, "note: the model's batch is fixed at %u; measuring that alone\n", runner.ownBatch());
    batches = {runner.ownBatch()};
  }
  ModelBenchSetup setup;
  std::string described;
  for (const std::string& text : parser.texts("input")) {
    const std::size_t equals = text.find('=');
    if (equals == std::string::npos || equals == 0) throw UsageError("--input takes NAME=VALUES (e.g. input_ids=ids:30522), not '" + text + "'");
    setup.inputs[text.substr(0, equals)] = parseBenchInput(text.substr(equals + 1));
    described += (described.empty() ? "" : ", ") + text;
  }
  setup.dimensions = parser.dimensions();
  for (const std::string& text : parser.texts("dim")) described += (described.empty() ? "" : ", ") + text;
  setup.tune = parser.has("tune");
  std::fprintf(out, "device %d: %s (%s)\nmodel %s (%zu nodes, opset %lld); inputs %s; %d warm-up and %d measured runs; "
                    "times in ms: median [p10, p90]\n",
               context.device().index, context.device().renderer.c_str(), context.device().glVersion.c_str(), parser.text("model").c_str(),
               runner.nodeCount(), static_cast<long long>(runner.opset()),
               described.empty() ? "uniform [0, 1), integers and booleans 1" : described.c_str(), warmup, runs);
  std::fflush(out);
  const std::vector<ModelBenchRow> rows = benchmarkModel(
      runner, batches, warmup, runs, 1, [](const std::string& step) { std::fprintf(stderr, "glnet_bench: %s\n", step.c_str()); }, setup);
  const auto stat = [](const Statistics& s) { return nlohmann::json{{"median", s.median}, {"p10", s.p10}, {"p90", s.p90}, {"runs", s.runs}}; };
  nlohmann::json report = {{"device", context.device().renderer}, {"gl_version", context.device().glVersion}, {"date", todayUtc()},
                           {"model", parser.text("model")}, {"batches", nlohmann::json::array()}};
  std::string csvText = "section,batch,stage,median_ms,p10_ms,p90_ms,runs,device,date\n";
  std::string device = context.device().renderer;
  std::replace(device.begin(), device.end(), '"', '\'');
  for (const ModelBenchRow& row : rows) {
    std::string shapes;
    for (const Shape& shape : row.shapes) shapes += (shapes.empty() ? "" : ", ") + describe(shape);
    std::fprintf(out, "\nbatch %u (inputs %s): compile %.1f ms, activation memory %.1f MiB, %zu dispatches, %zu barriers\n", row.batch,
                 shapes.c_str(), row.compileMs, static_cast<double>(row.activationBytes) / (1 << 20), row.dispatches, row.profile.barriers);
    const std::vector<std::pair<const char*, const Statistics*>> stages = {
        {"upload (float32 inputs)", &row.uploadMs}, {"issue (CPU)", &row.issueMs}, {"readback (waits for the GPU)", &row.readbackMs},
        {"end to end", &row.endToEndMs}, {"GPU (timestamps)", &row.gpuMs}};
    for (const auto& [stage, s] : stages) {
      std::fprintf(out, "  %-32s %10.4f [%.4f, %.4f]\n", stage, s->median, s->p10, s->p90);
      char line[512];
      std::snprintf(line, sizeof line, "model,%u,\"%s\",%.6f,%.6f,%.6f,%zu,\"%s\",%s\n", row.batch, stage, s->median, s->p10, s->p90, s->runs,
                    device.c_str(), todayUtc().c_str());
      csvText += line;
    }
    std::fprintf(out, "  images/s end to end: %.0f\n", row.endToEndMs.median > 0 ? 1000.0 * row.batch / row.endToEndMs.median : 0.0);
    nlohmann::json tuning;
    if (row.tuning) {
      printTuning(out, *row.tuning);
      tuning = cli::gemmTuningJson(*row.tuning);
    }
    cli::printNodeTimes(out, row.profile, runs, parser.has("verbose"));
    nlohmann::json inputShapes = nlohmann::json::array();
    for (const Shape& shape : row.shapes) inputShapes.push_back(shape);
    report["batches"].push_back({{"batch", row.batch}, {"input_shapes", inputShapes}, {"compile_ms", row.compileMs}, {"activation_bytes", row.activationBytes},
                                 {"upload_ms", stat(row.uploadMs)}, {"issue_ms", stat(row.issueMs)}, {"readback_ms", stat(row.readbackMs)},
                                 {"end_to_end_ms", stat(row.endToEndMs)}, {"gpu_ms", stat(row.gpuMs)}, {"profile", cli::nodeTimesJson(row.profile)},
                                 {"gemm_tuning", tuning}});
  }
  if (!TimerQuery::measuresGpu()) std::fprintf(out, "no GPU timer queries on this device: GPU times are wall time after glFinish\n");
  if (parser.has("csv")) writeFileAtomically(parser.text("csv"), csvText);
  if (parser.has("json-out")) writeFileAtomically(parser.text("json-out"), report.dump(2) + "\n");
  if (json) std::cout << report.dump(2) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return cli::run("glnet_bench", [&] {
    cli::Parser parser("glnet_bench",
                       "Measures MNIST inference stage by stage for each batch size (upload of uint8 pixels, CPU time to\n"
                       "issue the plan, GPU time per dispatch by timestamp queries, fence wait, readback by\n"
                       "glGetBufferSubData, glMapBufferRange and a persistent map; up to batch 1024 also a warm call of the\nserving path, pixels and answers in host-visible buffers), the naive way (sync and read after every\n"
                       "dispatch) against the chained plan, one training step, and the normalize-weigh-tanh workload on 1M\n"
                       "floats as 3 dispatches and fused. Results are checked against the CPU; times are median, p10 and p90.",
                       "[options]");
    parser.modelOptions("model to run (default: a random 784-128-10); an ONNX model (.onnx) is measured as it is, on random inputs:\n"
                        "per batch size upload, issue, readback, end to end, GPU time and the GPU time of every node")
        .option("batches", "N,N,...", "inference batch sizes (an ONNX model: 1,64)", "1,8,64,512,4096,10000")
        .option("input", "NAME=VALUES", "an ONNX model's input values: uniform (floats' default), ones (integers' and booleans'\n"
                                        "default), zeros, or ids:V (random whole numbers below V, e.g. input_ids=ids:30522); once per input")
        .dimensionOption()
        .flag("tune", "first time each GEMM shape of the plan under every configuration this device runs (whole, with\n"
                      "the rule's split of the sum, and cut in 2 and 4), and keep each shape's fastest in the device's\n"
                      "tuning cache (beside the program cache), which every later plan on this device reads (glnet_train's\n"
                      "too); GLNET_TUNE=0 ignores it. The plan: an ONNX --model's inference at each batch size, a glnet\n"
                      "model's (or the default MLP's) training step at --training-batch")
        .option("runs", "N", "measured runs per stage", "20")
        .option("warmup", "N", "unmeasured runs first", "3")
        .option("elementwise", "N", "floats in the elementwise workload", "1000000")
        .option("training-batch", "N", "images per training step (its dispatches are timed one by one)", "64")
        .option("training-steps", "N", "training steps per measured run, timed reading the loss after every step and\n"
                                       "once after all of them", "100")
        .option("csv", "FILE", "write the rows as CSV")
        .option("json-out", "FILE", "write the report as JSON to FILE")
        .flag("gemm", "benchmark the GEMM core instead: every operand layout of the dense and convolution ops on\n"
                      "square 1024 and 4096 and the models' shapes (GLNET_GEMM_CONFIG forces a configuration)")
        .option("gemm-filter", "TEXT", "with --gemm: only cases whose name contains TEXT (e.g. 'conv', 'M4096')")
        .option("gemm-max-gflop", "X", "with --gemm: skip cases of more than X GFLOP (e.g. 5 on a CPU device)")
        .flag("gemm-every-config", "with --gemm: also run each case under every configuration, to check the rule")
        .common(true);
    parser.repeatable("input");
    parser.parse(argc, argv);
    if (parser.has("gemm")) return runGemm(parser);
    const bool onnx = parser.has("model") && isOnnxPath(parser.text("model"));
    if (onnx) parser.preset("batches", "1,64");
    BenchSettings settings;
    settings.batches = parseBatches(parser.text("batches"));
    settings.runs = static_cast<int>(parser.integer("runs", 1, 100000));
    settings.warmup = static_cast<int>(parser.integer("warmup", 0, 100000));
    settings.elementwiseCount = static_cast<std::size_t>(parser.integer("elementwise", 1, 1 << 26));
    settings.trainingBatch = static_cast<std::uint32_t>(parser.integer("training-batch", 1, 65536));
    settings.trainingSteps = static_cast<int>(parser.integer("training-steps", 1, 100000));
    for (const char* file : {"csv", "json-out"}) {
      if (parser.has(file)) checkWritable(parser.text(file));
    }
    if (const std::string refusal = gemmTuningRefusal("--tune"); parser.has("tune") && !refusal.empty()) throw UsageError(refusal);
    if (onnx) return runModelBench(parser, settings.batches, settings.warmup, settings.runs);
    const bool json = parser.has("json");
    std::FILE* out = json ? stderr : stdout;  // with --json, stdout holds the JSON alone
    const Network model = parser.has("model") ? cli::loadModel(parser) : Network::create("784-128-10", Activation::relu, 1);
    const Context context(parser.contextOptions());
    std::fprintf(out, "device %d: %s (%s)\nmodel %s; %d warm-up and %d measured runs; times in ms: median [p10, p90]\n",
                context.device().index, context.device().renderer.c_str(), context.device().glVersion.c_str(),
                model.architecture.c_str(), settings.warmup, settings.runs);
    std::fflush(stdout);
    const auto progress = [](const std::string& workload) { std::fprintf(stderr, "glnet_bench: %s\n", workload.c_str()); };
    std::optional<GemmTuningReport> tuning;
    if (parser.has("tune")) {
      if (model.imported) throw UsageError("--tune with an imported model: give its .onnx file as --model to tune its GEMMs");
      checkCurrentGemmTuningWritable();
      tuning = tuneTrainingGemms(context, model, {settings.trainingBatch, settings.warmup, settings.runs, settings.seed},
                                 [&](const std::string& candidate) { progress("GEMM tuning of the training step: " + candidate); });
    }
    const BenchReport report = runBenchmarks(context, model, settings, progress);

    std::fprintf(out, "\ncold start:\n");
    // Program keys run to hundreds of characters (every define of a variant): shortened unless --verbose.
    const bool verbose = parser.has("verbose");
    for (const auto& [name, ms] : report.coldStart) {
      const std::string shown = verbose || name.size() <= 70 ? name : name.substr(0, 67) + "...";
      std::fprintf(out, "  %-70s %9.3f\n", shown.c_str(), ms);
    }
    std::string section;
    for (const BenchRow& row : report.rows) {
      if (row.section != section) {
        section = row.section;
        std::fprintf(out, "\n%-20s %8s  %-42s %10s %10s %10s\n", section.c_str(), "batch", "stage", "median", "p10", "p90");
      }
      if (row.ms.runs > 1) {
        std::fprintf(out, "%-20s %8zu  %-42s %10.4f %10.4f %10.4f\n", "", row.batch, row.stage.c_str(), row.ms.median, row.ms.p10, row.ms.p90);
      } else {  // a single measurement has no spread
        std::fprintf(out, "%-20s %8zu  %-42s %10.4f %10s %10s  (1 run)\n", "", row.batch, row.stage.c_str(), row.ms.median, "-", "-");
      }
    }
    if (!report.persistentMaps) std::fprintf(out, "\npersistent maps: absent (no GL_ARB_buffer_storage / GL_EXT_buffer_storage)\n");
    if (!TimerQuery::measuresGpu()) {
      std::fprintf(out, "no GPU timer queries on this device: every 'gpu' time above is wall time after glFinish\n");
    }
    std::fprintf(out, "\nnaive (sync and read after each dispatch) against chained (one read at the end), median ms:\n");
    for (const std::size_t batch : settings.batches) {
      const BenchRow* naive = report.find("inference", batch, "naive: sync and read every dispatch");
      const BenchRow* chained = report.find("inference", batch, "chained, read by getBufferSubData");
      if (naive && chained && chained->ms.median > 0) {
        const double speedup = naive->ms.median / chained->ms.median;
        std::fprintf(out, "  batch %6zu: naive %.4f ms, chained %.4f ms: chained is %.1fx %s\n", batch, naive->ms.median,
                     chained->ms.median, speedup >= 1 ? speedup : 1 / speedup, speedup >= 1 ? "faster" : "slower");
      }
    }
    std::fprintf(out, "upload of uint8 pixels, GB/s at the median (staged: through the ring of persistently mapped slots):\n");
    for (const std::size_t batch : settings.batches) {
      if (!report.find("inference", batch, "upload")) continue;  // a token network's inference is not measured
      const double megabytes = static_cast<double>(batch * model.inputs()) / 1e6;
      const auto rate = [&](const char* stage) {
        const BenchRow* row = report.find("inference", batch, stage);
        return row && row->ms.median > 0 ? megabytes / row->ms.median : 0.0;
      };
      if (report.find("inference", batch, "upload by glBufferSubData")) {
        std::fprintf(out, "  batch %6zu: %9.3f MB, staged %6.2f GB/s, glBufferSubData %6.2f GB/s", batch, megabytes, rate("upload"),
                    rate("upload by glBufferSubData"));
      } else {
        std::fprintf(out, "  batch %6zu: %9.3f MB, glBufferSubData %6.2f GB/s", batch, megabytes, rate("upload"));
      }
      std::fprintf(out, ", host memcpy %.2f GB/s\n", rate("host memcpy of the same bytes"));
    }
    if (!model.imported) {
      std::fprintf(out, "training step: %zu dispatches, %zu barriers\n", report.trainingDispatches, report.trainingBarriers);
      if (tuning) printTuning(out, *tuning);
    } else {
      std::fprintf(out, "training step: not measured (an imported model runs inference only)\n");
    }
    if (parser.has("csv")) writeFileAtomically(parser.text("csv"), csv(context, report));
    nlohmann::json reportJson = toJson(context, report, model);
    if (tuning) reportJson["gemm_tuning"] = cli::gemmTuningJson(*tuning);
    if (parser.has("json-out")) writeFileAtomically(parser.text("json-out"), reportJson.dump(2) + "\n");
    if (json) std::cout << reportJson.dump(2) << "\n";
    for (const std::string& failure : report.failures) std::fprintf(stderr, "glnet_bench: check failed: %s\n", failure.c_str());
    if (!report.failures.empty()) throw Error(std::to_string(report.failures.size()) + " correctness checks failed");
    std::fprintf(out, "all results checked against the CPU: ok\n");
    return 0;
  });
}
