#include "runtime/training/bucket_assignment.h"

#include <algorithm>
#include <map>

namespace ringtorch {

std::vector<std::vector<size_t>> assign_buckets(const std::vector<BucketCandidate>& candidates, size_t first_cap_bytes,
                                                size_t cap_bytes) {
  struct Open {
    std::vector<size_t> members;
    size_t bytes = 0;
    bool first = true;  // the group's first bucket, with the small cap
  };
  std::map<std::string, Open> open;
  std::vector<std::vector<size_t>> buckets;
  for (size_t i = candidates.size(); i-- > 0;) {
    Open& bucket = open[candidates[i].group];
    bucket.members.push_back(i);
    bucket.bytes += candidates[i].bytes;
    if (bucket.bytes >= (bucket.first ? first_cap_bytes : cap_bytes)) {
      buckets.push_back(std::move(bucket.members));
      bucket.members.clear();
      bucket.bytes = 0;
      bucket.first = false;
    }
  }
  // What is left closes in the order of its earliest-arriving gradient.
  std::vector<std::vector<size_t>> rest;
  for (auto& [group, bucket] : open) {
    if (!bucket.members.empty()) rest.push_back(std::move(bucket.members));
  }
  std::sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.front() > b.front(); });
  for (auto& bucket : rest) buckets.push_back(std::move(bucket));
  return buckets;
}

}  // namespace ringtorch
