// An ONNX model read as a trainable network (glnet_train --net MODEL.onnx): its nodes become the layers of a network
// description and its initializers those layers' parameters, so that a model exported from PyTorch (or by glnet)
// fine-tunes on the same trainable ops as a described network, and saves, resumes and exports like one.
//
// Read: Conv (square kernels, one stride and padding on every side, any groups), Gemm (PyTorch's Linear),
// BatchNormalization (a training-mode export keeps it; an eval-mode export has folded it into the Conv), Relu, Tanh
// and Sigmoid (fused into the Conv or Gemm they follow), HardSwish, x·Sigmoid(x) (SiLU), Add, Concat along the
// channels, MaxPool, AveragePool, GlobalAveragePool, Flatten, Dropout, Identity, Constant, and a Softmax or LogSoftmax
// that gives the output (the loss takes the logits before it); and, as stretches of nodes (OnnxSequencePatterns.h),
// the layers of vision transformers and BERT-like encoders as PyTorch exports them: nn.MultiheadAttention (with a
// key_padding_mask of ids == pad or none), Linear on [N, S, E], the patches' flatten(2).transpose(1, 2), a learned
// position table, nn.Embedding of the input's int64 or int32 token ids [N, S] and the first position. Any other node
// is refused in one line naming it: such models run (glnet_eval, glnet_run) but do not train.
#pragma once

#include "model/NetDescription.h"
#include "model/Network.h"
#include "formats/Safetensors.h"

#include <optional>
#include <string>

namespace glnet {

struct OnnxNetwork {
  NetDescription description;
  // The parameters by the description's names (conv1.weight, bn1.running_mean, ...): a Conv or Gemm without a bias
  // gets zeros, which then train.
  TensorFile weights;
  // The model's metadata input_mean and input_std, when it has them (glnet's own exports): the normalization its
  // weights were trained with.
  std::optional<InputFormat> input;
  // Layers read from stretches of nodes (OnnxSequencePatterns.h), which checkOnnxNetwork then checks.
  std::size_t stretchLayers = 0;
};

// Throws glnet::Error naming the file and, where one is at fault, the node, its op and what glnet cannot train.
OnnxNetwork readOnnxNetwork(const std::string& path);

// Throws glnet::Error unless `network` (built from readOnnxNetwork(path)) gives the class log-probabilities the model at
// `path` gives: both evaluated in float64 on the CPU at batch 2 on random inputs (images in [−1, 1], or token ids with
// padding at the rows' ends; the model's Dropout keeping all and its BatchNormalization on running statistics, as a
// training-mode export infers), within 1e-4 of the largest. A pattern that matched nodes computing something else is
// refused so, whatever the stretch held. Throws also where glnet cannot run the model as ONNX or its outputs are not
// finite. Costs about two forward passes in float64 (seconds per ViT-B block).
void checkOnnxNetwork(const Network& network, const std::string& path);

// Whether a model holding nodes of the ONNX op `type` fine-tunes: "yes" (readOnnxNetwork reads them as layers), "in
// layers" (only as parts of one it reads whole: SiLU, GELU, the transformer layers of OnnxSequencePatterns.h) or "no";
// the "fine-tunes" column of `glnet_info --ops`.
std::string onnxOpFineTuning(const std::string& type);

}  // namespace glnet
