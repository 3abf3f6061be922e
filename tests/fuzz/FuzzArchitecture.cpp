// --arch strings as glnet_train takes them: parsed, and built into a network with its initial weights
// when the parameters fit the harness's memory budget (larger ones are the business of the size checks,
// which the bad-input suite covers).
#include "base/check.h"
#include "model/Network.h"

#include <numeric>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    if (text == "cnn") {
      glnet::Network::create(text, glnet::Activation::relu, 0);
      return 0;
    }
    const std::vector<int> sizes = glnet::parseArchitecture(text);
    std::uint64_t parameters = 0;
    for (std::size_t i = 0; i + 1 < sizes.size(); ++i) parameters += std::uint64_t(sizes[i] + 1) * std::uint64_t(sizes[i + 1]);
    if (parameters <= (std::uint64_t{1} << 20)) glnet::Network::create(text, glnet::Activation::tanh, 1);
  } catch (const glnet::Error&) {
  }
  return 0;
}
