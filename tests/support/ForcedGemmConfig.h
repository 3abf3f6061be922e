// Forces one GEMM configuration (GLNET_GEMM_CONFIG) for the lifetime of this object, then restores the
// variable as it was, so a test can run an op under every configuration in turn.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace glnet::test {

class ForcedGemmConfig {
 public:
  explicit ForcedGemmConfig(const std::string& name) {
    if (const char* value = std::getenv(variable)) previous_ = value;
    setenv(variable, name.c_str(), 1);
  }
  ~ForcedGemmConfig() {
    if (previous_) {
      setenv(variable, previous_->c_str(), 1);
    } else {
      unsetenv(variable);
    }
  }
  ForcedGemmConfig(const ForcedGemmConfig&) = delete;
  ForcedGemmConfig& operator=(const ForcedGemmConfig&) = delete;

 private:
  static constexpr const char* variable = "GLNET_GEMM_CONFIG";
  std::optional<std::string> previous_;
};

}  // namespace glnet::test
