// DistributedSampler: which dataset indices rank `rank` of `num_replicas` reads in an epoch,
// identical to Python's torch.utils.data.distributed.DistributedSampler for the same arguments
// (LibTorch's own DistributedRandomSampler is not: it matched 0 of 30 cases).
//
// Example (given: int rank, int epochs, const std::function<void(int64_t)>& read):
//   ringtorch::SamplerOptions options;
//   options.seed = 42;
//   ringtorch::DistributedSampler sampler(60000, /*num_replicas=*/2, rank, options);
//   for (int epoch = 0; epoch < epochs; ++epoch) {
//     sampler.set_epoch(epoch);
//     for (int64_t i : sampler.indices()) read(i);
//   }
//
// Python's algorithm: randperm(n) from a generator seeded with seed + epoch (or 0..n-1 without
// shuffle); pad by repeating the first indices up to num_samples * num_replicas (or truncate
// with drop_last); take indices[rank::num_replicas].
//
// Needs only a rank and a world size: datasets/ does not include runtime/.
// Thread-safety: const methods may run concurrently; set_epoch must not race with them.
#pragma once

#include <cstdint>
#include <vector>

namespace ringtorch {

struct SamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;
};

// The whole dataset's order in `epoch`: randperm(size) from a generator seeded with
// seed + epoch (Python's), or 0..size-1 without shuffle. DistributedSampler and
// WeightedDistributedSampler deal it out.
std::vector<int64_t> epoch_order(int64_t dataset_size, const SamplerOptions& options, int64_t epoch);

class DistributedSampler {
 public:
  // Throws InvalidArgumentError for num_replicas < 1, rank outside [0, num_replicas), size < 0.
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank, SamplerOptions options = {});

  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  // Resuming inside an epoch, possibly with another world size: the first `trained` indices of
  // the epoch's order were trained already (by all ranks together), and indices() deals out
  // the rest the same way (padded to a multiple of num_replicas, or cut with drop_last). 0: the
  // whole epoch. Keep it for one epoch: set it back to 0 before the next set_epoch.
  void set_start(int64_t trained);
  int64_t start() const { return start_; }

  // This rank's indices for the current epoch, in order.
  std::vector<int64_t> indices() const;
  // How many indices each rank gets per epoch (Python's len(sampler)).
  int64_t num_samples() const { return num_samples_; }

 private:
  const int64_t dataset_size_;
  const int num_replicas_;
  const int rank_;
  const SamplerOptions options_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
  int64_t start_ = 0;
};

}  // namespace ringtorch
