#include "serve/PredictRequest.h"

#include "data/Image.h"
#include "gl/check.h"

#include <nlohmann/json.hpp>

#include <cmath>

namespace glnet {
namespace {

void appendPixels(const nlohmann::json& values, const std::string& name, std::size_t inputs, PredictRequest& request) {
  if (!values.is_array()) throw Error(name + " must be an array of " + std::to_string(inputs) + " numbers from 0 to 255");
  if (values.size() != inputs) {
    throw Error(name + " has " + std::to_string(values.size()) + " values; the model takes " + std::to_string(inputs));
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    const nlohmann::json& value = values[i];
    const double number = value.is_number() ? value.get<double>() : NAN;
    if (!(number >= 0 && number <= 255) || number != std::floor(number)) {
      throw Error(name + "[" + std::to_string(i) + "] is " + value.dump() + ", not an integer from 0 to 255");
    }
    request.pixels.push_back(static_cast<std::uint8_t>(number));
  }
  request.names.push_back(name);
}

PredictRequest parseJson(const std::string& body, std::size_t inputs) {
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& error) {
    throw Error(std::string("the body is not valid JSON (") + error.what() + ")");
  }
  if (!document.is_object() || document.contains("pixels") == document.contains("images")) {
    throw Error(R"(a JSON body is an object with "pixels": [...] or "images": [[...], ...])");
  }
  PredictRequest request;
  if (document.contains("pixels")) {
    appendPixels(document["pixels"], "pixels", inputs, request);
    return request;
  }
  const nlohmann::json& images = document["images"];
  if (!images.is_array() || images.empty()) throw Error(R"("images" must be a non-empty array of pixel arrays)");
  for (std::size_t i = 0; i < images.size(); ++i) appendPixels(images[i], "images[" + std::to_string(i) + "]", inputs, request);
  return request;
}

}  // namespace

PredictRequest parsePredictRequest(const std::string& body, const std::string& contentType, std::size_t inputs) {
  if (body.empty()) throw Error("the request has no body: send an image file or JSON pixels");
  const bool json = contentType.rfind("application/json", 0) == 0 || (contentType.empty() && body.front() == '{');
  if (json) return parseJson(body, inputs);
  if (inputs != 28 * 28) {
    throw Error("the model takes " + std::to_string(inputs) + " inputs; images are 28x28 digits, send JSON pixels instead");
  }
  const GrayImage image = decodeGrayImage(reinterpret_cast<const std::uint8_t*>(body.data()), body.size(), "the body");
  return {toMnistDigit(image, Inversion::automatic), {"image"}};
}

}  // namespace glnet
