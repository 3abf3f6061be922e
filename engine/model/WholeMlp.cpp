#include "model/WholeMlp.h"

#include "base/check.h"

#include <algorithm>
#include <cstring>

namespace glnet {
namespace {

// Every width the shader keeps in shared memory: the inputs and each layer's outputs.
std::size_t widestActivation(const Network& network) {
  std::size_t widest = network.inputs();
  for (const LayerSpec& layer : network.layers) widest = std::max<std::size_t>(widest, layer.outputs);
  return widest;
}

// Outputs of the first layer per group. Narrow slices leave each invocation few weight loads (16 is one batch
// in flight, see partialSum in the shader); wide ones keep the groups few where the batch alone makes
// `concurrentGroups`.
std::size_t firstLayerSliceWidth(const Network& network, const Limits& limits, std::size_t batch, std::size_t concurrentGroups) {
  const std::size_t invocations = static_cast<std::size_t>(limits.groupSize());
  const std::size_t outputs = network.layers.front().outputs;
  const std::size_t partsNeeded = (network.inputs() + 15) / 16;
  std::size_t narrowest = 1;
  while (narrowest * 2 <= invocations && invocations / (narrowest * 2) >= partsNeeded) narrowest *= 2;
  const std::size_t mostSlices = (outputs + narrowest - 1) / narrowest;
  const std::size_t fewestSlices = (outputs + invocations - 1) / invocations;  // a slice fits in one group
  const std::size_t slices = std::max(fewestSlices, std::min(mostSlices, (concurrentGroups + batch - 1) / batch));
  return (outputs + slices - 1) / slices;
}

}  // namespace

std::size_t WholeMlpOp::concurrentGroups(const Context& context) { return context.device().software ? 1 : 2048; }

bool WholeMlpOp::fits(const Network& network, std::size_t batch, const Context& context) {
  const Limits& limits = context.limits();
  // One mean and deviation for every input: an MLP's features have no channels to scale apart.
  if (batch == 0 || batch > largestBatch || network.layers.empty() || network.input.channels() != 1) return false;
  for (const LayerSpec& layer : network.layers) {
    if (layer.kind != LayerSpec::Kind::dense) return false;
  }
  // The activations, one partial sum per invocation of the group, the softmax's maximum and sum, and the
  // last-to-arrive flag.
  const std::size_t invocations = static_cast<std::size_t>(limits.groupSize());
  const std::size_t sharedBytes = (2 * widestActivation(network) + invocations + 3) * sizeof(float);
  const std::size_t width = firstLayerSliceWidth(network, limits, batch, concurrentGroups(context));
  const std::size_t slices = (network.layers.front().outputs + width - 1) / width;
  return sharedBytes <= static_cast<std::size_t>(limits.maxSharedMemoryBytes) &&
         slices <= static_cast<std::size_t>(limits.maxWorkGroupCount[0]);
}

WholeMlpOp::WholeMlpOp(ProgramCache& programs, const Network& network, const Limits& limits, std::size_t batch,
                       std::size_t concurrentGroups)
    : batch_(batch),
      sliceWidth_(firstLayerSliceWidth(network, limits, batch, concurrentGroups)),
      slices_((network.layers.front().outputs + sliceWidth_ - 1) / sliceWidth_),
      input_(network.input),
      programs_(&programs) {
  // The widths head the buffer as uint bits (the shader reads them with floatBitsToUint).
  std::vector<float> packed(network.layers.size() + 1);
  const auto putWidth = [&packed](std::size_t at, std::uint32_t width) { std::memcpy(&packed[at], &width, sizeof width); };
  putWidth(0, static_cast<std::uint32_t>(network.inputs()));
  std::size_t inputs = network.inputs();
  for (std::size_t l = 0; l < network.layers.size(); ++l) {
    const LayerSpec& layer = network.layers[l];
    putWidth(l + 1, layer.outputs);
    GLNET_ASSERT(layer.kind == LayerSpec::Kind::dense, "the one-dispatch MLP takes dense layers only");
    const std::vector<float>& weight = network.parameters.at(layer.name + ".weight").values;  // [out × in]
    const std::vector<float>& bias = network.parameters.at(layer.name + ".bias").values;
    const std::size_t outputs = layer.outputs, first = packed.size();
    if (l == 0) {
      // Slice s holds outputs [s × width, (s + 1) × width) as [in × width], zero past the last output.
      const std::size_t padded = slices_ * sliceWidth_;
      packed.resize(first + inputs * padded + padded, 0.0f);
      for (std::size_t o = 0; o < outputs; ++o) {
        const std::size_t block = first + (o / sliceWidth_) * inputs * sliceWidth_ + o % sliceWidth_;
        for (std::size_t i = 0; i < inputs; ++i) packed[block + i * sliceWidth_] = weight[o * inputs + i];
      }
      std::copy(bias.begin(), bias.end(), packed.begin() + static_cast<std::ptrdiff_t>(first + inputs * padded));
    } else {
      packed.resize(first + inputs * outputs);
      for (std::size_t o = 0; o < outputs; ++o) {
        for (std::size_t i = 0; i < inputs; ++i) packed[first + i * outputs + o] = weight[o * inputs + i];
      }
      packed.insert(packed.end(), bias.begin(), bias.end());
    }
    inputs = outputs;
  }
  weights_ = Buffer::of(packed);
  if (slices_ > 1) {
    firstLayerOutputs_ = Buffer(batch * slices_ * sliceWidth_ * sizeof(float));
    arrivals_ = Buffer::of(std::vector<std::uint32_t>(batch, 0));
  }
  defines_ = {{"MLP_LAYERS", std::to_string(network.layers.size())},
              {"MLP_MAX_WIDTH", std::to_string(widestActivation(network))},
              {"MLP_SLICES", std::to_string(slices_)},
              {"MLP_SLICE_WIDTH", std::to_string(sliceWidth_)},
              kindDefine(network.activation)};
}

Dispatch WholeMlpOp::operator()(const BufferView& pixels, const BufferView& classes, const BufferView* probabilities,
                                std::uint32_t batch, const Uniform& first) const {
  std::vector<ShaderDefine> defines = defines_;
  if (probabilities) defines.push_back({"MLP_PROBABILITIES", "1"});
  Dispatch dispatch;
  dispatch.program = &programs_->get("WholeMlp.glsl", defines);
  dispatch.label = "whole MLP";
  dispatch.buffers = {{0, pixels, Access::read}, {1, weights_, Access::read}, {2, classes, Access::write}};
  if (probabilities) dispatch.buffers.push_back({3, *probabilities, Access::write});
  if (slices_ > 1) {
    dispatch.buffers.push_back({4, firstLayerOutputs_, Access::readWrite});
    dispatch.buffers.push_back({5, arrivals_, Access::readWrite});
  }
  dispatch.uniforms = {Uniform::f32(0, input_.mean[0]), Uniform::f32(1, 1.0f / input_.std[0]), first};
  GLNET_ASSERT(batch <= batch_, "a one-dispatch MLP run larger than the batch its buffers hold");
  dispatch.groups = {static_cast<std::uint32_t>(slices_), batch, 1};
  return dispatch;
}

}  // namespace glnet
