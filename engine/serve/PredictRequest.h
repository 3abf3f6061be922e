// The body of a prediction request turned into uint8 images: an encoded image (PNG, JPEG, BMP, PGM) made
// into the model's input as glnet_predict does (toModelPixels, as the model file records its training images were made), JSON {"pixels": [...]} / {"images": [[...], ...]} of raw
// 0-255 values, or the parts of a multipart/form-data upload (curl -F file=@digit.png). Anything else throws
// glnet::Error with a one-line message for the caller that quotes no bytes of the request.
#pragma once

#include "data/Image.h"

#include <cstdint>
#include <string>
#include <vector>

namespace glnet {

struct PredictRequest {
  std::vector<std::uint8_t> pixels;    // count × inputs bytes
  std::vector<std::string> names;      // one per image: "body", a part's file or field name, "pixels" or "images[i]"
  std::vector<std::string> warnings;   // one per image: empty, or why its class means little (a blank image)
};

// One part of a multipart/form-data body, as the HTTP layer split it.
struct FormPart {
  std::string name;         // the form field
  std::string filename;     // empty when the part is not a file
  std::string contentType;  // empty when the part did not say
  std::string content;
};

// What a request without a body is told (also when the HTTP layer refused it before parsing, lacking a Content-Length).
constexpr const char* emptyRequestBody = "the request has no body: send an image file, JSON pixels, or a multipart/form-data upload";

// Most images one request may carry; a batch beyond it is split by the client.
constexpr std::size_t largestRequestImages = 4096;

// `inputs` is the model's input count; `images` how an image file becomes them (Network::images; default: MNIST's
// digits), which must give `inputs` values.
PredictRequest parsePredictRequest(const std::string& body, const std::string& contentType, std::size_t inputs,
                                   const ImagePreprocessing& images = ImagePreprocessing{});
// The parts of a multipart/form-data upload: each an image file, or JSON pixels when its type says so.
PredictRequest parsePredictParts(const std::vector<FormPart>& parts, std::size_t inputs, const ImagePreprocessing& images = ImagePreprocessing{});

}  // namespace glnet
