// Included by every glnet shader after the injected #defines (see engine/gl/Program.cpp).

#ifndef LOCAL_SIZE_X
#define LOCAL_SIZE_X 256
#endif

// The index of this invocation in a 1-D problem dispatched as a 2-D grid of groups, which lets a problem
// exceed GL_MAX_COMPUTE_WORK_GROUP_COUNT (65535 on many devices) along x. A macro, because
// gl_WorkGroupSize exists only after the shader's own layout(local_size_x = ...) declaration.
#define LINEAR_INVOCATION_INDEX (gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x)
