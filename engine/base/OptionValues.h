// Options by their flag names (without dashes) as a front end took them: a command's parser (apps/common/Cli) or a
// training run's flags (train/TrainingRun), read alike; errors name an option as the front end takes it (optionName).
#pragma once

#include <string>

namespace glnet {

class OptionValues {
 public:
  virtual ~OptionValues() = default;
  // Given (on the command line, as a keyword argument, or restored from a file); a switch is given as "1".
  virtual bool has(const std::string& name) const = 0;
  // The value given, else the option's default; empty when it has neither.
  virtual std::string text(const std::string& name) const = 0;
  // An integer from `minimum` to `maximum`; anything else is a UsageError.
  long integer(const std::string& name, long minimum, long maximum) const;
  // A finite number (inf, nan and out-of-range values such as 1e999 are usage errors).
  double number(const std::string& name) const;
};

}  // namespace glnet
