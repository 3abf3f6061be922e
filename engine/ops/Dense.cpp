#include "ops/Dense.h"

namespace glnet {
namespace {
constexpr std::uint32_t tile = 64;  // TILE in ForwardPass.glsl
}

DenseOp::DenseOp(Activation activation)
    : activation_(activation),
      program_(Program::compute("ForwardPass.glsl", {{"ACTIVATION", std::to_string(static_cast<int>(activation))}})) {}

Dispatch DenseOp::forward(const Buffer& x, const Buffer& weight, const Buffer& bias, const Buffer& y,
                          const DenseShape& shape) const {
  Dispatch dispatch;
  dispatch.program = &program_;
  dispatch.label = std::string("dense ") + activationName(activation_);
  dispatch.buffers = {{0, &x, Access::read}, {1, &weight, Access::read}, {2, &bias, Access::read}, {3, &y, Access::write}};
  dispatch.uniforms = {Uniform::u32(0, shape.rows), Uniform::u32(1, shape.outputs), Uniform::u32(2, shape.inputs)};
  dispatch.groups = {(shape.outputs + tile - 1) / tile, (shape.rows + tile - 1) / tile, 1};
  return dispatch;
}

}  // namespace glnet
