// The body of a prediction request turned into uint8 images: an encoded image (PNG, JPEG, BMP, PGM) made
// into an MNIST-style digit as glnet_predict does, or JSON {"pixels": [...]} / {"images": [[...], ...]} of
// raw 0-255 values. Anything else throws glnet::Error with a one-line message for the caller.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace glnet {

struct PredictRequest {
  std::vector<std::uint8_t> pixels;  // count × inputs bytes
  std::vector<std::string> names;    // one per image: "image", "pixels" or "images[i]"
};

// `inputs` is the model's input count; images need it to be 784 (28×28).
PredictRequest parsePredictRequest(const std::string& body, const std::string& contentType, std::size_t inputs);

}  // namespace glnet
