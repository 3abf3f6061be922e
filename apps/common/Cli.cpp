#include "common/Cli.h"

#include "base/check.h"
#include "importer/Onnx.h"
#include "base/log.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <utility>

namespace glnet::cli {

Parser::Parser(std::string program, std::string summary, std::string usage)
    : program_(std::move(program)), summary_(std::move(summary)), usage_(std::move(usage)) {}

Parser& Parser::flag(const std::string& name, const std::string& help) {
  order_.push_back(name);
  options_[name] = {"", help, ""};
  return *this;
}

Parser& Parser::option(const std::string& name, const std::string& value, const std::string& help,
                       const std::string& defaultValue) {
  order_.push_back(name);
  options_[name] = {value, help, defaultValue};
  return *this;
}

Parser& Parser::hidden(const std::string& name) {
  options_.at(name).hidden = true;
  return *this;
}

Parser& Parser::modelOptions(const std::string& help) {
  option("model", "FILE", help);
  option("input-mean", "M", "inputs are (x/255 - M) / S: override the model file's input_mean (default there: 0)");
  option("input-std", "S", "override the model file's input_std (default there: 1)");
  return option("activation", "NAME", "override the model file's hidden activation: relu, tanh or sigmoid (default there: relu)");
}

Parser& Parser::dimensionOption() {
  option("dim", "NAME=LENGTH", "an ONNX model's symbolic dimension other than the batch (e.g. sequence=128; default 1); once each");
  return repeatable("dim");
}

std::map<std::string, std::uint32_t> Parser::dimensions() const {
  std::map<std::string, std::uint32_t> lengths;
  for (const std::string& text : texts("dim")) {
    const std::size_t equals = text.find('=');
    const std::string length = equals == std::string::npos ? "" : text.substr(equals + 1);
    if (equals == std::string::npos || equals == 0 || length.empty() || length.size() > 8 ||
        !std::all_of(length.begin(), length.end(), [](char c) { return c >= '0' && c <= '9'; }) || std::stoul(length) < 1) {
      throw UsageError("--dim takes NAME=LENGTH with a length of at least 1 (e.g. sequence=128), not '" + text + "'");
    }
    lengths[text.substr(0, equals)] = static_cast<std::uint32_t>(std::stoul(length));
  }
  return lengths;
}

Parser& Parser::common(bool json) {
  option("device", "N|NAME", "device index or part of its renderer name (also GLNET_DEVICE); default: first GPU, else llvmpipe");
  option("api", "gl|gles", "OpenGL 4.3 core, or OpenGL ES 3.1 as embedded GPUs offer it (also GLNET_API); default: gl");
  flag("verbose", "log what the engine does, GL debug messages included (also GLNET_DEBUG=1)");
  if (json) flag("json", "print the result as JSON on stdout");
  return *this;
}

Parser& Parser::positionals(const std::string& name, const std::string& help, std::size_t minimum,
                            std::size_t maximum) {
  positionalName_ = name;
  positionalHelp_ = help;
  minimumPositionals_ = minimum;
  maximumPositionals_ = maximum;
  return *this;
}

std::string Parser::help() const {
  std::string text = "usage: " + program_ + " " + usage_ + "\n\n" + summary_ + "\n\n";
  if (!positionalName_.empty()) text += "  " + positionalName_ + "\n      " + positionalHelp_ + "\n";
  for (const std::string& name : order_) {
    const Option& option = options_.at(name);
    if (option.hidden) continue;
    text += "  --" + name + (option.value.empty() ? "" : " " + option.value) + "\n      " + option.help;
    if (!option.defaultValue.empty()) text += " (default: " + option.defaultValue + ")";
    text += "\n";
  }
  text += "  --help\n      show this help and exit\n";
  return text;
}

void Parser::parse(int argc, char** argv) {
  bool optionsEnded = false;
  for (int i = 1; i < argc; ++i) {
    std::string argument = argv[i];
    if (optionsEnded || argument.size() < 2 || argument.rfind("--", 0) != 0) {
      if (argument == "--") {
        optionsEnded = true;
        continue;
      }
      positional_.push_back(argument);
      continue;
    }
    std::string name = argument.substr(2);
    std::string value;
    bool inlineValue = false;
    if (const auto equals = name.find('='); equals != std::string::npos) {
      value = name.substr(equals + 1);
      name = name.substr(0, equals);
      inlineValue = true;
    }
    if (name == "help") {
      std::cout << help();
      std::exit(0);
    }
    const auto found = options_.find(name);
    if (found == options_.end()) throw UsageError("unknown option --" + name);
    if (found->second.value.empty()) {
      if (inlineValue) throw UsageError("--" + name + " takes no value");
      given_[name] = "1";
      continue;
    }
    if (!inlineValue) {
      if (i + 1 >= argc) throw UsageError("--" + name + " needs a value (" + found->second.value + ")");
      value = argv[++i];
    }
    given_[name] = value;
    repeated_[name].push_back(value);
  }
  if (positional_.size() < minimumPositionals_) {
    throw UsageError(positionalName_.empty() ? "missing arguments" : "missing " + positionalName_);
  }
  if (positional_.size() > maximumPositionals_) throw UsageError("unexpected argument '" + positional_.back() + "'");
}

bool Parser::preset(const std::string& name, const std::string& value) {
  GLNET_ASSERT(options_.count(name), "option --" + name + " was never declared");
  return given_.emplace(name, value).second;
}

bool Parser::has(const std::string& name) const { return given_.count(name) != 0; }

Parser& Parser::repeatable(const std::string& name) {
  GLNET_ASSERT(options_.count(name), "option --" + name + " was never declared");
  options_.at(name).repeatable = true;
  return *this;
}

std::vector<std::string> Parser::texts(const std::string& name) const {
  const auto found = repeated_.find(name);
  return found == repeated_.end() ? std::vector<std::string>{} : found->second;
}

std::string Parser::text(const std::string& name) const {
  GLNET_ASSERT(options_.count(name), "option --" + name + " was never declared");
  const auto found = given_.find(name);
  return found != given_.end() ? found->second : options_.at(name).defaultValue;
}

ContextOptions Parser::contextOptions() const {
  log::readEnvironment();
  if (options_.count("verbose") && has("verbose")) log::setLevel(log::Level::debug);
  ContextOptions options;
  if (options_.count("device")) options.device = text("device");
  if (options_.count("api") && has("api")) {
    try {
      options.api = parseApi(text("api"));
    } catch (const Error& error) {
      throw UsageError(error.what());
    }
  }
  options.debug = log::enabled(log::Level::debug);
  return options;
}

ContextOptions Parser::contextOptions(const Communicator& ranks) const {
  ContextOptions options = contextOptions();
  options.localRank = ranks.localRank();
  return options;
}

namespace {
std::vector<std::string>& pendingWarnings() {
  static std::vector<std::string> warnings;
  return warnings;
}
}  // namespace

void warn(const std::string& text) { pendingWarnings().push_back(text); }

void printWarnings(const char* program) {
  for (const std::string& text : pendingWarnings()) std::fprintf(stderr, "%s: warning: %s\n", program, text.c_str());
  pendingWarnings().clear();
}

Network loadModel(const Parser& parser, TensorFile* file) {
  const std::string path = parser.text("model");
  const bool onnx = isOnnxPath(path);
  if (onnx && parser.has("activation")) throw UsageError("--activation applies to safetensors models; an ONNX model's graph says what it computes");
  TensorFile contents = onnx ? TensorFile{} : readSafetensors(path);
  Network network = onnx ? Network::fromOnnx(path) : Network::fromTensors(contents, path);
  if (parser.has("input-mean")) network.input.mean.assign(network.input.channels(), static_cast<float>(parser.number("input-mean")));
  if (parser.has("input-std")) {
    const auto std = static_cast<float>(parser.number("input-std"));
    if (!(std > 0)) throw UsageError("--input-std must be positive");
    network.input.std.assign(network.input.channels(), std);
  }
  if (parser.has("activation")) {
    network.activation = parseActivation(parser.text("activation"));
    for (LayerSpec& layer : network.layers) {
      if (layer.activation != Activation::none) layer.activation = network.activation;
    }
  }
  std::vector<std::string> missing;
  if (!network.inputFormatRecorded && !parser.has("input-mean") && !parser.has("input-std")) missing.emplace_back("input_mean/input_std (so inputs are x/255)");
  if (!network.activationRecorded && !parser.has("activation")) missing.emplace_back("activation (so relu)");
  // An ONNX graph says what it computes, and its inputs are what its exporter made them: nothing to point out.
  if (!missing.empty() && !onnx) {
    warn(path + " records no " + missing[0] + (missing.size() > 1 ? " nor " + missing[1] : "") +
         "; give --input-mean/--input-std/--activation as it was trained, or see the README's 'Models from PyTorch'");
  }
  if (file) *file = std::move(contents);
  return network;
}

namespace {

// What the command printed before it failed (the device line, say) goes out before the error line: stdout is fully
// buffered when it is not a terminal, stderr is not buffered at all.
void flushOutput() {
  std::cout.flush();
  std::fflush(stdout);
}

// The exit code and the line for an error that escaped an app's body.
std::pair<int, std::string> verdict(const char* program, const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const UsageError& usage) {
    return {2, std::string(usage.what()) + " (see " + program + " --help)"};
  } catch (const Error& failure) {
    return {1, failure.what()};
  } catch (const std::bad_alloc&) {
    return {1, "out of host memory"};
  } catch (const std::exception& unexpected) {
    return {1, std::string("unexpected failure: ") + unexpected.what()};
  } catch (...) {
    return {1, "unexpected failure"};
  }
}

bool sameOnEveryRank(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const UsageError&) {
    return true;
  } catch (const SharedError&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace

int run(const char* program, const std::function<int()>& body) {
  // A file-size limit (ulimit -f) must fail a write with EFBIG, which glnet reports, not kill the process.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    const int code = body();
    if (code == 0) printWarnings(program);
    return code;
  } catch (...) {
    const auto [code, line] = verdict(program, std::current_exception());
    flushOutput();
    std::fprintf(stderr, "%s: error: %s\n", program, line.c_str());
    return code;
  }
}

int runRanks(const char* program, const std::function<int(const Communicator&)>& body) {
  std::unique_ptr<Communicator> ranks;
  if (const int failed = run(program, [&] {
        ranks = std::make_unique<Communicator>();
        return 0;
      })) {
    return failed;
  }
  if (!ranks->distributed()) return run(program, [&] { return body(*ranks); });
  try {
    const int code = body(*ranks);
    if (code == 0 && ranks->rank() == 0) printWarnings(program);
    return code;
  } catch (...) {
    const std::exception_ptr error = std::current_exception();
    const auto [code, line] = verdict(program, error);
    flushOutput();
    if (sameOnEveryRank(error)) {
      if (ranks->rank() == 0) std::fprintf(stderr, "%s: error: %s\n", program, line.c_str());
      return code;
    }
    std::fprintf(stderr, "%s: error: rank %d of %d: %s\n", program, ranks->rank(), ranks->size(), line.c_str());
    std::fflush(stderr);
    ranks->abortAll(code);
  }
}

void setUpTogether(const Communicator& ranks, const std::function<void()>& setUp) {
  if (!ranks.distributed()) {
    setUp();
    return;
  }
  std::string problem;
  try {
    setUp();
  } catch (const std::exception& error) {
    problem = *error.what() ? error.what() : "unexpected failure";
  }
  if (const std::string first = ranks.firstProblem(problem); !first.empty()) throw SharedError(first);
}

}  // namespace glnet::cli
