#include "gl/Limits.h"

#include "base/check.h"
#include "gl/GlCheck.h"

#include <glad/gl.h>

#include <algorithm>
#include <string>

namespace glnet {
namespace {

Limits& currentLimitsSlot() {
  static Limits limits;
  return limits;
}

// The storage blocks of glnet's largest kernels (BackwardPass.glsl, the dense weight gradient), rounded up.
constexpr int requiredStorageBlocks = 8;

}  // namespace

void setCurrentLimits(const Limits& limits) { currentLimitsSlot() = limits; }

Limits queryLimits(Api api) {
  Limits limits;
  for (GLuint axis = 0; axis < 3; ++axis) {
    glGetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_SIZE, axis, &limits.maxWorkGroupSize[axis]);
    glGetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_COUNT, axis, &limits.maxWorkGroupCount[axis]);
  }
  glGetIntegerv(GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS, &limits.maxWorkGroupInvocations);
  GLint value = 0;
  glGetIntegerv(GL_MAX_COMPUTE_SHARED_MEMORY_SIZE, &value);
  limits.maxSharedMemoryBytes = value;
  GLint64 blockSize = 0;
  glGetInteger64v(GL_MAX_SHADER_STORAGE_BLOCK_SIZE, &blockSize);
  limits.maxStorageBlockBytes = blockSize;
  glGetIntegerv(GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS, &limits.maxComputeStorageBlocks);
  glGetIntegerv(GL_MAX_SHADER_STORAGE_BUFFER_BINDINGS, &limits.maxStorageBufferBindings);
  glGetIntegerv(GL_SHADER_STORAGE_BUFFER_OFFSET_ALIGNMENT, &limits.storageBufferOffsetAlignment);
  throwIfGlError("querying device limits", __FILE__, __LINE__);
  // ES has GPU timestamps only through EXT_disjoint_timer_query, which some drivers list but refuse.
  if (api == Api::gl || GLAD_GL_EXT_disjoint_timer_query) {
    glGetQueryiv(GL_TIMESTAMP, GL_QUERY_COUNTER_BITS, &limits.timestampBits);
    if (glGetError() != GL_NO_ERROR) limits.timestampBits = 0;
  }
  limits.persistentMaps = api == Api::gles ? GLAD_GL_EXT_buffer_storage != 0 : GLAD_GL_ARB_buffer_storage != 0;
  limits.parallelCompile = (GLAD_GL_KHR_parallel_shader_compile != 0 || GLAD_GL_ARB_parallel_shader_compile != 0) &&
                           glMaxShaderCompilerThreadsKHR != nullptr;
  if (glGetGraphicsResetStatus) {
    GLint strategy = 0;
    glGetIntegerv(GL_RESET_NOTIFICATION_STRATEGY, &strategy);
    limits.resetNotification = glGetError() == GL_NO_ERROR && strategy == GL_LOSE_CONTEXT_ON_RESET;
  }
  return limits;
}

Limits minimumEsLimits(Limits limits) {
  for (int& size : limits.maxWorkGroupSize) size = std::min(size, 128);
  limits.maxWorkGroupSize[2] = std::min(limits.maxWorkGroupSize[2], 64);
  for (int& count : limits.maxWorkGroupCount) count = std::min(count, 65535);
  limits.maxWorkGroupInvocations = std::min(limits.maxWorkGroupInvocations, 128);
  limits.maxSharedMemoryBytes = std::min<std::int64_t>(limits.maxSharedMemoryBytes, 16384);
  limits.maxStorageBlockBytes = std::min<std::int64_t>(limits.maxStorageBlockBytes, std::int64_t{1} << 27);
  // ES guarantees 4 storage blocks per compute shader; glnet's dense and convolution kernels bind up to 7,
  // so it keeps 8 here (what ES GPUs commonly offer) and any kernel needing more fails by name.
  limits.maxComputeStorageBlocks = std::min(limits.maxComputeStorageBlocks, requiredStorageBlocks);
  limits.maxStorageBufferBindings = std::min(limits.maxStorageBufferBindings, requiredStorageBlocks);
  limits.timestampBits = 0;
  limits.persistentMaps = false;
  limits.parallelCompile = false;
  return limits;
}

const Limits& currentLimits() { return currentLimitsSlot(); }

void throwIfContextLost() {
  if (!currentLimits().resetNotification) return;
  const GLenum status = glGetGraphicsResetStatus();
  if (status == GL_NO_ERROR) return;
  const char* cause = status == GL_GUILTY_CONTEXT_RESET   ? "caused by glnet's own work"
                      : status == GL_INNOCENT_CONTEXT_RESET ? "caused by another program"
                                                            : "cause unknown";
  throw GpuFailure(std::string("the GPU was reset and glnet's context lost (") + cause +
                   "); the work in flight is gone: run the command again");
}

int Limits::groupSize() const {
  if (maxWorkGroupInvocations <= 0) return 256;
  int size = 256;
  while (size > 1 && (size > maxWorkGroupInvocations || size > maxWorkGroupSize[0])) size /= 2;
  return size;
}

}  // namespace glnet
