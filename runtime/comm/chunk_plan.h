// How one large all-reduce is cut into pieces that run one after another. Every rank cuts the
// same way, whatever its device, so that a rank staging a CUDA tensor through host memory (which
// overlaps the copies of one piece with the reduction of another) and a CPU rank issue the same
// sequence of collectives: that is what lets GPU and CPU ranks share one group.
//
// Pure function; thread-safe.
#pragma once

#include <cstddef>
#include <vector>

namespace ringtorch {

struct ChunkSpan {
  size_t first = 0;  // first element
  size_t count = 0;  // elements
};

// Pieces of at most `chunk_bytes` (rounded down to whole elements, at least one element), in
// order, covering [0, count). An empty buffer gives one empty piece, so that every call still
// runs exactly one collective.
std::vector<ChunkSpan> plan_chunks(size_t count, size_t element_size, size_t chunk_bytes);

// The piece size ProcessGroup uses for all-reduce. Large enough that the extra collectives cost
// little on CPU ranks (a 64 MiB float buffer is 4 pieces), small enough that the copy of the
// first piece in and the last piece out (the part of a CUDA tensor's copies that cannot overlap
// the reduction) stays a small share of the whole.
constexpr size_t kAllreduceChunkBytes = size_t{16} << 20;

}  // namespace ringtorch
