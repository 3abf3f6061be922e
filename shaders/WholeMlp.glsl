// A whole MLP for a small batch in one dispatch: one group per image normalizes its uint8 pixels, runs every
// dense layer with the activations in shared memory, and writes the softmax and the argmax. Small batches
// are bound by the fixed cost of each dispatch (a few µs on a GPU), not by arithmetic.
// bindings: 0 pixels (uint8, packed four to a uint) read, 1 weights read: the widths (MLP_LAYERS + 1 uints:
//           inputs, each layer's outputs), then per layer Wᵀ [in × out] (so that the invocations of one input
//           read consecutive outputs) and the bias [out]; 2 classes [firstImage + image]
//           (uint) write; 3 probabilities [image × classes] write (with MLP_PROBABILITIES)
// uniforms: 0 mean, 1 inverseStd, 2 firstImage
// defines: MLP_LAYERS, MLP_MAX_WIDTH
//          (the widest of them but the last), ACTIVATION (of every layer but the last)
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
layout(location = 0) uniform float mean;
layout(location = 1) uniform float inverseStd;
layout(location = 2) uniform uint firstImage;

// The widths head the weights (as uint bits) rather than being constants, which the unroll pragma would use
// to unroll every layer's whole sum, or uniforms, which every replay would set again.
uint widths(uint l) { return floatBitsToUint(weights[l]); }
shared float activations[2][MLP_MAX_WIDTH];
shared float partial[GLNET_GROUP_SIZE];
shared float rowMax, rowSum;

void main() {
  uint image = gl_WorkGroupID.x, t = gl_LocalInvocationIndex;
  uint inputs = widths(0u);
  for (uint i = t; i < inputs; i += MLP_INVOCATIONS) {
    activations[0][i] = (float(PACKED_BYTE(packedPixels, (firstImage + image) * inputs + i)) / 255.0 - mean) * inverseStd;
  }
  barrier();

  uint offset = uint(MLP_LAYERS) + 1u, source = 0u;
  for (uint l = 0u; l < uint(MLP_LAYERS); ++l) {
    uint K = widths(l), N = widths(l + 1u);
    bool last = l + 1u == uint(MLP_LAYERS);
    if (N >= MLP_INVOCATIONS) {
      for (uint j = t; j < N; j += MLP_INVOCATIONS) {
        float sum = weights[offset + K * N + j];
        for (uint i = 0u; i < K; ++i) sum = fma(activations[source][i], weights[offset + i * N + j], sum);
        activations[source ^ 1u][j] = last ? sum : activate(sum);
      }
    } else {
      // Fewer outputs than invocations: `parts` invocations share each output, each summing every parts-th input.
      uint parts = MLP_INVOCATIONS / N, j = t % N, part = t / N;
      // Sixteen weight loads in flight per invocation before any is used: one group runs on one
      // multiprocessor, so the latency of dependent loads, not bandwidth, bounds the sum.
      vec4 sums = vec4(0.0);
      if (part < parts) {
        uint i = part;
        for (; i + 15u * parts < K; i += 16u * parts) {
          float w[16];
          for (uint u = 0u; u < 16u; ++u) w[u] = weights[offset + (i + u * parts) * N + j];
          for (uint u = 0u; u < 16u; ++u) sums[u % 4u] = fma(activations[source][i + u * parts], w[u], sums[u % 4u]);
        }
        for (; i < K; i += parts) sums.x = fma(activations[source][i], weights[offset + i * N + j], sums.x);
      }
      partial[t] = (sums.x + sums.y) + (sums.z + sums.w);
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
