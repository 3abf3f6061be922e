// A whole MLP for a small batch in one dispatch: normalize the uint8 pixels, run every dense layer with the
// activations in shared memory, write the softmax and the argmax. Small batches are bound by the fixed cost of
// each dispatch (a few µs on a GPU), not by arithmetic.
// The first layer holds most of the weights (401 of 784-128-10's 407 KB), and one group reading them all is
// bound by the load latency of one multiprocessor. So it is split: MLP_SLICES groups per
// image each compute MLP_SLICE_WIDTH of its outputs, and the last of them to finish (counted by an atomic per
// image, after a buffer barrier) reads them back and runs the rest of the network.
// bindings: 0 pixels (uint8, packed four to a uint) read, 1 weights read: the widths (MLP_LAYERS + 1 uints:
//           inputs, each layer's outputs); the first layer as MLP_SLICES blocks [in × MLP_SLICE_WIDTH] (its
//           weights transposed, zero past the last output) and its bias [MLP_SLICES × MLP_SLICE_WIDTH]; each
//           later layer's Wᵀ [in × out] (the invocations of one input read consecutive outputs) and bias [out];
//           2 classes [firstImage + image] (uint) write; 3 probabilities [image × classes] write (with
//           MLP_PROBABILITIES); with MLP_SLICES > 1: 4 the first layer's outputs
//           [image × MLP_SLICES × MLP_SLICE_WIDTH] read-write, 5 arrivals [image] (uint, zero before and after)
// uniforms: 0 mean, 1 inverseStd, 2 firstImage
// defines: MLP_LAYERS, MLP_MAX_WIDTH (the widest of the inputs and every layer's outputs), MLP_SLICES,
//          MLP_SLICE_WIDTH, ACTIVATION (of every layer but the last)
// groups: (MLP_SLICES, images)
#define MLP_INVOCATIONS uint(GLNET_GROUP_SIZE)
// NVIDIA keeps the fixed 16-step loops below rolled (and the loads serial) unless told to unroll them.
#pragma optionNV(unroll all)
layout(local_size_x = GLNET_GROUP_SIZE) in;

layout(std430, binding = 0) readonly buffer Pixels { uint packedPixels[]; };
layout(std430, binding = 1) readonly buffer Weights { float weights[]; };
layout(std430, binding = 2) writeonly buffer Classes { uint classes[]; };
#ifdef MLP_PROBABILITIES
layout(std430, binding = 3) writeonly buffer Probabilities { float probabilities[]; };
#endif
#if MLP_SLICES > 1
// Coherent: written by the other groups of the image, read by the last one.
layout(std430, binding = 4) coherent buffer FirstLayerOutputs { float firstLayerOutputs[]; };
layout(std430, binding = 5) buffer Arrivals { uint arrivals[]; };
shared bool lastToArrive;
#endif
layout(location = 0) uniform float mean;
layout(location = 1) uniform float inverseStd;
layout(location = 2) uniform uint firstImage;

// The widths head the weights (as uint bits) rather than being constants, which the unroll pragma would use
// to unroll every layer's whole sum, or uniforms, which every replay would set again.
uint widths(uint l) { return floatBitsToUint(weights[l]); }
shared float activations[2][MLP_MAX_WIDTH];
shared float partial[GLNET_GROUP_SIZE];
shared float rowMax, rowSum;

// This invocation's share of output j of a layer with K inputs in activations[source] and weights from `base`
// in rows of `stride`: inputs part, part + parts, ... Sixteen weight loads are in flight before any is used,
// because the latency of dependent loads, not bandwidth, bounds a sum this small. (Guarding loads past K
// inside one 16-load loop instead was as fast at batch 1 and 1.7x slower at 64 on the H100.)
float partialSum(uint base, uint stride, uint K, uint source, uint j, uint part, uint parts) {
  vec4 sums = vec4(0.0);
  uint i = part;
  for (; i + 15u * parts < K; i += 16u * parts) {
    float w[16];
    for (uint u = 0u; u < 16u; ++u) w[u] = weights[base + (i + u * parts) * stride + j];
    for (uint u = 0u; u < 16u; ++u) sums[u % 4u] = fma(activations[source][i + u * parts], w[u], sums[u % 4u]);
  }
  for (; i < K; i += parts) sums.x = fma(activations[source][i], weights[base + i * stride + j], sums.x);
  return (sums.x + sums.y) + (sums.z + sums.w);
}

void main() {
  uint slice = gl_WorkGroupID.x, image = gl_WorkGroupID.y, t = gl_LocalInvocationIndex;
  uint inputs = widths(0u);
  for (uint i = t; i < inputs; i += MLP_INVOCATIONS) {
    activations[0][i] = (float(PACKED_BYTE(packedPixels, (firstImage + image) * inputs + i)) / 255.0 - mean) * inverseStd;
  }
  barrier();

  // The first layer: this group's slice of its outputs, `parts` invocations summing each.
  uint K = widths(0u), N = widths(1u), offset = uint(MLP_LAYERS) + 1u;
  uint width = uint(MLP_SLICE_WIDTH), parts = MLP_INVOCATIONS / width, part = t / width;
  partial[t] = part < parts ? partialSum(offset + slice * K * width, width, K, 0u, t % width, part, parts) : 0.0;
  barrier();
  uint j = slice * width + t;
  if (t < width && j < N) {
    float total = weights[offset + uint(MLP_SLICES) * K * width + j];
    for (uint p = 0u; p < parts; ++p) total += partial[p * width + t];
    if (uint(MLP_LAYERS) > 1u) total = activate(total);
#if MLP_SLICES > 1
    firstLayerOutputs[image * uint(MLP_SLICES) * width + j] = total;
#else
    activations[1][j] = total;
#endif
  }
#if MLP_SLICES > 1
  // Each invocation's writes reach the device before the group counts itself in.
  memoryBarrierBuffer();
  barrier();
  if (t == 0u) {
    lastToArrive = atomicAdd(arrivals[image], 1u) == uint(MLP_SLICES) - 1u;
    if (lastToArrive) atomicExchange(arrivals[image], 0u);  // every slice has counted: ready for the next run
  }
  barrier();
  // The other groups of the image are done here (without a return: ESSL allows no barrier() after one in main).
  if (lastToArrive) {
    memoryBarrierBuffer();
    for (uint i = t; i < N; i += MLP_INVOCATIONS) activations[1][i] = firstLayerOutputs[image * uint(MLP_SLICES) * width + i];
  }
  bool runsTheRest = lastToArrive;
#else
  bool runsTheRest = true;
#endif
  if (runsTheRest) {
    barrier();
    offset += uint(MLP_SLICES) * width * (K + 1u);

    uint source = 1u;
    for (uint l = 1u; l < uint(MLP_LAYERS); ++l) {
      K = widths(l);
      N = widths(l + 1u);
      bool last = l + 1u == uint(MLP_LAYERS);
      if (N >= MLP_INVOCATIONS) {
        for (uint o = t; o < N; o += MLP_INVOCATIONS) {
          float sum = weights[offset + K * N + o];
          for (uint i = 0u; i < K; ++i) sum = fma(activations[source][i], weights[offset + i * N + o], sum);
          activations[source ^ 1u][o] = last ? sum : activate(sum);
        }
      } else {
        // Fewer outputs than invocations: `parts` invocations share each output.
        parts = MLP_INVOCATIONS / N;
        part = t / N;
        partial[t] = part < parts ? partialSum(offset, N, K, source, t % N, part, parts) : 0.0;
        barrier();
        if (t < N) {
          float total = weights[offset + K * N + t];
          for (uint p = 0u; p < parts; ++p) total += partial[p * N + t];
          activations[source ^ 1u][t] = last ? total : activate(total);
        }
      }
      barrier();
      offset += K * N + N;
      source ^= 1u;
    }

    uint classCount = widths(uint(MLP_LAYERS));
    if (t == 0u) {
      uint best = 0u;
      for (uint c = 1u; c < classCount; ++c) best = activations[source][c] > activations[source][best] ? c : best;
      classes[firstImage + image] = best;
      float sum = 0.0;
      for (uint c = 0u; c < classCount; ++c) sum += exp(activations[source][c] - activations[source][best]);
      rowMax = activations[source][best];
      rowSum = sum;
    }
#ifdef MLP_PROBABILITIES
    barrier();
    for (uint c = t; c < classCount; c += MLP_INVOCATIONS) {
      probabilities[image * classCount + c] = exp(activations[source][c] - rowMax) / rowSum;
    }
#endif
  }
}
