// Which gradients travel together: DistributedDataParallel's bucket plan, as PyTorch's
// Reducer does it. Parameters are taken in reverse registration order (backward produces the
// last layers' gradients first), grouped by dtype and device; a bucket closes once it holds at
// least its cap: the first one of each group `first_cap_bytes` (small, so communication starts
// early in backward), the later ones `cap_bytes`.
//
// Pure function; no LibTorch.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ringtorch {

struct BucketCandidate {
  size_t bytes = 0;
  std::string group;  // tensors in one bucket share it: "float32 on cpu"
};

// Returns buckets in the order they become ready (first: the last parameters), each a list of
// indices into `candidates` in the order their gradients arrive.
std::vector<std::vector<size_t>> assign_buckets(const std::vector<BucketCandidate>& candidates, size_t first_cap_bytes,
                                                size_t cap_bytes);

}  // namespace ringtorch
