#include "base/OptionValues.h"

#include "base/check.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace glnet {

long OptionValues::integer(const std::string& name, long minimum, long maximum) const {
  const std::string value = text(name);
  char* end = nullptr;
  errno = 0;
  const long parsed = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno == ERANGE || parsed < minimum || parsed > maximum) {
    throw UsageError(optionName(name) + " must be an integer from " + std::to_string(minimum) + " to " + std::to_string(maximum) +
                     ", not '" + value + "'");
  }
  return parsed;
}

double OptionValues::number(const std::string& name) const {
  const std::string value = text(name);
  char* end = nullptr;
  const double parsed = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(parsed)) throw UsageError(optionName(name) + " must be a finite number, not '" + value + "'");
  return parsed;
}

}  // namespace glnet
