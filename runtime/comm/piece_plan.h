// How one large all-reduce is cut into pieces that run one after another. Every rank cuts the
// same way, whatever its device, so that a rank staging a CUDA tensor through host memory (which
// overlaps the copies of one piece with the reduction of another) and a CPU rank issue the same
// sequence of collectives: that is what lets GPU and CPU ranks share one group.
//
// Pure function; thread-safe.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/comm/sizes.h"

namespace ringtorch {

struct PieceSpan {
  size_t first = 0;  // first element
  size_t count = 0;  // elements
};

// Pieces of at most `piece_bytes` (rounded down to whole elements, at least one element), in
// order, covering [0, count). An empty buffer gives one empty piece, so that every call still
// runs exactly one collective.
std::vector<PieceSpan> plan_pieces(size_t count, size_t element_size, size_t piece_bytes);

}  // namespace ringtorch
