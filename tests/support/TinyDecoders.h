// The tiny Hugging Face decoder folders that tests/reference/tiny_decoders.py writes (gpt2, llama sharded, qwen2 in
// BF16), with their float64 outputs. ctest's decoder.tiny_models writes them into the build tree before the suites run;
// GLNET_TINY_DECODERS names another folder of them (the hardening tree reads the plain build's).
#pragma once

#include "base/check.h"

#include <cstdlib>
#include <filesystem>
#include <string>

namespace glnet::test {

inline std::string tinyDecoder(const std::string& model) {
  const char* variable = std::getenv("GLNET_TINY_DECODERS");
  const std::filesystem::path root = variable && *variable ? variable : GLNET_TINY_DECODERS_DIR;
  const std::filesystem::path folder = root / model;
  if (!std::filesystem::exists(folder / "config.json")) {
    throw Error(folder.string() + " does not exist: run `ctest -R decoder.tiny_models` (or /usr/bin/python3 "
                "tests/reference/tiny_decoders.py " + root.string() + ") first");
  }
  return folder.string();
}

}  // namespace glnet::test
