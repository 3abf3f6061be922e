#include "support/GlContext.h"

#include <memory>

namespace glnet::test {

Context& glContext() {
  static const std::unique_ptr<Context> context = [] {
    ContextOptions options;
    options.debug = true;
    return std::make_unique<Context>(options);
  }();
  return *context;
}

}  // namespace glnet::test
