// glnet_serve's /v1/completions bodies (OpenAI's fields): each is read, or refused with glnet::Error; what is read is
// answered as the server would, so that the answer's JSON is made from every value a body can give.
#include "base/check.h"
#include "serve/CompletionApi.h"

#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const glnet::CompletionCall call = glnet::parseCompletionCall(std::string_view(reinterpret_cast<const char*>(data), size));
    glnet::GenerationStats stats;
    stats.promptTokens = call.request.prompt.size();
    stats.stopReason = "length";
    glnet::completionAnswer("cmpl-1", 0, "model", call.request.prompt, stats).dump();
    for (const std::string& stop : call.request.settings.stops) glnet::completionEvent("cmpl-1", 0, "model", stop);
  } catch (const glnet::Error&) {
  }
  return 0;
}
