#include "serve/PredictRequest.h"

#include "data/Image.h"
#include "formats/UntrustedJson.h"
#include "base/check.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace glnet {
namespace {

// `blank`: the image as sent was blank or nearly uniform.
void append(PredictRequest& request, const std::vector<std::uint8_t>& pixels, const std::string& name, bool blank) {
  if (request.names.size() >= largestRequestImages) {
    throw Error("a request carries at most " + std::to_string(largestRequestImages) + " images; send the rest in another");
  }
  request.pixels.insert(request.pixels.end(), pixels.begin(), pixels.end());
  request.names.push_back(name);
  request.warnings.push_back(blank ? blankImageWarning : "");
}

void appendPixels(const nlohmann::json& values, const std::string& name, std::size_t inputs, bool invert, PredictRequest& request) {
  if (!values.is_array()) throw Error(name + " must be an array of " + std::to_string(inputs) + " numbers from 0 to 255");
  if (values.size() != inputs) {
    throw Error(name + " has " + std::to_string(values.size()) + " values; the model takes " + std::to_string(inputs));
  }
  std::vector<std::uint8_t> pixels(inputs);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const nlohmann::json& value = values[i];
    const double number = value.is_number() ? value.get<double>() : NAN;
    if (!(number >= 0 && number <= 255) || number != std::floor(number)) {
      throw Error(name + "[" + std::to_string(i) + "] is " + describeJsonValue(value) + ", not an integer from 0 to 255");
    }
    pixels[i] = static_cast<std::uint8_t>(invert ? 255 - number : number);
  }
  append(request, pixels, name, looksBlank(pixels.data(), pixels.size()));
}

void appendJson(const std::string& body, std::size_t inputs, const std::string& what, PredictRequest& request) {
  const nlohmann::json document = parseUntrustedJson(body, what);
  const char* shape = R"(a JSON body is an object with "pixels": [...] or "images": [[...], ...], and optionally "invert": true)";
  if (!document.is_object() || document.contains("pixels") == document.contains("images")) throw Error(shape);
  for (const auto& [key, value] : document.items()) {
    if (key != "pixels" && key != "images" && key != "invert") throw Error(std::string("unknown field in the JSON body; ") + shape);
  }
  bool invert = false;
  if (document.contains("invert")) {
    if (!document["invert"].is_boolean()) throw Error(R"("invert" must be true or false)");
    invert = document["invert"].get<bool>();
  }
  if (document.contains("pixels")) return appendPixels(document["pixels"], "pixels", inputs, invert, request);
  const nlohmann::json& images = document["images"];
  if (!images.is_array() || images.empty()) throw Error(R"("images" must be a non-empty array of pixel arrays)");
  for (std::size_t i = 0; i < images.size(); ++i) {
    appendPixels(images[i], "images[" + std::to_string(i) + "]", inputs, invert, request);
  }
}

void appendImage(const std::string& bytes, std::size_t inputs, const ImagePreprocessing& images, const std::string& name,
                 PredictRequest& request) {
  if (images.resize == ImageResize::none) {
    throw Error("the model takes " + std::to_string(inputs) + " inputs, which are no image; send JSON pixels instead");
  }
  bool blank = false;
  const std::vector<std::uint8_t> pixels = toModelPixels(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), name, images, &blank);
  GLNET_ASSERT(pixels.size() == inputs, "an image preprocessing gives the model's inputs");
  append(request, pixels, name, blank);
}

// The media type alone, lower case: "Application/JSON; charset=utf-8" → "application/json".
std::string mediaType(const std::string& contentType) {
  std::string type = contentType.substr(0, contentType.find(';'));
  type.erase(std::remove_if(type.begin(), type.end(), [](unsigned char c) { return std::isspace(c); }), type.end());
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::tolower(c); });
  return type;
}

// The media type of an encoded image by its first bytes, or null.
const char* imageType(const std::string& bytes) {
  if (bytes.rfind("\x89PNG", 0) == 0) return "image/png";
  if (bytes.rfind("\xff\xd8", 0) == 0) return "image/jpeg";
  if (bytes.rfind("BM", 0) == 0) return "image/bmp";
  if (bytes.rfind("P5", 0) == 0) return "image/x-portable-graymap";
  return nullptr;
}

// A client-chosen name made safe to echo: printable ASCII, at most 100 characters.
std::string printableName(const std::string& text) {
  std::string name;
  for (const char c : text.substr(0, 100)) name += c >= 0x20 && c < 0x7f ? c : '?';
  return name;
}

bool isJson(const std::string& type, const std::string& bytes) {
  return type == "application/json" || (type.empty() && !bytes.empty() && bytes.front() == '{');
}

void appendContent(const std::string& bytes, const std::string& type, std::size_t inputs, const ImagePreprocessing& images,
                   const std::string& name, PredictRequest& request) {
  if (bytes.empty()) throw Error(name + " is empty: send an image file or JSON pixels");
  if (!isJson(type, bytes)) return appendImage(bytes, inputs, images, name, request);
  if (const char* type = imageType(bytes)) {
    throw Error(name + " is an image sent as application/json; send it with Content-Type " + type);
  }
  appendJson(bytes, inputs, name, request);
}

}  // namespace

PredictRequest parsePredictRequest(const std::string& body, const std::string& contentType, std::size_t inputs, const ImagePreprocessing& images) {
  if (body.empty()) throw Error(emptyRequestBody);
  PredictRequest request;
  appendContent(body, mediaType(contentType), inputs, images, "body", request);
  return request;
}

PredictRequest parsePredictParts(const std::vector<FormPart>& parts, std::size_t inputs, const ImagePreprocessing& images) {
  if (parts.empty()) throw Error("the multipart/form-data upload has no parts: send -F file=@digit.png");
  PredictRequest request;
  for (const FormPart& part : parts) {
    const std::string name = printableName(part.filename.empty() ? part.name : part.filename);
    appendContent(part.content, mediaType(part.contentType), inputs, images, name.empty() ? "part" : name, request);
  }
  return request;
}

}  // namespace glnet
