// What a device allows compute work to use, queried once per context; every choice of kernel shape follows
// these, not one vendor's values.
#pragma once

#include "gl/Api.h"

#include <array>
#include <cstdint>

namespace glnet {

struct Limits {
  std::array<int, 3> maxWorkGroupSize{};
  std::array<int, 3> maxWorkGroupCount{};
  int maxWorkGroupInvocations = 0;
  std::int64_t maxSharedMemoryBytes = 0;
  std::int64_t maxStorageBlockBytes = 0;
  int maxComputeStorageBlocks = 0;
  int maxStorageBufferBindings = 0;
  int storageBufferOffsetAlignment = 0;
  int timestampBits = 0;  // 0: no GPU timer queries (ES without EXT_disjoint_timer_query); wall times instead
  bool persistentMaps = false;  // ARB_buffer_storage (GL) or EXT_buffer_storage (ES)
  bool resetNotification = false;  // a robust context: a GPU reset is reported instead of hanging or crashing
  // KHR or ARB_parallel_shader_compile: programs compile on the driver's threads, and whether one is done can be asked
  // without waiting for it (Program::ready).
  bool parallelCompile = false;

  // The invocations of the engine's one-dimensional groups (GLNET_GROUP_SIZE in the shaders): 256, or the
  // largest power of two the device allows below it; 256 while no device is known.
  int groupSize() const;
};

// The limits of the current context, queried from it (a context must be current).
Limits queryLimits(Api api);

// `limits` cut to what every OpenGL ES 3.1 device offers (ES 3.1 specification, table 20.45), with none of
// the optional extensions (ContextOptions::minimumDevice).
Limits minimumEsLimits(Limits limits);

// The limits of the context glnet made current last (set by Context), for code that picks kernel shapes.
const Limits& currentLimits();
void setCurrentLimits(const Limits& limits);

// Throws glnet::GpuFailure when the current context was lost to a GPU reset (robust contexts only; others
// cannot tell). Called after every wait on the GPU.
void throwIfContextLost();

}  // namespace glnet
