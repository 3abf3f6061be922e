// A glnet network written as an ONNX model (opset 17, the batch symbolic, the weights as initializers, batch
// normalization with its running statistics), so that ONNX Runtime, PyTorch's tooling and glnet's own importer run
// what glnet_train trained. The input is "images" [batch, ...inputShape] fed (x/255 − input_mean)/input_std, as
// metadata_props say; the output "logits" [batch, classes].
#pragma once

#include "model/Network.h"

#include <string>

namespace glnet {

// Written atomically; throws glnet::Error naming `path`.
void writeOnnx(const Network& network, const std::string& path);

}  // namespace glnet
