// glnet._glnet: the engine for Python (the package glnet wraps it). Every GL call of a device runs on one thread
// that owns its context, so that any Python thread may call any model: calls queue on that thread, and the
// caller waits with the GIL released. Engine errors arrive as glnet.Error, glnet.UsageError (also a ValueError),
// glnet.FileNotFoundError (also a FileNotFoundError) and glnet.GpuError; Ctrl-C during training stops it between
// steps and raises KeyboardInterrupt.
#include "bench/ModelBenchmark.h"
#include "data/Idx.h"
#include "base/AtomicFile.h"
#include "gl/Context.h"
#include "base/Stopwatch.h"
#include "base/check.h"
#include "base/ExactInteger.h"
#include "decoder/LanguageModel.h"
#include "model/OnnxRunner.h"
#include "formats/Safetensors.h"
#include "train/TrainingRun.h"
#include "serve/WarmClassifier.h"

#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace py = pybind11;
using namespace glnet;

namespace {

// A setting as a checkpoint records it: the shortest text that reads back as the same double.
std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  for (int digits = 1; digits <= 17; ++digits) {
    char shorter[32];
    std::snprintf(shorter, sizeof shorter, "%.*g", digits, value);
    if (std::strtod(shorter, nullptr) == value) return shorter;
  }
  return text;
}

// The thread that owns one device's GL context and runs every task given for it, in order.
class Device {
 public:
  explicit Device(const ContextOptions& options) : thread_([this] { work(); }) {
    try {
      call([&] { context_ = std::make_unique<Context>(options); });
    } catch (...) {
      stop();
      throw;
    }
  }
  ~Device() { stop(); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const Context& context() const { return *context_; }

  // Runs `task` on the device's thread and waits for it with the GIL released; rethrows what it threw.
  // `whileWaiting` (called with the GIL released, every 50 ms) lets the caller take progress and signals.
  void call(const std::function<void()>& task, const std::function<void()>& whileWaiting = {}) {
    std::packaged_task<void()> packaged(task);
    std::future<void> done = packaged.get_future();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back([&packaged] { packaged(); });
    }
    changed_.notify_one();
    {
      py::gil_scoped_release release;
      while (done.wait_for(std::chrono::milliseconds(whileWaiting ? 50 : 1000)) != std::future_status::ready) {
        if (whileWaiting) whileWaiting();
      }
    }
    done.get();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) break;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
    context_.reset();  // the context is released on the thread it is current on
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_one();
    if (thread_.joinable()) {
      py::gil_scoped_release release;
      thread_.join();
    }
  }

  std::unique_ptr<Context> context_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

// One Device per (device, API) while anything uses it. The GL loader's entry points are per process, so one
// process runs one API at a time.
std::shared_ptr<Device> openDevice(const std::string& device, const std::string& api) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, Api>, std::weak_ptr<Device>> open;
  const char* fromEnvironment = std::getenv("GLNET_API");
  const Api wanted = !api.empty() ? parseApi(api) : fromEnvironment && *fromEnvironment ? parseApi(fromEnvironment) : Api::gl;
  std::lock_guard<std::mutex> lock(mutex);
  for (const auto& [key, slot] : open) {
    if (key.second != wanted && !slot.expired()) {
      throw UsageError(std::string("this process already runs models under ") + apiName(key.second) + "; one process uses one API (" +
                       apiName(wanted) + " was asked for)");
    }
  }
  std::weak_ptr<Device>& slot = open[{device, wanted}];
  if (std::shared_ptr<Device> existing = slot.lock()) return existing;
  ContextOptions options;
  options.device = device;
  options.api = wanted;
  auto created = std::make_shared<Device>(options);
  slot = created;
  return created;
}

py::dict describeDevice(const Context& context) {
  return py::dict(py::arg("index") = context.device().index, py::arg("renderer") = context.device().renderer,
                  py::arg("api") = apiName(context.api()), py::arg("version") = context.device().glVersion);
}

template <typename T>
py::array_t<T> toArray(const std::vector<T>& values, const std::vector<std::size_t>& shape) {
  py::array_t<T> array(shape);
  std::copy(values.begin(), values.end(), array.mutable_data());
  return array;
}

py::dict statistics(const Statistics& s) {
  return py::dict(py::arg("median") = s.median, py::arg("p10") = s.p10, py::arg("p90") = s.p90, py::arg("runs") = s.runs);
}

// A language model folder on a device, with the one generation it runs at a time (each generate() replaces the last).
class LanguageModelHandle {
 public:
  // `weights` "": as the files store them.
  LanguageModelHandle(const std::string& folder, const std::string& device, const std::string& api, std::uint32_t maxContext,
                      const std::string& weights)
      : device_(openDevice(device, api)) {
    const std::optional<WeightStorage> storage = weights.empty() ? std::nullopt : std::optional(weightStorageNamed(weights));
    device_->call([&] { model_ = std::make_unique<LanguageModel>(device_->context(), folder, maxContext, storage); });
  }
  ~LanguageModelHandle() {
    try {
      device_->call([&] {
        generation_.reset();
        model_.reset();
      });
    } catch (...) {  // a destructor must not throw; the context goes with the device
    }
  }
  // Runs the prompt; returns the generation's number, which next() names. Every use of the generation and its number
  // happens on the device's thread, so that calls from several Python threads (the GIL is released while they wait)
  // take their turns.
  std::uint64_t start(const std::string& prompt, std::uint32_t maxNewTokens, float temperature, std::uint32_t topK, float topP,
                      std::uint64_t seed, const std::vector<std::string>& stops) {
    GenerationSettings settings;
    settings.maxNewTokens = maxNewTokens;
    settings.sampling = {temperature, topK, topP, seed};
    settings.stops = stops;
    std::uint64_t number = 0;
    device_->call([&] {
      generation_.reset();
      number = ++generations_;
      generation_ = std::make_unique<Generation>(*model_, prompt, settings);
    });
    return number;
  }
  // The next piece of text of generation `number`, or None once it has ended.
  py::object next(std::uint64_t number) {
    std::optional<std::string> piece;
    device_->call([&] { piece = current(number).next(); });
    if (!piece) return py::none();
    return py::str(*piece);
  }
  py::dict stats(std::uint64_t number) {
    GenerationStats s;
    device_->call([&] { s = current(number).stats(); });
    py::dict d;
    d["prompt_tokens"] = s.promptTokens;
    d["generated_ids"] = s.generatedIds;
    d["stop_reason"] = s.stopReason;
    d["prefill_tokens_per_second"] = s.prefillTokensPerSecond();
    d["decode_tokens_per_second"] = s.decodeTokensPerSecond();
    return d;
  }
  py::array_t<float> logits(const std::vector<std::uint32_t>& ids) {
    std::vector<float> values;
    device_->call([&] {
      generation_.reset();
      ++generations_;
      values = model_->decoder().logits(ids);
    });
    py::array_t<float> array({ids.size(), std::size_t{model_->config().vocabulary}});
    std::copy(values.begin(), values.end(), array.mutable_data());
    return array;
  }
  std::vector<std::uint32_t> encode(const std::string& text) const { return model_->tokenizer().encode(text); }
  py::str decode(const std::vector<std::uint32_t>& ids) const { return py::str(model_->tokenizer().decode(ids)); }
  py::dict config() const {
    const DecoderConfig& c = model_->config();
    py::dict d;
    d["architecture"] = c.architecture;
    d["layers"] = c.layers;
    d["hidden"] = c.hidden;
    d["heads"] = c.heads;
    d["kv_heads"] = c.kvHeads;
    d["vocabulary"] = c.vocabulary;
    d["context"] = model_->decoder().context();
    d["weights"] = kindName(model_->decoder().weightStorage());
    return d;
  }
  py::dict device() const { return describeDevice(device_->context()); }

 private:
  // Generation `number` if it is still the current one (on the device's thread).
  Generation& current(std::uint64_t number) {
    if (number != generations_ || !generation_) throw Error("a later generate() or logits() on this model replaced this generation (one runs at a time)");
    return *generation_;
  }

  std::shared_ptr<Device> device_;
  std::unique_ptr<LanguageModel> model_;
  std::unique_ptr<Generation> generation_;
  std::uint64_t generations_ = 0;
};

// An ONNX model: numpy float32 arrays in, float32 arrays out, one plan per batch size.
class OnnxModelHandle {
 public:
  OnnxModelHandle(const std::string& path, const std::string& device, const std::string& api) : device_(openDevice(device, api)) {
    device_->call([&] { runner_ = std::make_unique<OnnxRunner>(device_->context(), path); });
  }
  ~OnnxModelHandle() {
    try {
      device_->call([&] { runner_.reset(); });
    } catch (...) {  // a destructor must not throw; the context goes with the device
    }
  }

  static py::list ports(const std::vector<OnnxPort>& ports) {
    py::list list;
    for (const OnnxPort& port : ports) {
      py::list shape;
      for (std::size_t i = 0; i < port.shape.size(); ++i) {
        shape.append(!port.symbols[i].empty() ? py::object(py::none()) : py::object(py::int_(port.shape[i])));
      }
      list.append(py::make_tuple(port.name, py::tuple(shape)));
    }
    return list;
  }
  py::list inputs() const { return ports(runner_->inputs()); }
  py::list inputDtypes() const {
    py::list list;
    for (const OnnxPort& port : runner_->inputs()) list.append(port.dtype);
    return list;
  }
  py::list outputs() const { return ports(runner_->outputs()); }
  py::dict device() const { return describeDevice(device_->context()); }

  // `inputs`: C-contiguous float32 arrays in the model's order, of `shapes` (checked by the caller against the model's).
  py::list run(const std::vector<py::array_t<float, py::array::c_style>>& inputs, const InputShapes& shapes) {
    if (inputs.size() != runner_->inputs().size()) {
      throw UsageError("the model takes " + std::to_string(runner_->inputs().size()) + " inputs, not " + std::to_string(inputs.size()));
    }
    std::vector<const float*> feeds;
    for (const auto& input : inputs) feeds.push_back(input.data());
    std::vector<std::vector<float>> results;
    std::vector<std::vector<std::size_t>> outputShapes;
    device_->call([&] {
      if (shapes.size() != inputs.size()) throw UsageError("one shape per input");
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        if (static_cast<std::size_t>(inputs[i].size()) != elementCount(shapes[i])) {
          throw UsageError("input " + runner_->inputs()[i].name + " holds " + std::to_string(inputs[i].size()) + " values, not " +
                           std::to_string(elementCount(shapes[i])) + " for its shape " + describe(shapes[i]));
        }
      }
      results = runner_->run(feeds, shapes);
      const OnnxModel& model = runner_->model(shapes);
      for (const auto& output : model.outputs) {
        const Shape& shape = model.graph.tensor(output.second).shape;
        outputShapes.emplace_back(shape.begin(), shape.end());
      }
    });
    py::list outputs;
    for (std::size_t o = 0; o < results.size(); ++o) outputs.append(toArray(results[o], outputShapes[o]));
    return outputs;
  }

  py::dict bench(const std::vector<std::uint32_t>& batches, int runs, int warmup) {
    std::vector<ModelBenchRow> rows;
    device_->call([&] { rows = benchmarkModel(*runner_, batches, warmup, runs, 1); });
    py::dict report;
    report["device"] = device();
    report["model"] = runner_->path();
    py::dict perBatch;
    for (const ModelBenchRow& row : rows) {
      py::list nodes;
      for (const NodeTime& node : row.profile.nodes) {
        nodes.append(py::dict(py::arg("node") = node.node, py::arg("kernel") = node.kernel, py::arg("output_shape") = node.outputShape,
                              py::arg("dispatches") = node.dispatches, py::arg("gpu_ms") = node.gpuMs));
      }
      perBatch[py::int_(row.batch)] =
          py::dict(py::arg("compile_ms") = row.compileMs, py::arg("upload_ms") = statistics(row.uploadMs),
                   py::arg("issue_ms") = statistics(row.issueMs), py::arg("readback_ms") = statistics(row.readbackMs),
                   py::arg("end_to_end_ms") = statistics(row.endToEndMs), py::arg("gpu_ms") = statistics(row.gpuMs),
                   py::arg("dispatches") = row.dispatches,
                   py::arg("barriers") = row.profile.barriers, py::arg("activation_bytes") = row.activationBytes, py::arg("nodes") = nodes);
    }
    report["batches"] = perBatch;
    return report;
  }

 private:
  std::shared_ptr<Device> device_;
  std::unique_ptr<OnnxRunner> runner_;
};

// A classifier from safetensors (an MLP or the MNIST CNN): uint8 images in, classes and probabilities out.
class ClassifierHandle {
 public:
  static constexpr std::size_t capacity = 256;  // images per GPU batch; plans for 1, 2, 4, ... up to it

  ClassifierHandle(const std::string& path, const std::string& device, const std::string& api)
      : network_(Network::load(path)), device_(openDevice(device, api)) {
    device_->call([&] { warm_ = std::make_unique<WarmClassifier>(device_->context(), network_, capacity); });
  }
  ~ClassifierHandle() {
    try {
      device_->call([&] { warm_.reset(); });
    } catch (...) {  // a destructor must not throw
    }
  }

  std::size_t inputs() const { return network_.inputs(); }
  std::uint32_t classes() const { return network_.classes(); }
  std::vector<std::uint32_t> inputShape() const { return network_.inputShape; }
  py::dict description() const {
    // One number for all channels, or a list of one per channel.
    const auto values = [](const std::vector<float>& v) { return v.size() == 1 ? py::object(py::float_(v[0])) : py::object(py::cast(v)); };
    return py::dict(py::arg("architecture") = network_.architecture, py::arg("activation") = activationName(network_.activation),
                    py::arg("input_mean") = values(network_.input.mean), py::arg("input_std") = values(network_.input.std));
  }
  py::dict weights() const {
    py::dict result;
    for (const auto& [name, tensor] : network_.toTensors().tensors) {
      result[py::str(name)] = toArray(tensor.values, std::vector<std::size_t>(tensor.shape.begin(), tensor.shape.end()));
    }
    return result;
  }
  py::dict device() const { return describeDevice(device_->context()); }

  // `images`: C-contiguous uint8, count × inputs() bytes (checked by the caller).
  py::tuple predict(const py::array_t<std::uint8_t, py::array::c_style>& images) {
    const std::size_t count = static_cast<std::size_t>(images.size()) / network_.inputs();
    if (count == 0 || count * network_.inputs() != static_cast<std::size_t>(images.size())) {
      throw UsageError("the images hold " + std::to_string(images.size()) + " bytes, not a whole number of images of " +
                       std::to_string(network_.inputs()) + " pixels");
    }
    std::vector<std::uint32_t> labels(count);
    std::vector<float> probabilities(count * network_.classes());
    const std::uint8_t* pixels = images.data();
    device_->call([&] {
      for (std::size_t first = 0; first < count; first += capacity) {
        const std::size_t n = std::min(capacity, count - first);
        const std::vector<Prediction> predictions = warm_->classify(pixels + first * network_.inputs(), n);
        for (std::size_t i = 0; i < n; ++i) {
          labels[first + i] = predictions[i].label;
          std::copy(predictions[i].probabilities.begin(), predictions[i].probabilities.end(),
                    probabilities.begin() + static_cast<std::ptrdiff_t>((first + i) * network_.classes()));
        }
      }
    });
    return py::make_tuple(toArray(std::vector<std::int64_t>(labels.begin(), labels.end()), {count}),
                          toArray(probabilities, {count, network_.classes()}));
  }

 private:
  Network network_;
  std::shared_ptr<Device> device_;
  std::unique_ptr<WarmClassifier> warm_;
};

py::list devices(const std::string& api) {
  py::list list;
  std::vector<DeviceInfo> found;
  std::vector<std::vector<ApiOffer>> survey;
  int chosen = -1;
  std::string chosenApi;
  {
    std::shared_ptr<Device> device = openDevice("", api);
    device->call([&] {
      found = device->context().devices();
      chosen = device->context().device().index;
      chosenApi = apiName(device->context().api());
      survey = surveyApis();
    });
  }
  for (const DeviceInfo& info : found) {
    py::dict apis;
    if (static_cast<std::size_t>(info.index) < survey.size()) {
      for (const ApiOffer& offer : survey[static_cast<std::size_t>(info.index)]) {
        apis[py::str(apiName(offer.api))] = py::dict(py::arg("version") = offer.version, py::arg("shading_language") = offer.shadingLanguageVersion,
                                                      py::arg("usable") = offer.problem.empty(), py::arg("problem") = offer.problem);
      }
    }
    list.append(py::dict(py::arg("index") = info.index, py::arg("renderer") = info.renderer, py::arg("vendor") = info.glVendor,
                         py::arg("egl_vendor") = info.eglVendor, py::arg("platform") = info.platform, py::arg("software") = info.software,
                         py::arg("usable") = info.usable(), py::arg("problem") = info.problem, py::arg("chosen") = info.index == chosen,
                         py::arg("api") = info.index == chosen ? py::object(py::str(chosenApi)) : py::object(py::none()),
                         py::arg("apis") = apis));
  }
  return list;
}

// safetensors through the engine's reader and writer (float32, PyTorch's names as given): the package converts
// tensors and checks names before this.
void saveSafetensors(const std::map<std::string, py::array_t<float, py::array::c_style>>& tensors, const std::string& path,
                     const std::map<std::string, std::string>& metadata) {
  TensorFile file;
  file.metadata = metadata;
  for (const auto& [name, array] : tensors) {
    HostTensor& tensor = file.tensors[name];
    tensor.shape.assign(array.shape(), array.shape() + array.ndim());
    tensor.values.assign(array.data(), array.data() + array.size());
  }
  checkWritable(path);
  writeSafetensors(path, file);
}

py::tuple loadSafetensors(const std::string& path) {
  const TensorFile file = readSafetensors(path);
  py::dict tensors;
  for (const auto& [name, tensor] : file.tensors) {
    tensors[py::str(name)] = toArray(tensor.values, std::vector<std::size_t>(tensor.shape.begin(), tensor.shape.end()));
  }
  return py::make_tuple(tensors, file.metadata);
}

py::tuple readMnist(const std::string& directory, const std::string& split) {
  if (split != "train" && split != "test") throw UsageError("split is 'train' or 'test', not '" + split + "'");
  LabelledImages set = readMnistSplit(directory, split == "train" ? Split::train : Split::test);
  return py::make_tuple(toArray(set.images.pixels, {set.images.count, set.images.rows, set.images.columns}),
                        toArray(set.labels, {set.labels.size()}));
}

// Thrown on the device thread when the caller asked training to stop (Ctrl-C, or an exception in a callback).
struct Stopped {};

// glnet.train's keyword arguments as the run's options by their flag names (trainingFlags): a number as the shortest
// text that reads back as the same double, True as a switch given; None and False leave an option out.
std::map<std::string, std::string> trainingOptions(const py::dict& keywords) {
  std::map<std::string, std::string> given;
  for (const auto& [keyword, value] : keywords) {
    std::string name = py::str(keyword);
    std::replace(name.begin(), name.end(), '_', '-');
    if (value.is_none()) continue;
    if (py::isinstance<py::bool_>(value)) {
      if (value.cast<bool>()) given[name] = "1";
    } else if (py::isinstance<py::float_>(value)) {
      given[name] = number(value.cast<double>());
    } else {
      given[name] = py::str(value);
    }
  }
  return given;
}

// What glnet_train shows of a run, written through Python's sys.stderr (progress) and sys.stdout (epochs, the files
// written) so that notebooks and redirections see it: on a terminal one progress line rewritten in place, otherwise
// the first report and then a line about every progressLineSeconds.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool enabled) {
    if (!enabled) return;
    const py::module_ sys = py::module_::import("sys");
    out_ = sys.attr("stdout");
    err_ = sys.attr("stderr");
    terminal_ = !err_.is_none() && py::hasattr(err_, "isatty") && err_.attr("isatty")().cast<bool>();
  }
  void progress(const TrainingProgress& p) {
    if (err_.is_none()) return;
    if (terminal_) {
      write(err_, "\r\033[K" + progressLine(p));
      open_ = true;
    } else if (!sinceLine_ || sinceLine_->seconds() >= progressLineSeconds) {
      write(err_, progressLine(p) + "\n");
      sinceLine_.emplace();
    }
  }
  void line(const std::string& text) {
    if (out_.is_none()) return;
    closeProgress();
    write(out_, text + "\n");
  }
  // Ends a progress line left open on the terminal, so that what follows (an error, the prompt) starts a line of its own.
  void closeProgress() {
    if (!open_) return;
    write(err_, "\r\033[K");
    open_ = false;
  }

 private:
  static void write(const py::object& stream, const std::string& text) {
    stream.attr("write")(text);
    stream.attr("flush")();
  }
  py::object out_ = py::none(), err_ = py::none();
  bool terminal_ = false, open_ = false;
  std::optional<Stopwatch> sinceLine_;
};

py::list train(const py::dict& keywords, const py::object& onEpoch, const py::object& onProgress, double progressSeconds, bool showProgress,
               const std::string& deviceName, const std::string& api) {
  const Communicator single;
  TrainingRun run(trainingOptions(keywords), single);
  run.reportEvery(progressSeconds);
  run.load();
  const TrainingOptions& options = run.settings().options;

  // Events from the device thread, handed to the Python callbacks on the caller's thread.
  std::mutex mutex;
  std::deque<EpochResult> epochs;
  std::deque<TrainingProgress> progress;
  std::atomic<bool> stopRequested{false};
  std::shared_ptr<Device> device = openDevice(deviceName, api);
  std::optional<py::error_already_set> callerError;
  py::list history;
  ProgressPrinter printer(showProgress);

  const auto epochDict = [](const EpochResult& e) {
    return py::dict(py::arg("epoch") = e.epoch, py::arg("train_loss") = e.trainLoss, py::arg("train_accuracy") = e.trainAccuracy,
                    py::arg("test_accuracy") = e.evaluated ? py::object(py::float_(e.testAccuracy)) : py::object(py::none()),
                    py::arg("seconds") = e.seconds, py::arg("samples_per_second") = e.samplesPerSecond);
  };
  // With the GIL held: hands queued events to the callbacks and looks for Ctrl-C; the first Python error stops
  // training and is raised once the device thread has stopped.
  const auto deliver = [&] {
    std::deque<EpochResult> doneEpochs;
    std::deque<TrainingProgress> steps;
    {
      std::lock_guard<std::mutex> lock(mutex);
      doneEpochs.swap(epochs);
      steps.swap(progress);
    }
    try {
      for (const TrainingProgress& p : steps) {
        if (!callerError) printer.progress(p);
        if (!onProgress.is_none() && !callerError) {
          onProgress(py::dict(py::arg("epoch") = p.epoch, py::arg("epochs") = p.epochs, py::arg("step") = p.step, py::arg("steps") = p.steps,
                              py::arg("loss") = p.loss, py::arg("samples_per_second") = p.samplesPerSecond, py::arg("eta_seconds") = p.etaSeconds));
        }
      }
      for (const EpochResult& e : doneEpochs) {
        if (e.evaluated && !callerError) printer.line(epochLine(e, options.epochs, options.fullBatch));
        history.append(epochDict(e));
        if (!onEpoch.is_none() && !callerError) onEpoch(history[py::len(history) - 1]);
      }
      if (!callerError && PyErr_CheckSignals() != 0) throw py::error_already_set();
    } catch (py::error_already_set& error) {
      if (!callerError) callerError.emplace(std::move(error));
      stopRequested = true;
    }
  };

  bool started = false;
  std::exception_ptr failure;
  try {
    device->call(
        [&] {
          started = true;
          // Ctrl-C stops a tuning between candidates, as it stops training between steps.
          run.start(device->context(), [&](const std::string&) {
            if (stopRequested) throw Stopped{};
          });
          run.run(
              [&](const TrainingProgress& p) {
                if (stopRequested) throw Stopped{};
                std::lock_guard<std::mutex> lock(mutex);
                progress.push_back(p);
              },
              [&](const EpochResult& e) {
                if (stopRequested) throw Stopped{};
                std::lock_guard<std::mutex> lock(mutex);
                epochs.push_back(e);
              });
          run.stop();
        },
        [&] {
          py::gil_scoped_acquire acquire;
          deliver();
        });
  } catch (const Stopped&) {
    failure = nullptr;
  } catch (...) {
    failure = std::current_exception();
  }
  if (started) device->call([&] { run.stop(); });
  deliver();
  printer.closeProgress();
  if (callerError) throw *callerError;
  if (failure) std::rethrow_exception(failure);
  printer.line(run.filesWritten());
  return history;
}

}  // namespace

PYBIND11_MODULE(_glnet, m) {
  m.doc() = "glnet's engine; use the package glnet, which wraps it";
  py::object error = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
      "glnet.Error", "A failure glnet reports: its message says what went wrong and what to do.", PyExc_RuntimeError, nullptr));
  py::object usageError = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
      "glnet.UsageError", "A call glnet cannot take as given: a wrong argument, dtype or shape.",
      py::make_tuple(error, py::handle(PyExc_ValueError)).ptr(), nullptr));
  py::object gpuError = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
      "glnet.GpuError", "The GPU stopped answering or lost the context; the device must be opened anew.", error.ptr(), nullptr));
  py::object fileNotFound = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
      "glnet.FileNotFoundError", "A file or directory glnet was given does not exist; also Python's FileNotFoundError.",
      py::make_tuple(error, py::handle(PyExc_FileNotFoundError)).ptr(), nullptr));
  m.attr("Error") = error;
  m.attr("UsageError") = usageError;
  m.attr("largest_exact_integer") = largestExactInteger;
  m.attr("GpuError") = gpuError;
  m.attr("FileNotFoundError") = fileNotFound;
  // The engine's messages name options as glnet.train's keyword arguments (weight_decay), not as flags.
  setOptionSpelling(OptionSpelling::keywords);
  py::register_exception_translator([](std::exception_ptr failure) {
    if (!failure) return;
    const py::module_ self = py::module_::import("glnet._glnet");
    try {
      std::rethrow_exception(failure);
    } catch (const UsageError& e) {
      PyErr_SetString(self.attr("UsageError").ptr(), e.what());
    } catch (const GpuFailure& e) {
      PyErr_SetString(self.attr("GpuError").ptr(), e.what());
    } catch (const FileNotFound& e) {
      PyErr_SetString(self.attr("FileNotFoundError").ptr(), e.what());
    } catch (const Error& e) {
      PyErr_SetString(self.attr("Error").ptr(), e.what());
    }
  });

  m.def("devices", &devices, py::arg("api") = "");
  m.def("read_mnist", &readMnist, py::arg("directory"), py::arg("split"));
  m.def("save_safetensors", &saveSafetensors, py::arg("tensors"), py::arg("path"), py::arg("metadata"));
  m.def("load_safetensors", &loadSafetensors, py::arg("path"));
  m.def("is_onnx_path", &isOnnxPath, py::arg("path"));
  m.attr("version") = GLNET_VERSION;

  py::class_<LanguageModelHandle>(m, "LanguageModel")
      .def(py::init<const std::string&, const std::string&, const std::string&, std::uint32_t, const std::string&>(), py::arg("folder"),
           py::arg("device"), py::arg("api"), py::arg("max_context"), py::arg("weights"))
      .def("start", &LanguageModelHandle::start, py::arg("prompt"), py::arg("max_new_tokens"), py::arg("temperature"), py::arg("top_k"),
           py::arg("top_p"), py::arg("seed"), py::arg("stops"))
      .def("next", &LanguageModelHandle::next, py::arg("number"))
      .def("stats", &LanguageModelHandle::stats, py::arg("number"))
      .def("logits", &LanguageModelHandle::logits, py::arg("ids"))
      .def("encode", &LanguageModelHandle::encode, py::arg("text"))
      .def("decode", &LanguageModelHandle::decode, py::arg("ids"))
      .def_property_readonly("config", &LanguageModelHandle::config)
      .def_property_readonly("device", &LanguageModelHandle::device);

  py::class_<OnnxModelHandle>(m, "OnnxModel")
      .def(py::init<const std::string&, const std::string&, const std::string&>(), py::arg("path"), py::arg("device"), py::arg("api"))
      .def_property_readonly("inputs", &OnnxModelHandle::inputs)
      .def_property_readonly("outputs", &OnnxModelHandle::outputs)
      .def_property_readonly("input_dtypes", &OnnxModelHandle::inputDtypes)
      .def_property_readonly("device", &OnnxModelHandle::device)
      .def("run", &OnnxModelHandle::run, py::arg("inputs"), py::arg("shapes"))
      .def("bench", &OnnxModelHandle::bench, py::arg("batches"), py::arg("runs"), py::arg("warmup"));

  py::class_<ClassifierHandle>(m, "Classifier")
      .def(py::init<const std::string&, const std::string&, const std::string&>(), py::arg("path"), py::arg("device"), py::arg("api"))
      .def_property_readonly("inputs", &ClassifierHandle::inputs)
      .def_property_readonly("classes", &ClassifierHandle::classes)
      .def_property_readonly("input_shape", &ClassifierHandle::inputShape)
      .def_property_readonly("description", &ClassifierHandle::description)
      .def_property_readonly("device", &ClassifierHandle::device)
      .def("weights", &ClassifierHandle::weights)
      .def("predict", &ClassifierHandle::predict, py::arg("images"));

  m.def("training_options", [] {
    py::list options;
    for (const TrainingFlag& flag : trainingFlags()) {
      std::string keyword = flag.name;
      std::replace(keyword.begin(), keyword.end(), '-', '_');
      options.append(py::dict(py::arg("keyword") = keyword, py::arg("switch") = flag.value.empty(), py::arg("default") = flag.defaultValue,
                              py::arg("help") = flag.help, py::arg("recorded") = flag.recorded));
    }
    return options;
  });
  m.def("train", &train, py::arg("options"), py::arg("on_epoch"), py::arg("on_progress"), py::arg("progress_seconds"), py::arg("progress"),
        py::arg("device"), py::arg("api"));
}
