// What a server's queue throws when it cannot take more work.
#pragma once

#include "base/check.h"

namespace glnet {

// The queue holds as much work as it may, or the server is shutting down: the caller should retry later
// (elsewhere).
class Unavailable : public Error {
 public:
  using Error::Error;
};

}  // namespace glnet
