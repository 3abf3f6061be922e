// The modes of the shaders that hold several kernels, one list each: a row X(cppName, GLSL_SUFFIX, "printable name");
// the shader compares its define with the names (`#if CONV_MODE == CONV_MODE_FORWARD`), see numbers/KindList.h.
// Kept together because each serves one shader and one binding.
#pragma once

#include "numbers/KindList.h"

namespace glnet {

// shaders/Softmax.glsl (ops/Softmax.cpp).
#define GLNET_SOFTMAX_MODES(X)                                             \
  X(softmax, SOFTMAX, "softmax")                                           \
  X(argmax, ARGMAX, "argmax")                                              \
  X(crossEntropy, CROSS_ENTROPY, "cross-entropy")                          \
  X(crossEntropyGradient, CROSS_ENTROPY_GRADIENT, "cross-entropy gradient") \
  X(correct, CORRECT, "correct")
GLNET_KIND_LIST(SoftmaxMode, GLNET_SOFTMAX_MODES, "SOFTMAX_MODE");

// shaders/NextToken.glsl (ops/NextToken.cpp): the next token of each row of logits.
#define GLNET_NEXT_TOKEN_MODES(X)                          \
  X(argmaxBlocks, ARGMAX_BLOCKS, "argmax of blocks")       \
  X(argmaxFinal, ARGMAX_FINAL, "argmax of block maxima")   \
  X(sample, SAMPLE, "sample")
GLNET_KIND_LIST(NextTokenMode, GLNET_NEXT_TOKEN_MODES, "NEXT_TOKEN_MODE");

// shaders/Conv2D.glsl (ops/Conv.cpp).
#define GLNET_CONV_MODES(X)                                                          \
  X(forward, FORWARD, "forward")                                                     \
  X(inputGradient, INPUT_GRADIENT, "dX")                                             \
  X(weightGradient, WEIGHT_GRADIENT, "dW")                                           \
  X(biasGradient, BIAS_GRADIENT, "db")                                               \
  X(transposeWeights, TRANSPOSE_WEIGHTS, "weights transposed")                       \
  X(weightsForInputGradient, WEIGHTS_FOR_INPUT_GRADIENT, "weights rearranged for dX") \
  X(outputGradient, OUTPUT_GRADIENT, "dZ")
GLNET_KIND_LIST(ConvMode, GLNET_CONV_MODES, "CONV_MODE");

// shaders/Winograd.glsl (ops/Winograd.cpp).
#define GLNET_WINOGRAD_MODES(X) \
  X(weights, WEIGHTS, "weights") \
  X(input, INPUT, "input")       \
  X(gemms, GEMMS, "GEMMs")       \
  X(output, OUTPUT, "output")
GLNET_KIND_LIST(WinogradMode, GLNET_WINOGRAD_MODES, "WINOGRAD_MODE");

// shaders/BatchNorm.glsl (graph/BatchNormOps.cpp).
#define GLNET_BATCH_NORM_MODES(X)                                   \
  X(forwardPartials, FORWARD_PARTIALS, "forward partials")          \
  X(forward, FORWARD, "forward")                                    \
  X(inference, INFERENCE, "inference")                              \
  X(backwardPartials, BACKWARD_PARTIALS, "backward partials")       \
  X(backwardTotals, BACKWARD_TOTALS, "backward totals")             \
  X(backward, BACKWARD, "backward")
GLNET_KIND_LIST(BatchNormMode, GLNET_BATCH_NORM_MODES, "BN_MODE");

// shaders/Gather.glsl (ops/Optimizer.cpp's GatherOp).
#define GLNET_GATHER_MODES(X)   \
  X(images, IMAGES, "images")   \
  X(labels, LABELS, "labels")   \
  X(augmented, AUGMENTED, "augmented images") \
  X(tokens, TOKENS, "token ids")
GLNET_KIND_LIST(GatherMode, GLNET_GATHER_MODES, "GATHER_MODE");

// shaders/Loss.glsl (ops/Elementwise.cpp's MeanSquaredErrorOp).
#define GLNET_LOSS_MODES(X) \
  X(loss, LOSS, "mse")      \
  X(gradient, GRADIENT, "mse gradient")
GLNET_KIND_LIST(LossMode, GLNET_LOSS_MODES, "LOSS_MODE");

// shaders/MaxPool.glsl (ops/Conv.cpp's MaxPoolOp).
#define GLNET_MAX_POOL_MODES(X) \
  X(forward, FORWARD, "forward") \
  X(backward, BACKWARD, "backward")
GLNET_KIND_LIST(MaxPoolMode, GLNET_MAX_POOL_MODES, "POOL_MODE");

// shaders/Pooling.glsl (graph/WindowOps.cpp).
#define GLNET_POOL_KINDS(X) \
  X(max, MAX, "max pool")   \
  X(average, AVERAGE, "average pool")
GLNET_KIND_LIST(PoolKind, GLNET_POOL_KINDS, "POOL_KIND");

// shaders/StridedCopy.glsl (ops/StridedCopy.cpp, graph/LayoutOps.cpp).
#define GLNET_COPY_MODES(X)     \
  X(copy, COPY, "copy")           \
  X(fill, FILL, "fill")           \
  X(concat, CONCAT, "concat")     \
  X(gather, GATHER, "gather")     \
  X(scatter, SCATTER, "scatter")  \
  X(trilu, TRILU, "trilu")
GLNET_KIND_LIST(CopyMode, GLNET_COPY_MODES, "COPY_MODE");

// shaders/GradientCompression.glsl (ops/GradientCompression.cpp).
#define GLNET_COMPRESSION_MODES(X)  \
  X(compress, COMPRESS, "compress") \
  X(expand, EXPAND, "expand")
GLNET_KIND_LIST(CompressionMode, GLNET_COMPRESSION_MODES, "COMPRESSION_MODE");

// shaders/BackwardPass.glsl (ops/Dense.cpp).
#define GLNET_BACKWARD_MODES(X)                   \
  X(inputGradient, INPUT_GRADIENT, "dX")          \
  X(weightGradient, WEIGHT_GRADIENT, "dW")        \
  X(biasGradient, BIAS_GRADIENT, "db")
GLNET_KIND_LIST(BackwardMode, GLNET_BACKWARD_MODES, "BACKWARD_MODE");

// shaders/GroupedConvGradient.glsl (graph/WindowOps.cpp).
#define GLNET_GROUPED_CONV_GRADIENTS(X)      \
  X(inputGradient, INPUT_GRADIENT, " dX")    \
  X(weightGradient, WEIGHT_GRADIENT, " dW")  \
  X(biasGradient, BIAS_GRADIENT, " db")
GLNET_KIND_LIST(GroupedConvGradient, GLNET_GROUPED_CONV_GRADIENTS, "GRADIENT_MODE");

// shaders/Gemv.glsl (ops/Decoding.cpp): what the decode step's dense layer does to x as it reads it.
#define GLNET_GEMV_INPUTS(X)                        \
  X(plain, PLAIN, "plain")                          \
  X(layerNorm, LAYER_NORM, "layer norm")            \
  X(rmsNorm, RMS_NORM, "rms norm")                  \
  X(swiGlu, SWIGLU, "swiglu")
GLNET_KIND_LIST(GemvInput, GLNET_GEMV_INPUTS, "INPUT");

// How a decode step's weights are stored (shaders/Gemv.glsl): float32, or two halves or bfloat16s packed per 32 bits
// (the element of even index in the low half), widened to float32 as they are read.
#define GLNET_WEIGHT_STORAGES(X) \
  X(fp32, F32, "fp32")           \
  X(fp16, F16, "fp16")           \
  X(bf16, BF16, "bf16")
GLNET_KIND_LIST(WeightStorage, GLNET_WEIGHT_STORAGES, "WEIGHTS");

}  // namespace glnet
