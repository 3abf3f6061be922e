// An environment variable set while the object lives, its previous value (or its absence) back however the test ends.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace glnet::test {

class EnvironmentSetting {
 public:
  EnvironmentSetting(std::string name, const std::string& value) : name_(std::move(name)) {
    if (const char* previous = std::getenv(name_.c_str())) previous_ = previous;
    setenv(name_.c_str(), value.c_str(), 1);
  }
  ~EnvironmentSetting() {
    if (previous_) {
      setenv(name_.c_str(), previous_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  EnvironmentSetting(const EnvironmentSetting&) = delete;
  EnvironmentSetting& operator=(const EnvironmentSetting&) = delete;

 private:
  std::string name_;
  std::optional<std::string> previous_;
};

}  // namespace glnet::test
