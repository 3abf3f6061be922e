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
  std::size_t arenaBytes = 0;
  std::size_t keptBytes = 0;                       // what every computed tensor in its own memory would take
};

// Tensors no op reads (results) and `kept` stay alive to the end; offsets are multiples of `alignment` bytes.
// Greedy by size: each tensor at the lowest offset where it overlaps none alive at the same time.
MemoryPlan planMemory(const Graph& graph, const std::vector<Tensor>& kept, std::size_t alignment);

}  // namespace glnet
