#include "runtime/comm/chunk_plan.h"

#include <algorithm>

namespace ringtorch {

std::vector<ChunkSpan> plan_chunks(size_t count, size_t element_size, size_t chunk_bytes) {
  const size_t per_chunk = std::max<size_t>(1, chunk_bytes / std::max<size_t>(1, element_size));
  std::vector<ChunkSpan> chunks;
  size_t first = 0;
  do {
    const size_t n = std::min(per_chunk, count - first);
    chunks.push_back({first, n});
    first += n;
  } while (first < count);
  return chunks;
}

}  // namespace ringtorch
