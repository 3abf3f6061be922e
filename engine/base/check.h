// Error handling in three tiers: GLNET_ASSERT for programmer errors, glnet::Error for
// environment and input failures a user can fix, GL_CHECK (gl/GlCheck.h) for GL calls whose failure must be named.
#pragma once

#include <stdexcept>
#include <string>

namespace glnet {

// An environment or input failure; the message says what went wrong and what to do about it.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A command-line usage error: apps exit with code 2 instead of 1.
class UsageError : public Error {
 public:
  using Error::Error;
};

// A file or directory that does not exist (Python raises it as glnet.FileNotFoundError, also a FileNotFoundError).
class FileNotFound : public Error {
 public:
  using Error::Error;
};

// The GPU stopped answering (a wait past GLNET_GPU_TIMEOUT_S) or reset the context: the work in flight is
// lost and the context unusable. Training turns it into a pointer to its last checkpoint.
class GpuFailure : public Error {
 public:
  using Error::Error;
};

// Bytes from a file quoted in a message, made safe for a terminal: every byte outside printable ASCII (a NUL, an escape
// sequence, broken UTF-8) written as \xNN.
std::string printable(const std::string& bytes);
// Messages that tell the user which option to change name it as the front end in use takes it: the commands'
// flags (--weight-decay, --api gles; the default) or the Python package's keyword arguments (weight_decay,
// api="gles"), which its module chooses when it loads. Options are given by their flag names without dashes.
enum class OptionSpelling { flags, keywords };
void setOptionSpelling(OptionSpelling spelling);
OptionSpelling optionSpelling();
std::string optionName(const std::string& option);                             // "--val-fraction" | "val_fraction"
std::string optionSetting(const std::string& option, const std::string& value);  // "--api gl" | "api=\"gl\""
// Work larger than the device takes (a tensor over the storage-block limit): the same work in smaller pieces (a
// smaller batch) may fit, which callers that choose the size try.
class DeviceLimitError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void assertFailed(const char* condition, const std::string& message, const char* file, int line);

}  // namespace glnet

#define GLNET_ASSERT(condition, message)                                        \
  do {                                                                          \
    if (!(condition)) ::glnet::assertFailed(#condition, message, __FILE__, __LINE__); \
  } while (false)
