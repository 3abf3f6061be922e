// glnet_info: lists the EGL devices with what each API offers there, the chosen one's limits and extensions,
// and runs a self-check.
#include "common/Cli.h"
#include "importer/Onnx.h"
#include "convert/OnnxNetwork.h"
#include "importer/OnnxOps.h"
#include "graph/MemoryPlan.h"
#include "gl/Context.h"
#include "model/OnnxRunner.h"
#include "gl/Sync.h"
#include "plan/SelfCheck.h"
#include "base/FileInput.h"
#include "text/ByteLevelBpe.h"
#include "ops/GemmTuning.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <iostream>
#include <optional>

using namespace glnet;

namespace {

using Survey = std::vector<std::vector<ApiOffer>>;

const std::vector<ApiOffer>& offersOf(const Survey& survey, const DeviceInfo& device) {
  static const std::vector<ApiOffer> none;
  return static_cast<std::size_t>(device.index) < survey.size() ? survey[static_cast<std::size_t>(device.index)] : none;
}

nlohmann::json toJson(const Context& context, const Survey& survey, const SelfCheckResult* check) {
  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceInfo& device : context.devices()) {
    nlohmann::json apis = nlohmann::json::object();
    for (const ApiOffer& offer : offersOf(survey, device)) {
      const Limits& l = offer.limits;
      apis[apiName(offer.api)] = {{"version", offer.version}, {"shading_language", offer.shadingLanguageVersion},
                                  {"usable", offer.problem.empty()}, {"problem", offer.problem},
                                  {"max_work_group_invocations", l.maxWorkGroupInvocations},
                                  {"max_shared_memory_bytes", l.maxSharedMemoryBytes},
                                  {"max_compute_storage_blocks", l.maxComputeStorageBlocks},
                                  {"timestamp_bits", l.timestampBits}, {"persistent_maps", l.persistentMaps}};
    }
    devices.push_back({{"index", device.index}, {"platform", device.platform}, {"egl_vendor", device.eglVendor},
                       {"renderer", device.renderer}, {"gl_version", device.glVersion}, {"software", device.software},
                       {"usable", device.usable()}, {"problem", device.problem},
                       {"chosen", device.index == context.device().index}, {"apis", apis}});
  }
  const Limits& limits = context.limits();
  nlohmann::json extensions = nlohmann::json::object();
  for (const auto& [name, present] : context.optionalExtensions()) extensions[name] = present;
  nlohmann::json result = {
      {"devices", devices},
      {"chosen", context.device().index},
      {"api", apiName(context.api())},
      {"context_ms", context.creationMilliseconds()},
      {"limits",
       {{"max_work_group_size", limits.maxWorkGroupSize},
        {"max_work_group_count", limits.maxWorkGroupCount},
        {"max_work_group_invocations", limits.maxWorkGroupInvocations},
        {"max_shared_memory_bytes", limits.maxSharedMemoryBytes},
        {"max_storage_block_bytes", limits.maxStorageBlockBytes},
        {"max_compute_storage_blocks", limits.maxComputeStorageBlocks},
        {"max_storage_buffer_bindings", limits.maxStorageBufferBindings},
        {"storage_buffer_offset_alignment", limits.storageBufferOffsetAlignment},
        {"timestamp_bits", limits.timestampBits},
        {"persistent_maps", limits.persistentMaps},
        {"reset_notification", limits.resetNotification},
        {"group_size", limits.groupSize()}}},
      {"extensions", extensions}};
  const GemmTuning* tuning = currentGemmTuning();
  result["gemm_tuning"] = {{"path", currentGemmTuningPath()}, {"shapes", tuning ? tuning->size() : 0}, {"read", tuning != nullptr}};
  if (check) {
    result["self_check"] = {{"elements", check->elements},
                            {"passed", check->passed()},
                            {"mismatches", check->mismatches},
                            {"max_abs_error", check->maxAbsoluteError},
                            {"compile_ms", check->compileMilliseconds},
                            {"upload_ms", check->uploadMilliseconds},
                            {"dispatch_gpu_ms", check->dispatchGpuMilliseconds},
                            {"gpu_clock", TimerQuery::measuresGpu() ? "timer queries" : "wall"},
                            {"readback_ms", check->readbackMilliseconds}};
  }
  return result;
}

void printText(const Context& context, const Survey& survey, const SelfCheckResult* check) {
  std::printf("devices (* chosen), and what each API offers there:\n");
  for (const DeviceInfo& device : context.devices()) {
    const bool chosen = device.index == context.device().index;
    std::printf("  %s %d  %s  [%s, EGL vendor %s, %s]%s\n", chosen ? "*" : " ", device.index,
                device.renderer.empty() ? "(unknown renderer)" : device.renderer.c_str(),
                device.glVersion.empty() ? "no GL" : device.glVersion.c_str(), device.eglVendor.c_str(),
                device.software ? "software" : "hardware",
                device.usable() ? "" : ("  unusable: " + device.problem).c_str());
    for (const ApiOffer& offer : offersOf(survey, device)) {
      const Limits& l = offer.limits;
      if (!offer.problem.empty()) {
        std::printf("       %-5s %s\n", apiName(offer.api), ("unusable: " + offer.problem).c_str());
        continue;
      }
      std::printf("       %-5s %s (%s): %d invocations, %lld B shared, %d storage blocks, %s, %s\n", apiName(offer.api),
                  offer.version.c_str(), offer.shadingLanguageVersion.c_str(), l.maxWorkGroupInvocations,
                  static_cast<long long>(l.maxSharedMemoryBytes), l.maxComputeStorageBlocks,
                  l.timestampBits > 0 ? "GPU timers" : "no GPU timers", l.persistentMaps ? "buffer storage" : "no buffer storage");
    }
  }
  const Limits& l = context.limits();
  std::printf("limits of device %d under %s (what glnet fits its kernels to; groups of %d):\n", context.device().index,
              apiName(context.api()), l.groupSize());
  std::printf("  max work-group size         %d x %d x %d\n", l.maxWorkGroupSize[0], l.maxWorkGroupSize[1],
              l.maxWorkGroupSize[2]);
  std::printf("  max work-group count        %d x %d x %d\n", l.maxWorkGroupCount[0], l.maxWorkGroupCount[1],
              l.maxWorkGroupCount[2]);
  std::printf("  max work-group invocations  %d\n", l.maxWorkGroupInvocations);
  std::printf("  max shared memory           %lld bytes\n", static_cast<long long>(l.maxSharedMemoryBytes));
  std::printf("  max SSBO block size         %lld bytes (%.0f MiB)\n", static_cast<long long>(l.maxStorageBlockBytes),
              static_cast<double>(l.maxStorageBlockBytes) / (1 << 20));
  std::printf("  max compute SSBO blocks     %d (bindings %d, offset alignment %d)\n", l.maxComputeStorageBlocks,
              l.maxStorageBufferBindings, l.storageBufferOffsetAlignment);
  std::printf("  timestamp bits              %d\n", l.timestampBits);
  std::printf("  GPU reset notification      %s\n", l.resetNotification ? "yes (robust context)" : "no");
  std::printf("  GPU watchdog                %.0f s (GLNET_GPU_TIMEOUT_S)\n", static_cast<double>(Fence::watchdogNanoseconds()) / 1e9);
  std::printf("optional extensions:\n");
  for (const auto& [name, present] : context.optionalExtensions()) {
    std::printf("  %-34s %s\n", name.c_str(), present ? "yes" : "no");
  }
  std::printf("context creation: %.1f ms\n", context.creationMilliseconds());
  const GemmTuning* tuning = currentGemmTuning();
  const std::string tuningPath = currentGemmTuningPath();
  if (!tuning) {
    std::printf("GEMM tuning: not read (GLNET_TUNE=0); the rule chooses every configuration\n");
  } else if (tuning->size() == 0) {
    std::printf("GEMM tuning: none for this device yet (glnet_bench --model M.onnx --tune measures a model's GEMMs)\n");
  } else {
    std::printf("GEMM tuning: %zu shapes measured on this device (%s)\n", tuning->size(),
                tuningPath.empty() ? "this process only" : tuningPath.c_str());
  }
  if (check) {
    std::printf("self-check y = a*x + y on %zu floats: %s (max |error| %.3g, %zu mismatches)\n", check->elements,
                check->passed() ? "ok" : "FAILED", check->maxAbsoluteError, check->mismatches);
    std::printf("  compile %.2f ms, upload %.3f ms, dispatch %.3f ms %s, readback %.3f ms\n",
                check->compileMilliseconds, check->uploadMilliseconds, check->dispatchGpuMilliseconds, TimerQuery::clockName(),
                check->readbackMilliseconds);
  }
}

// The multiply-adds of a node's op for its output shape: dense [N, out] takes in per output, a convolution
// C·KH·KW per output (4 outputs per pooled one when it pools as it stores); everything else is counted as none.
double multiplyAdds(const Graph& graph, const OpNode& node) {
  const Shape& out = graph.tensors()[static_cast<std::size_t>(node.output)].shape;
  const Shape& weight = node.inputs.size() > 1 ? graph.tensors()[static_cast<std::size_t>(node.inputs[1])].shape : Shape{};
  const std::string name = node.op->name();
  if (weight.size() == 2 && name.rfind("dense", 0) == 0) return static_cast<double>(elementCount(out)) * weight[1];
  const double pooled = name.find("max pool") != std::string::npos ? 4 : 1;
  if (weight.size() == 4 && name.find("conv") != std::string::npos) return pooled * static_cast<double>(elementCount(out)) * weight[1] * weight[2] * weight[3];
  return 0;
}

std::string shapeText(const Shape& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// glnet_info --model M.onnx: the model as glnet will run it, on the host alone (no device needed); with a context
// (--plan), also the dispatches and barriers of its plan on that device.
int describeModel(const std::string& path, std::uint32_t batch, const std::map<std::string, std::uint32_t>& dimensions, bool json,
                  const std::optional<ContextOptions>& device) {
  const ParsedOnnx parsed(path);
  const OnnxModel own = readOnnx(parsed, 0);
  const std::vector<OnnxPort> inputs = inputPortsOf(own);
  const InputShapes shapes = bindInputs(inputs, own.dynamicBatch, batch ? batch : ownBatchOf(inputs), dimensions, path);
  const OnnxModel model = readOnnx(parsed, shapes);
  std::optional<Context> opened;
  if (device) opened.emplace(*device);
  const Context* context = opened ? &*opened : nullptr;
  std::optional<OnnxRunner::PlanSize> plan;
  if (context) plan = OnnxRunner(*context, parsed).planSize(shapes);
  const Graph& graph = model.graph;
  double macs = 0;
  nlohmann::json nodes = nlohmann::json::array();
  for (const OpNode& node : graph.ops()) macs += multiplyAdds(graph, node);
  std::vector<Tensor> results;
  for (const auto& output : model.outputs) results.push_back(output.second);
  // 256 bytes: the largest storage buffer offset alignment GL allows, so the figure holds on every device. The ops'
  // scratch (Winograd's transformed tiles, by the rule's choice for this batch) shares the arena, and with a device
  // (--plan) their workspaces too, which depend on its limits.
  const MemoryPlan memory = planMemory(graph, results, 256, inferenceScratchBytes(graph, context != nullptr));
  for (const OnnxNodeSummary& node : model.nodes) {
    nodes.push_back({{"name", node.name}, {"op_type", node.opType}, {"glnet", node.glnetOp}, {"output_shape", node.outputShape}});
  }
  const Shape& in = graph.tensor(model.input).shape;
  const Shape& out = graph.tensor(model.output).shape;
  if (json) {
    nlohmann::json description{{"model", path}, {"producer", model.producer}, {"opset", model.opset}, {"batch", in[0]},
                                {"dynamic_batch", model.dynamicBatch}, {"input", {{"name", model.inputName}, {"shape", in}}},
                                {"output", {{"name", model.outputName}, {"shape", out}}}, {"nodes", nodes},
                                {"multiply_adds", macs}, {"parameter_bytes", model.parameterBytes},
                                {"activation_bytes", memory.arenaBytes + memory.resultBytes}, {"activation_bytes_without_reuse", memory.keptBytes}};
    if (plan) {
      description["plan"] = {{"device", context->device().renderer}, {"dispatches", plan->dispatches}, {"barriers", plan->barriers}};
    }
    std::cout << description.dump(2) << "\n";
    return 0;
  }
  std::printf("%s: opset %lld, from %s\n", path.c_str(), static_cast<long long>(model.opset), model.producer.empty() ? "an unnamed producer" : model.producer.c_str());
  std::printf("input  %-24s %s%s\n", model.inputName.c_str(), shapeText(in).c_str(), model.dynamicBatch ? " (batch dynamic; --batch sets it)" : "");
  std::printf("output %-24s %s\n", model.outputName.c_str(), shapeText(out).c_str());
  // Each column as wide as its longest entry, names whole: exporters' names and ops such as GlobalAveragePool or
  // "conv + max pool" are longer than any fixed width that suits the rest.
  std::vector<std::array<std::string, 4>> rows = {{"node", "ONNX op", "glnet", "output shape"}};
  for (const OnnxNodeSummary& node : model.nodes) {
    rows.push_back({node.name, node.opType, node.glnetOp, node.outputShape.empty() ? "-" : shapeText(node.outputShape)});
  }
  std::array<int, 3> widths{};
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < widths.size(); ++c) widths[c] = std::max(widths[c], static_cast<int>(row[c].size()));
  }
  std::printf("\n");
  for (const auto& row : rows) {
    std::printf("%-*s  %-*s  %-*s  %s\n", widths[0], row[0].c_str(), widths[1], row[1].c_str(), widths[2], row[2].c_str(), row[3].c_str());
  }
  std::printf("\n%.4g multiply-adds per batch of %u; parameters %.1f MiB; activations %.1f MiB planned (intermediate tensors and "
              "the ops' scratch%s sharing memory by liveness; %.1f MiB if each tensor kept its own)\n",
              macs, in[0], static_cast<double>(model.parameterBytes) / (1 << 20), static_cast<double>(memory.arenaBytes + memory.resultBytes) / (1 << 20),
              context ? " and workspaces" : " (their workspaces, which depend on the device, with --plan)", static_cast<double>(memory.keptBytes) / (1 << 20));
  if (plan) {
    std::printf("plan on %s: %zu dispatches per run, %zu barriers between them\n", context->device().renderer.c_str(), plan->dispatches,
                plan->barriers);
  }
  return 0;
}

// glnet_info --tokenizer FILE --encode TEXTFILE, left out of --help (bench/tokenizer_check.py and tests/cli/tokenizer_checks.sh
// use it): the text's ids as encode gives them (special tokens added as the file's template says) and their decoding,
// as one line of JSON, for comparison with Hugging Face's `tokenizers`.
int encodeText(const std::string& tokenizerPath, const std::string& textPath) {
  const ByteLevelBpe tokenizer = ByteLevelBpe::fromFile(tokenizerPath);
  const std::string text = readRegularFile(textPath, std::uint64_t{64} << 20);
  std::vector<std::uint32_t> ids;
  try {
    ids = tokenizer.encode(text);
  } catch (const Error& e) {
    throw Error(textPath + ": " + e.what());  // which file holds the text the tokenizer refused
  }
  std::cout << nlohmann::json{{"ids", ids}, {"decoded", tokenizer.decode(ids)}}.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return cli::run("glnet_info", [&] {
    cli::Parser parser("glnet_info", "Lists the OpenGL devices glnet can use, the chosen one's limits, and checks it "
                       "with a compute dispatch verified against the CPU.", "[options]");
    parser.common(true)
        .option("elements", "N", "floats in the self-check", "1048576")
        .flag("no-check", "skip the self-check")
        .flag("no-survey", "do not open a context of each API on each device to list what it offers")
        .option("model", "FILE", "instead: describe an ONNX model as glnet will run it (inputs, outputs, every node with "
                                 "the op it becomes and its output shape, multiply-adds, parameter and activation bytes)")
        .option("batch", "N", "with --model: the batch size to describe it at, for a model whose batch is dynamic (default: 1, "
                              "or the model's fixed batch)")
        .dimensionOption()
        .flag("plan", "with --model: also build its plan on the device (--device, --api; its programs are compiled) and "
                      "count the dispatches one run issues and the barriers between them")
        .flag("ops", "instead: list the ONNX operators glnet imports (opsets, run or folded at load, fine-tuned, what runs)")
        .flag("markdown", "with --ops: as README's Markdown table")
        .option("tokenizer", "FILE", "with --encode: a Hugging Face tokenizer.json (byte-level BPE)")
        .option("encode", "TEXTFILE", "instead: print the ids of the UTF-8 text in TEXTFILE and their decoding as JSON")
        .hidden("tokenizer")
        .hidden("encode");
    parser.parse(argc, argv);
    if (parser.has("tokenizer") != parser.has("encode")) throw UsageError("--tokenizer and --encode go together");
    if (parser.has("encode")) return encodeText(parser.text("tokenizer"), parser.text("encode"));
    if (parser.has("markdown") && !parser.has("ops")) throw UsageError("--markdown goes with --ops");
    for (const char* option : {"plan", "dim", "batch"}) {
      if (parser.has(option) && !parser.has("model")) throw UsageError(std::string("--") + option + " goes with --model");
    }
    if (parser.has("ops")) {
      if (parser.has("model")) throw UsageError("--ops and --model are two different listings; give one");
      std::cout << onnxOpsTable(parser.has("markdown"), onnxOpFineTuning);
      return 0;
    }
    if (parser.has("model")) {
      const auto batch = parser.has("batch") ? static_cast<std::uint32_t>(parser.integer("batch", 1, 1 << 20)) : 0u;
      std::optional<ContextOptions> device;
      if (parser.has("plan")) device = parser.contextOptions();
      return describeModel(parser.text("model"), batch, parser.dimensions(), parser.has("json"), device);
    }
    const auto elements = static_cast<std::size_t>(parser.integer("elements", 1, 1L << 28));
    const ContextOptions options = parser.contextOptions();
    const Survey survey = parser.has("no-survey") ? Survey{} : surveyApis();
    const Context context(options);
    SelfCheckResult check;
    const bool checked = !parser.has("no-check");
    if (checked) check = runSelfCheck(context, elements);
    if (parser.has("json")) {
      std::cout << toJson(context, survey, checked ? &check : nullptr).dump(2) << "\n";
    } else {
      printText(context, survey, checked ? &check : nullptr);
    }
    return checked && !check.passed() ? 1 : 0;
  });
}
