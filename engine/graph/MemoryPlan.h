// Where an inference graph's computed tensors live in one arena: a tensor's bytes serve another once the last op
// reading it (through any view) has run. Host-side planning only; CompiledGraph allocates and binds the arena.
#pragma once

#include "graph/Graph.h"

#include <optional>
#include <vector>

namespace glnet {

struct MemoryPlan {
  std::vector<int> storage;                        // per tensor: the tensor whose memory it uses (itself, or a view's source)
  std::vector<std::optional<std::size_t>> offset;  // per tensor owning computed memory: its byte offset in the arena
  std::vector<std::optional<std::size_t>> scratchOffset;  // per op node given scratch: its byte offset in the arena
  std::vector<bool> joined;  // per op node: a concatenation whose inputs lie in its output, so that it has nothing to do
  std::size_t inPlaceOutputs = 0;                  // outputs placed in an input's memory (Op::inPlaceInputs)
  std::size_t arenaBytes = 0;
  std::size_t resultBytes = 0;                     // the results and kept tensors, which stay out of the arena
  std::size_t keptBytes = 0;                       // what every computed tensor in its own memory would take
};

// Tensors no op reads (results) and `kept` get no offset: they keep memory of their own, which the host reads (NVIDIA's
// driver was seen to spend 80 ms reading 256 KB out of a 1.6 GB buffer). Offsets are multiples of `alignment` bytes;
// greedy by size, each tensor at the lowest offset where it overlaps none alive at the same time. `scratch` (per op
// node, bytes or 0): memory an op uses only while it runs (Winograd's transformed tiles), placed the same way.
// A concatenation with only 1s before its axis (Op::joinedAxis) whose output is in the arena gets its inputs placed
// inside that output, each at its place there, when every input is a computed tensor of its own that no other
// such concatenation takes and each part starts at a multiple of `alignment`; it is then `joined`. An op's output takes
// the memory of an input it may overwrite (Op::inPlaceInputs) where that input is computed, of its size, read by nothing
// later and by no other input of the op (a residual add, a GEMM's residual, an activation), offset for offset, unless
// the plan without outputs in place has the smaller arena.
MemoryPlan planMemory(const Graph& graph, const std::vector<Tensor>& kept, std::size_t alignment,
                      const std::vector<std::size_t>& scratch = {});

// Whether an inference graph prepares `node` once (Op::preparedInputs: its inputs 1 to that count are parameters).
bool preparesOnce(const Graph& graph, const OpNode& node);
// Per op node of an inference graph: the memory its forward pass uses only while it runs (Op::preparedScratchBytes of
// the ops that prepare, and with `workspaces` Op::inferenceWorkspaceBytes of the others), or 0: planMemory's `scratch`. In the
// arena, an op's workspace costs memory only beside the tensors alive when it runs, not on top of the arena's peak.
// Some workspaces depend on the device's limits (a fused attention's blocks): `workspaces` wants a current context.
std::vector<std::size_t> inferenceScratchBytes(const Graph& graph, bool workspaces);

}  // namespace glnet
