// Training checkpoints as glnet_train --resume reads them: the run's settings, then the model and the
// optimizer state validated against it, for the architecture and optimizer the file's metadata names.
#include "FuzzInput.h"
#include "base/check.h"
#include "train/Trainer.h"
#include "ops/Optimizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = glnet::fuzz::inputFile(data, size, ".checkpoint.safetensors");
  try {
    glnet::Checkpoint::readSettings(path);
    const glnet::TensorFile file = glnet::readSafetensors(path);
    const auto architecture = file.metadata.find("architecture");
    const auto optimizer = file.metadata.find("optimizer");
    if (architecture == file.metadata.end() || optimizer == file.metadata.end()) return 0;
    glnet::Checkpoint::load(path, architecture->second, glnet::parseOptimizer(optimizer->second));
  } catch (const glnet::Error&) {
  }
  return 0;
}
