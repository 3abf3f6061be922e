// Transformer layers as PyTorch (1.13 and its TorchScript exporter) writes them to ONNX, each a stretch of nodes that
// the reader of trainable networks (OnnxNetwork.cpp) reads as one layer of a description:
//   attention  nn.MultiheadAttention(E, H, batch_first=True) called as self-attention, without a mask or with a
//              key_padding_mask: Transpose, the in-projection MatMul and Add, torch.chunk's three Slices (their starts
//              and ends checked), head Reshapes (to H heads, checked against D from the scale) and Transposes, Q divided
//              by √D, MatMul, Softmax along the last axis, MatMul, Transposes and Reshapes around the out-projection
//              Gemm, and the shape arithmetic feeding the Reshapes
//   A weight added to [N, S, E] trains as a position table even where PyTorch held it as a frozen buffer (ONNX does
//   not tell them apart), and a Linear without a bias gets one of zeros, which trains.
//   linear     nn.Linear on [N, ..., E]: MatMul by a weight [E, outputs], then Add of a bias (either order)
//   tokens     x.flatten(2).transpose(1, 2) of [N, C, H, W]: Reshape to Concat(Shape(x)[0:2], [-1]) or to a constant
//              [0, C, -1] (C the channels of the Conv making x), then Transpose [0, 2, 1]
//   position   x + P for a weight P [1, S, E] or [S, E] and x computed (a vision transformer's position embedding)
//   embedding  nn.Embedding: Gather of a weight [V, E] by ids along its axis 0
//   mask       ids == pad, read only as the key_padding_mask of attentions (whose stretch then holds the exporter's
//              Reshape, Expand, Cast and Where of it, and the scores' Add of it)
//   first      x[:, 0] of [N, S, E]: Gather of the scalar 0 along axis 1
// A stretch is taken only where its nodes are read by nothing outside it but its last; anything else is left to the
// node-by-node reader, which refuses what it cannot train.
#pragma once

#include "formats/OnnxProto.h"
#include "formats/Safetensors.h"
#include "model/NetDescription.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace glnet {

struct OnnxSequenceLayer {
  LayerDescription layer;  // the kind and its fields (outputs, heads); unnamed
  std::string nameHint;    // PyTorch's name of one of its weights ("block1.attn.weight"), whose prefix names the layer
  std::vector<std::string> inputs;  // the tensors the layer reads (an attention's second: its mask)
  const onnx::NodeProto* last = nullptr;           // whose output is the layer's
  std::vector<const onnx::NodeProto*> inside;      // the stretch's other nodes, run by the layer
  std::vector<std::pair<std::string, HostTensor>> weights;  // by suffix (".weight"), in glnet's layouts
};

using OnnxReaders = std::map<std::string, std::vector<const onnx::NodeProto*>>;

// The stretches of `graph` (of the model's `opset`; its readers by tensor, its initializers) that are transformer
// layers, none sharing a node; `output` is the graph's output. `path` names the file in errors reading Constant nodes.
std::vector<OnnxSequenceLayer> findSequenceLayers(const onnx::GraphProto& graph, std::int64_t opset, const OnnxReaders& readers,
                                                  const std::map<std::string, OnnxConstant>& initializers,
                                                  const std::string& output, const std::string& path);

}  // namespace glnet
