#include "runtime/comm/piece_plan.h"

#include <algorithm>

namespace ringtorch {

std::vector<PieceSpan> plan_pieces(size_t count, size_t element_size, size_t piece_bytes) {
  const size_t per_piece = std::max<size_t>(1, piece_bytes / std::max<size_t>(1, element_size));
  std::vector<PieceSpan> pieces;
  size_t first = 0;
  do {
    const size_t n = std::min(per_piece, count - first);
    pieces.push_back({first, n});
    first += n;
  } while (first < count);
  return pieces;
}

}  // namespace ringtorch
