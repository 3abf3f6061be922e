// Flag parsing and the app boundary shared by every glnet command: --help, usage errors (exit 2),
// glnet::Error as one line on stderr (exit 1).
#pragma once

#include "base/OptionValues.h"
#include "distributed/Communicator.h"
#include "gl/Context.h"
#include "model/Network.h"
#include "train/TrainingInputs.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace glnet::cli {

class Parser : public OptionValues {
 public:
  Parser(std::string program, std::string summary, std::string usage);
  // A boolean switch such as --json.
  Parser& flag(const std::string& name, const std::string& help);
  // A --name VALUE option; an empty default means "not given".
  Parser& option(const std::string& name, const std::string& value, const std::string& help,
                 const std::string& defaultValue = "");
  // Leaves --name out of --help: inspection for the project's own checks, documented where they use it.
  Parser& hidden(const std::string& name);
  // Lets --name be given several times (texts() returns every value; text() the last).
  Parser& repeatable(const std::string& name);
  // Adds --model FILE (safetensors, or ONNX by its .onnx name) and the overrides of what a model file may lack:
  // --input-mean, --input-std, --activation.
  Parser& modelOptions(const std::string& help);
  // Adds --dim NAME=LENGTH, repeatable: an ONNX model's symbolic dimension other than the batch.
  Parser& dimensionOption();
  // The lengths --dim gives, by name; throws a UsageError for one that is not NAME=LENGTH with a length from 1.
  std::map<std::string, std::uint32_t> dimensions() const;
  // Adds --device, --verbose and (when `json`) --json, which every command has.
  Parser& common(bool json);
  // Accepts between `minimum` and `maximum` positional arguments described by `name`.
  Parser& positionals(const std::string& name, const std::string& help, std::size_t minimum, std::size_t maximum);

  // Prints help and exits 0 on --help; throws UsageError on anything it does not know.
  void parse(int argc, char** argv);

  // Uses `value` for --name where the command line did not give it (a setting restored from a file); a flag
  // is set by "1". Returns false, changing nothing, when the command line gave it.
  bool preset(const std::string& name, const std::string& value);

  bool has(const std::string& name) const override;
  std::string text(const std::string& name) const override;
  std::vector<std::string> texts(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }

  // --device/GLNET_DEVICE and --verbose/GLNET_DEBUG as context options; also sets the log level. With
  // `ranks`, an unnamed device is the host's GPU for this rank.
  ContextOptions contextOptions() const;
  ContextOptions contextOptions(const Communicator& ranks) const;
  std::string help() const;

 private:
  struct Option {
    std::string value;  // empty for a flag
    std::string help;
    std::string defaultValue;
    bool repeatable = false;
    bool hidden = false;
  };
  std::map<std::string, std::vector<std::string>> repeated_;
  std::string program_, summary_, usage_;
  std::vector<std::string> order_;
  std::map<std::string, Option> options_;
  std::map<std::string, std::string> given_;
  std::string positionalName_, positionalHelp_;
  std::size_t minimumPositionals_ = 0, maximumPositionals_ = 0;
  std::vector<std::string> positional_;
};

// A warning for stderr, printed once the command has succeeded (by run, or earlier by printWarnings) and
// dropped when it fails, so that a failure stays one line.
void warn(const std::string& text);
void printWarnings(const char* program);

// The model of --model with the overrides of modelOptions applied; warns when a safetensors file does not record its
// input scaling or activation and no flag gives them (an ONNX graph says what it computes). `file`, when given, gets the file's contents.
Network loadModel(const Parser& parser, TensorFile* file = nullptr);

// Runs `body` as an app's main: returns its exit code, or prints `program: error: ...` and returns 1
// (glnet::Error) or 2 (UsageError).
int run(const char* program, const std::function<int()>& body);
// The same for an app that may run as one rank of a data-parallel job (under mpirun): `body` gets the
// ranks. Errors every rank meets alike (usage errors, SharedError) are printed by rank 0 alone, and every
// rank returns; any other error is printed with its rank and ends all ranks at once, so that none waits
// forever for the failed one.
int runRanks(const char* program, const std::function<int(const Communicator&)>& body);
// Runs `setUp` (reading files, opening the device) on every rank and stops them all together when any rank
// failed: alone, the error goes out as it was; under mpirun, as a SharedError carrying the message of the
// lowest-numbered failing rank.
void setUpTogether(const Communicator& ranks, const std::function<void()>& setUp);

}  // namespace glnet::cli
