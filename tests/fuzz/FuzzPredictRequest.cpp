// glnet_serve's request bodies, for a 784-input model: the first byte chooses the Content-Type (JSON, an
// image type, none) of a body, or a multipart/form-data upload whose parts, as the HTTP layer splits them,
// are the rest separated by "\n--\n", each "name\nfilename\ncontent type\n" then its content.
#include "base/check.h"
#include "serve/PredictRequest.h"

#include <string_view>

namespace {

std::vector<glnet::FormPart> splitParts(std::string_view rest) {
  std::vector<glnet::FormPart> parts;
  while (!rest.empty()) {
    const std::size_t end = std::min(rest.find("\n--\n"), rest.size());
    std::string_view text = rest.substr(0, end);
    rest.remove_prefix(std::min(end + 4, rest.size()));
    glnet::FormPart part;
    std::string* fields[] = {&part.name, &part.filename, &part.contentType};
    for (std::string* field : fields) {
      const std::size_t line = std::min(text.find('\n'), text.size());
      *field = std::string(text.substr(0, line));
      text.remove_prefix(std::min(line + 1, text.size()));
    }
    part.content = std::string(text);
    parts.push_back(std::move(part));
  }
  return parts;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const char* const contentTypes[] = {"application/json", "image/png", "image/jpeg", "application/octet-stream", "",
                                             "Application/JSON; charset=utf-8"};
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (data[0] % 7 == 6) {
      glnet::parsePredictParts(splitParts(body), 784);
    } else {
      glnet::parsePredictRequest(body, contentTypes[data[0] % 7], 784);
    }
  } catch (const glnet::Error&) {
  }
  return 0;
}
