// glnet_serve's request bodies: the first byte chooses the Content-Type (JSON, an image type, or none),
// the rest is the body, for a 784-input model.
#include "gl/check.h"
#include "serve/PredictRequest.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const char* const contentTypes[] = {"application/json", "image/png", "image/jpeg", "application/octet-stream", ""};
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    glnet::parsePredictRequest(body, contentTypes[data[0] % 5], 784);
  } catch (const glnet::Error&) {
  }
  return 0;
}
