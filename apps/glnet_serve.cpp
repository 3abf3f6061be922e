// glnet_serve: an HTTP server that keeps a model warm on the GPU: a classifier (batching concurrent requests) or a
// language model (OpenAI's /v1/completions).
#include "common/Cli.h"
#include "base/Stopwatch.h"
#include "base/check.h"
#include "base/log.h"
#include "formats/Safetensors.h"
#include "serve/BatchingPredictor.h"
#include "serve/CompletionApi.h"
#include "serve/CompletionQueue.h"
#include "serve/PredictRequest.h"
#include "serve/ServeMetrics.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <pthread.h>
#include <sys/socket.h>

using namespace glnet;

namespace {

// Answers are built from names and messages that may hold bytes of the request: invalid UTF-8 is replaced,
// never thrown over (which would turn a client's mistake into a 500).
std::string toJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void sendError(httplib::Response& response, int status, const std::string& message) {
  response.status = status;
  response.set_content(toJson({{"error", message}}), "application/json");
}

PredictRequest readPredictRequest(const httplib::Request& request, const Network& network) {
  if (!request.is_multipart_form_data()) {
    return parsePredictRequest(request.body, request.get_header_value("Content-Type"), network.inputs(), network.images);
  }
  std::vector<FormPart> parts;
  for (const auto& [field, part] : request.files) parts.push_back({part.name, part.filename, part.content_type, part.content});
  return parsePredictParts(parts, network.inputs(), network.images);
}

nlohmann::json describeModel(const Network& network, const std::map<std::string, std::string>& metadata, const std::string& path) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerSpec& layer : network.layers) {
    static const char* kinds[] = {"conv", "pool", "flatten", "dense"};
    nlohmann::json entry = {{"kind", kinds[static_cast<int>(layer.kind)]}};
    if (!layer.name.empty()) entry["name"] = layer.name;
    if (layer.outputs) entry["outputs"] = layer.outputs;
    if (layer.kernel) entry["kernel"] = layer.kernel;
    layers.push_back(entry);
  }
  // One number for all channels, or a list of one per channel.
  const auto values = [](const std::vector<float>& v) { return v.size() == 1 ? nlohmann::json(v[0]) : nlohmann::json(v); };
  return {{"file", path},
          {"architecture", network.architecture},
          {"inputs", network.inputs()},
          {"input_shape", network.inputShape},
          {"classes", network.classes()},
          {"class_names", network.classNames},
          {"input_format", {{"mean", values(network.input.mean)}, {"std", values(network.input.std)}}},
          {"layers", layers},
          {"metadata", metadata}};
}


// Answers of 400 or more that httplib makes itself (no route, a body too large, a POST without one), in the mode's
// error shape `send`; those with a body come from a handler and are counted there. `noBody` is what a POST without
// a body is told.
void routeErrors(httplib::Server& server, ServeMetrics& metrics, void (*send)(httplib::Response&, int, const std::string&), const char* noBody) {
  server.set_error_handler([&metrics, send, noBody](const httplib::Request& request, httplib::Response& response) {
    if (!response.body.empty()) return;
    metrics.count(request.path, response.status);
    const std::string reason = response.status == 404   ? "no such endpoint: " + request.method + " " + request.path
                               : response.status == 413 ? "the body is larger than --max-body-bytes allows"
                               // httplib refuses a POST that says nothing of its length (curl -X POST without data)
                               : response.status == 400 && request.method == "POST" && request.body.empty() ? noBody
                                                                                                            : "the request could not be handled";
    send(response, response.status, reason);
  });
}

// The routes of a classifier's server: predictions, the model's description, health and metrics.
void routeClassifier(httplib::Server& server, BatchingPredictor& predictor, ServeMetrics& metrics, const std::atomic<bool>& stopping,
                     const Network& network, const std::string& modelJson) {
  // Each answer is counted before it is sent (httplib's logger runs after, so a client could read /metrics first).
  server.Post("/v1/predict", [&](const httplib::Request& request, httplib::Response& response) {
    // Recorded on every way out, once the handler has set the status.
    struct Observation {
      ServeMetrics& metrics;
      const httplib::Response& response;
      Stopwatch clock;
      std::size_t images = 0;
      ~Observation() { metrics.observePrediction(response.status, clock.seconds(), images); }
    } observation{metrics, response, Stopwatch(), 0};
    PredictRequest images;
    try {
      images = readPredictRequest(request, network);
    } catch (const Error& error) {
      return sendError(response, 400, error.what());
    }
    std::vector<Prediction> predictions;
    try {
      predictions = predictor.submit(std::move(images.pixels), images.names.size()).get();
    } catch (const Unavailable& error) {
      response.set_header("Retry-After", "1");
      return sendError(response, 503, std::string(error.what()) + "; retry later");
    } catch (const std::exception& error) {
      return sendError(response, 500, error.what());
    }
    nlohmann::json list = nlohmann::json::array();
    for (std::size_t i = 0; i < predictions.size(); ++i) {
      nlohmann::json answer = {{"image", images.names[i]}, {"class", predictions[i].label}, {"probabilities", predictions[i].probabilities}};
      if (!network.classNames.empty()) answer["class_name"] = network.classNames[predictions[i].label];
      if (!images.warnings[i].empty()) answer["warning"] = images.warnings[i];
      list.push_back(answer);
    }
    observation.images = predictions.size();
    response.status = 200;
    response.set_content(toJson(list), "application/json");
  });
  // Other methods on the prediction endpoint are the client's mistake, said as HTTP says it.
  const auto onlyPost = [&](const httplib::Request& request, httplib::Response& response) {
    metrics.count(request.path, 405);
    response.set_header("Allow", "POST");
    sendError(response, 405, request.method + " /v1/predict is not allowed: POST an image or JSON pixels");
  };
  server.Get("/v1/predict", onlyPost);
  server.Put("/v1/predict", onlyPost);
  server.Patch("/v1/predict", onlyPost);
  server.Delete("/v1/predict", onlyPost);
  server.Get("/v1/model", [&](const httplib::Request& request, httplib::Response& response) {
    metrics.count(request.path, 200);
    response.set_content(modelJson, "application/json");
  });
  server.Get("/healthz", [&](const httplib::Request& request, httplib::Response& response) {
    metrics.count(request.path, stopping ? 503 : 200);
    if (stopping) return sendError(response, 503, "the server is shutting down");
    response.set_content("{\"status\": \"ok\"}\n", "application/json");
  });
  server.Get("/metrics", [&](const httplib::Request& request, httplib::Response& response) {
    metrics.count(request.path, 200);
    response.set_content(metrics.prometheus(predictor.stats()), "text/plain; version=0.0.4");
  });
  routeErrors(server, metrics, sendError, emptyRequestBody);
}

// The name of a model folder for answers: its last component ("models/gpt2/" → "gpt2").
std::string folderName(const std::string& folder) {
  const std::filesystem::path path = std::filesystem::path(folder).lexically_normal();
  return (path.has_filename() ? path.filename() : path.parent_path().filename()).string();
}

// One completion's text or pieces and how it ended, handed from the queue's worker to the HTTP thread that answers.
struct Completion {
  std::mutex mutex;
  std::condition_variable changed;
  std::string pending;  // text not yet taken by the HTTP thread
  std::optional<CompletionOutcome> outcome;

  void add(const std::string& piece) {
    const std::lock_guard<std::mutex> lock(mutex);
    pending += piece;
    changed.notify_all();
  }
  void end(const CompletionOutcome& ended) {
    const std::lock_guard<std::mutex> lock(mutex);
    outcome = ended;
    changed.notify_all();
  }
  // Waits for text or the end; returns the text since the last call, and the outcome once it has ended.
  std::pair<std::string, std::optional<CompletionOutcome>> take() {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return !pending.empty() || outcome; });
    return {std::exchange(pending, {}), outcome};
  }
};

std::string errorMessage(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& error) {
    return error.what();
  } catch (...) {
    return "an unknown error";
  }
}

// An error in OpenAI's shape, its type by the status.
void sendApiError(httplib::Response& response, int status, const std::string& message, const std::string& param = "") {
  response.status = status;
  const char* type = status == 503 ? "server_error" : status >= 500 ? "internal_error" : "invalid_request_error";
  response.set_content(toJson(apiError(message, type, param)), "application/json");
}

// The routes of a language model's server: OpenAI's completions and model list, health and metrics.
void routeCompletions(httplib::Server& server, CompletionQueue& queue, ServeMetrics& metrics, const std::atomic<bool>& stopping,
                      const std::string modelName) {
  const std::int64_t started = std::time(nullptr);
  server.Post("/v1/completions", [&queue, &metrics, started, modelName](const httplib::Request& request, httplib::Response& response) {
    // Counted on every way out, once the handler has set the status.
    struct Count {
      ServeMetrics& metrics;
      const httplib::Response& response;
      ~Count() { metrics.count("/v1/completions", response.status); }
    } count{metrics, response};
    CompletionCall call;
    try {
      call = parseCompletionCall(request.body);
    } catch (const InvalidRequest& error) {
      return sendApiError(response, 400, error.what(), error.param());
    }
    const bool stream = call.stream, includeUsage = call.includeUsage;
    const auto completion = std::make_shared<Completion>();
    CompletionQueue::Ticket ticket = 0;
    try {
      ticket = queue.submit(std::move(call.request), [completion](const std::string& piece) { completion->add(piece); },
                            [completion](const CompletionOutcome& outcome) { completion->end(outcome); });
    } catch (const Unavailable& error) {
      response.set_header("Retry-After", "1");
      return sendApiError(response, 503, std::string(error.what()) + "; retry later");
    } catch (const Error& error) {
      return sendApiError(response, 400, error.what(), "prompt");
    }
    const std::string id = "cmpl-" + std::to_string(started) + "-" + std::to_string(ticket);
    const std::int64_t created = std::time(nullptr);
    if (!stream) {
      std::string text;
      for (;;) {
        auto [piece, outcome] = completion->take();
        text += piece;
        if (!outcome) continue;
        if (outcome->error) return sendApiError(response, 500, errorMessage(outcome->error));
        response.status = 200;
        return response.set_content(toJson(completionAnswer(id, created, modelName, text, outcome->stats)), "application/json");
      }
    }
    // Server-sent events, one per piece as it comes; a client that has gone (a write fails) cancels the completion.
    response.status = 200;
    response.set_header("Cache-Control", "no-cache");
    response.set_chunked_content_provider(
        "text/event-stream",
        [completion, id, created, includeUsage, modelName](std::size_t, httplib::DataSink& sink) {
          auto [piece, outcome] = completion->take();
          std::string events = piece.empty() ? "" : completionEvent(id, created, modelName, piece);
          if (outcome) {
            if (outcome->error) {
              events += "data: " + toJson(apiError(errorMessage(outcome->error), "internal_error")) + "\n";  // toJson ends one line
            } else {
              events += completionEvent(id, created, modelName, "", &outcome->stats);
              if (includeUsage) events += completionUsageEvent(id, created, modelName, outcome->stats);
            }
            events += "data: [DONE]\n\n";
          }
          if (!events.empty() && !sink.write(events.data(), events.size())) return false;
          if (outcome) sink.done();
          return true;
        },
        [&queue, ticket](bool sent) {
          if (!sent) queue.cancel(ticket);
        });
  });
  const std::string models = toJson({{"object", "list"},
                                     {"data", {{{"id", modelName}, {"object", "model"}, {"created", started}, {"owned_by", "glnet"},
                                                {"max_model_len", queue.contextPositions()}}}}});
  server.Get("/v1/models", [&metrics, models](const httplib::Request& request, httplib::Response& response) {
    metrics.count(request.path, 200);
    response.set_content(models, "application/json");
  });
  // Other methods on the API's endpoints are the client's mistake, said as HTTP says it.
  for (const auto& [path, allowed] : {std::pair<std::string, std::string>{"/v1/completions", "POST"}, {"/v1/models", "GET"}}) {
    const auto refuse = [&metrics, path = path, allowed = allowed](const httplib::Request& request, httplib::Response& response) {
      metrics.count(path, 405);
      response.set_header("Allow", allowed);
      sendApiError(response, 405, request.method + " " + path + " is not allowed: use " + allowed);
    };
    if (allowed != "GET") server.Get(path, refuse);
    if (allowed != "POST") server.Post(path, refuse);
    server.Put(path, refuse);
    server.Patch(path, refuse);
    server.Delete(path, refuse);
  }
  server.Get("/healthz", [&metrics, &stopping](const httplib::Request& request, httplib::Response& response) {
    metrics.count(request.path, stopping ? 503 : 200);
    if (stopping) return sendApiError(response, 503, "the server is shutting down");
    response.set_content("{\"status\": \"ok\"}\n", "application/json");
  });
  server.Get("/metrics", [&metrics, &queue](const httplib::Request& request, httplib::Response& response) {
    metrics.count(request.path, 200);
    response.set_content(metrics.prometheus(queue.stats()), "text/plain; version=0.0.4");
  });
  routeErrors(server, metrics, [](httplib::Response& response, int status, const std::string& message) { sendApiError(response, status, message); },
              emptyCompletionBody);
}

}  // namespace

int main(int argc, char** argv) {
  return cli::run("glnet_serve", [&] {
    cli::Parser parser("glnet_serve",
                       "Serves a model over HTTP with the model, programs and plans kept warm on the GPU.\n\n"
                       "A classifier (--model FILE): requests that arrive while the GPU is busy, or within --max-delay-us of\n"
                       "each other, run as one GPU batch.\n"
                       "  POST /v1/predict   body: a PNG/JPEG/BMP/PGM image (made into the model's input as the model file\n"
                       "                     records its training images were), a multipart/form-data upload (curl -F\n"
                       "                     file=@digit.png; one answer per part), or JSON {\"pixels\": [the input's values]} or\n"
                       "                     {\"images\": [[...], ...]}; JSON pixels are MNIST's polarity (0 = background,\n"
                       "                     255 = ink) unless \"invert\": true; answers as glnet_predict --json prints,\n"
                       "                     with the class's \"class_name\" where the file records names, a \"warning\"\n"
                       "                     for a blank image\n"
                       "  GET  /v1/model     architecture, inputs, classes and metadata of the model\n"
                       "  GET  /metrics      Prometheus text: requests, errors, latency, batch sizes, queue depth\n\n"
                       "A language model (--model DIR, a Hugging Face folder as glnet_generate takes): up to --max-batch\n"
                       "completions decode together, one token each per GPU step; a new one joins at the next step with room,\n"
                       "the others waiting in arrival order.\n"
                       "  POST /v1/completions  OpenAI's text completions: prompt, max_tokens (16), temperature (1; 0 greedy),\n"
                       "                     top_p, top_k, stop (up to 4), seed, stream (server-sent events), model (ignored);\n"
                       "                     a streamed client that disconnects cancels its completion\n"
                       "  GET  /v1/models    the one model (named by its folder)\n"
                       "  GET  /metrics      Prometheus text: requests, errors, completions, tokens, queue length\n\n"
                       "Both: GET /healthz answers 200 once the model is warm. SIGINT or SIGTERM stop accepting, answer what\n"
                       "is in flight, and exit 0.",
                       "--model MODEL.safetensors|DIR [options]");
    parser.modelOptions("model file (safetensors, or ONNX by its .onnx name) or language model folder to serve")
        .option("host", "ADDRESS", "address to listen on", "127.0.0.1")
        .option("port", "N", "port to listen on (0: any free port, printed at start)", "8080")
        .option("max-batch", "N", "classifier: most images in one GPU batch (default 64; lowered, with a warning, to the most the device takes for the model); language model: most completions decoding together (default 8, at most " +
                                      std::to_string(Decoder::largestBatch) + "; each holds a KV cache of --max-context positions)")
        .option("max-delay-us", "N", "classifier: how long a request may wait for others to share its batch", "200")
        .flag("no-batching", "classifier: run every request alone, in arrival order")
        .option("max-context", "N", "language model: positions of the KV cache (default: the config's, at most " +
                                        std::to_string(Decoder::defaultContextLimit) + ")")
        .option("queue-limit", "N", "most images (classifier; default 4096) or completions (language model; default 64) waiting; beyond it requests get 503 with Retry-After")
        .option("max-body-bytes", "N", "largest request body accepted", "8388608")
        .option("threads", "N", "HTTP worker threads (one per open connection)", "256")
        .common(false);
    parser.parse(argc, argv);
    if (!parser.has("model")) throw UsageError("--model is required");
    const std::string modelPath = parser.text("model");
    const bool languageModel = std::filesystem::is_directory(modelPath);
    // An option of the other mode would be silently ignored: refused instead.
    for (const char* option : {"max-delay-us", "no-batching", "input-mean", "input-std", "activation", "max-context"}) {
      if (parser.has(option) && languageModel == (std::string(option) != "max-context")) {
        throw UsageError("--" + std::string(option) + (languageModel ? " applies to classifier models; " + modelPath + " is a language model folder"
                                                                     : " applies to language model folders; " + modelPath + " is a file"));
      }
    }
    const auto port = static_cast<int>(parser.integer("port", 0, 65535));
    const auto maxBody = static_cast<std::size_t>(parser.integer("max-body-bytes", 1024, 1L << 30));
    const auto threads = static_cast<std::size_t>(parser.integer("threads", 1, 4096));
    const std::string host = parser.text("host");
    const ContextOptions contextOptions = parser.contextOptions();

    std::optional<Network> network;
    std::string modelJson;
    if (!languageModel) {
      TensorFile file;
      network = cli::loadModel(parser, &file);
      modelJson = describeModel(*network, file.metadata, modelPath).dump(2) + "\n";
    }

    // Signals go to one thread that waits for them; every other thread, started below, inherits the mask.
    sigset_t stopSignals;
    sigemptyset(&stopSignals);
    sigaddset(&stopSignals, SIGINT);
    sigaddset(&stopSignals, SIGTERM);
    sigaddset(&stopSignals, SIGUSR1);  // wakes the waiter when the server stops by itself
    pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);

    ServeMetrics metrics;
    std::atomic<bool> stopping{false};
    httplib::Server server;
    server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server.set_payload_max_length(maxBody);
    server.set_tcp_nodelay(true);  // answers are small: without it Nagle and delayed ACKs add 40 ms
    server.set_keep_alive_timeout(2);
    server.set_keep_alive_max_count(100000);
    // Every option read before the port is taken: a bad value is its own error, whether or not the port is free.
    CompletionOptions completionOptions;
    BatchingOptions batchingOptions;
    if (languageModel) {
      completionOptions.maxWaiting = static_cast<std::size_t>(parser.has("queue-limit") ? parser.integer("queue-limit", 1, 100'000'000) : 64);
      if (parser.has("max-context")) completionOptions.contextPositions = static_cast<std::uint32_t>(parser.integer("max-context", 2, 1 << 24));
      if (parser.has("max-batch")) completionOptions.batch = static_cast<std::uint32_t>(parser.integer("max-batch", 1, Decoder::largestBatch));
    } else {
      batchingOptions.maxBatch = static_cast<std::size_t>(parser.has("max-batch") ? parser.integer("max-batch", 1, 65536) : 64);
      batchingOptions.maxDelay = std::chrono::microseconds(parser.integer("max-delay-us", 0, 60'000'000));
      batchingOptions.batching = !parser.has("no-batching");
      batchingOptions.maxQueuedImages = static_cast<std::size_t>(parser.has("queue-limit") ? parser.integer("queue-limit", 1, 100'000'000) : 4096);
    }
    // httplib listens with a backlog of 5, too few for hundreds of clients connecting at once: the socket is
    // kept here and listened on again with the system's limit once bound.
    int listening = -1;
    server.set_socket_options([&listening](socket_t socket) {
      const int on = 1;
      setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
      listening = socket;
    });
    const int bound = port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
    if (bound < 0) throw Error("cannot listen on " + host + ":" + std::to_string(port) + " (in use, or not an address of this machine)");
    if (::listen(listening, SOMAXCONN) != 0) throw Error("cannot listen on " + host + ":" + std::to_string(bound));
    std::unique_ptr<BatchingPredictor> predictor;
    std::unique_ptr<CompletionQueue> completions;
    Stopwatch warmup;
    if (languageModel) {
      completions = std::make_unique<CompletionQueue>(contextOptions, modelPath, completionOptions);
      std::fprintf(stderr, "glnet_serve: %s on %s, %u completions at once, a context of %u positions each, warm in %.0f ms\n",
                   modelPath.c_str(), completions->deviceName().c_str(), completions->batch(), completions->contextPositions(), warmup.milliseconds());
      routeCompletions(server, *completions, metrics, stopping, folderName(modelPath));
    } else {
      predictor = std::make_unique<BatchingPredictor>(contextOptions, *network, batchingOptions);
      if (predictor->maxBatch() < batchingOptions.maxBatch) {
        cli::warn("--max-batch " + std::to_string(batchingOptions.maxBatch) + " is more than this device takes for this model: batches of up to " +
                  std::to_string(predictor->maxBatch()) + " images (give --max-batch " + std::to_string(predictor->maxBatch()) + " to say so)");
      }
      std::fprintf(stderr, "glnet_serve: %s on %s, batches of up to %zu images%s, warm in %.0f ms\n", modelPath.c_str(),
                   predictor->deviceName().c_str(), predictor->maxBatch(), batchingOptions.batching ? "" : " (batching off)",
                   warmup.milliseconds());
      routeClassifier(server, *predictor, metrics, stopping, *network, modelJson);
    }
    server.set_exception_handler([languageModel](const httplib::Request&, httplib::Response& response, std::exception_ptr failure) {
      if (!languageModel) return sendError(response, 500, errorMessage(failure));
      response.status = 500;
      response.set_content(toJson(apiError(errorMessage(failure), "internal_error")), "application/json");
    });

    cli::printWarnings("glnet_serve");
    std::printf("glnet_serve: listening on http://%s:%d\n", host.c_str(), bound);
    std::fflush(stdout);

    std::thread signalWaiter([&] {
      int signal = 0;
      sigwait(&stopSignals, &signal);
      if (signal == SIGUSR1) return;
      std::fprintf(stderr, "glnet_serve: %s: answering what is in flight, then exiting\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
      stopping = true;
      if (predictor) predictor->drain();
      if (completions) completions->drain();
      server.stop();
    });
    const bool listened = server.listen_after_bind();
    if (!stopping) pthread_kill(signalWaiter.native_handle(), SIGUSR1);
    signalWaiter.join();
    if (!listened && !stopping) throw Error("the server stopped listening unexpectedly");
    std::fprintf(stderr, "glnet_serve: stopped\n");
    return 0;
  });
}
