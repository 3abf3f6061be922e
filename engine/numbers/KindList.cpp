#include "numbers/KindList.h"

#include "numbers/Activation.h"
#include "numbers/AxisKinds.h"
#include "numbers/BinaryKinds.h"
#include "numbers/ElementwiseKinds.h"
#include "numbers/OptimizerKinds.h"
#include "numbers/PointwiseKinds.h"
#include "numbers/ShaderModes.h"

namespace glnet {
namespace {

template <class Kind>
void appendDefines(std::string& text) {
  for (std::size_t i = 0; i < KindList<Kind>::count; ++i)
    text += std::string("#define ") + KindList<Kind>::define + '_' + KindList<Kind>::glsl[i] + ' ' + std::to_string(i) + '\n';
}

}  // namespace

const std::string& allKindDefines() {
  static const std::string text = [] {
    std::string lines;
    appendDefines<Activation>(lines);
    appendDefines<AxisKind>(lines);
    appendDefines<BinaryKind>(lines);
    appendDefines<ElementwiseKind>(lines);
    appendDefines<OptimizerKind>(lines);
    appendDefines<PointwiseKind>(lines);
    appendDefines<SoftmaxMode>(lines);
    appendDefines<NextTokenMode>(lines);
    appendDefines<ConvMode>(lines);
    appendDefines<WinogradMode>(lines);
    appendDefines<BatchNormMode>(lines);
    appendDefines<GatherMode>(lines);
    appendDefines<LossMode>(lines);
    appendDefines<MaxPoolMode>(lines);
    appendDefines<PoolKind>(lines);
    appendDefines<CopyMode>(lines);
    appendDefines<CompressionMode>(lines);
    appendDefines<BackwardMode>(lines);
    appendDefines<GroupedConvGradient>(lines);
    appendDefines<GemvInput>(lines);
    appendDefines<WeightStorage>(lines);
    return lines;
  }();
  return text;
}

}  // namespace glnet
