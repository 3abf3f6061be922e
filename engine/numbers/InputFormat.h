// The pixel format that the normalizing shaders and their float64 reference both read.
#pragma once

#include <cstddef>
#include <vector>

namespace glnet {

// How raw uint8 pixels become the first layer's input: (x/255 − mean)/std, with one mean and deviation for all of an
// image's values, or one per channel of [C, H, W] images (torchvision's Normalize((r, g, b), (r, g, b))).
struct InputFormat {
  std::vector<float> mean{0.0f}, std{1.0f};
  std::size_t channels() const { return mean.size(); }
};

}  // namespace glnet
