// WeightedDistributedSampler: DistributedSampler for ranks of unequal speed. Every step takes
// the next `global_batch` indices of the epoch's order (epoch_order(): the same shuffle as
// DistributedSampler), and rank r takes a contiguous part of them, b_r = split[r] (from
// split_global_batch); so every rank runs the same number of steps, no index is read twice in
// an epoch, and the split may change between any two steps (ringtrain's --balance auto does, at
// its decisions and on every other step while it tries a split) without changing which indices
// the epoch reads.
//
// The tail, as DistributedSampler: drop_last drops the last size % global_batch indices
// (steps = size / global_batch); otherwise the order is padded by repeating its first indices
// up to a whole number of steps (steps = ceil(size / global_batch)).
//
// Example (given: int rank, int world_size, const std::function<void(std::vector<int64_t>)>& train_on):
//   ringtorch::WeightedDistributedSampler sampler(60000, /*global_batch=*/64, rank, world_size);
//   sampler.set_split(ringtorch::split_global_batch(64, {3, 1}));  // 48 and 16 per step
//   sampler.set_epoch(0);
//   for (int64_t step = 0; step < sampler.steps_per_epoch(); ++step) train_on(sampler.step_indices(step));
//
// Thread-safety: const methods may run concurrently; set_epoch and set_split must not race
// with them.
#pragma once

#include <cstdint>
#include <vector>

#include <ringtorch/distributed_sampler.h>

namespace ringtorch {

class WeightedDistributedSampler {
 public:
  // Starts with the equal split. Throws InvalidArgumentError for a world size < 1, a rank
  // outside it, a dataset size < 0, or a global batch smaller than the world size.
  WeightedDistributedSampler(int64_t dataset_size, int64_t global_batch, int rank, int world_size,
                             SamplerOptions options = {});

  // `trained` > 0 resumes inside the epoch (possibly after a change of world size or global
  // batch): the first `trained` indices of the epoch's order were trained already, and the
  // steps deal out the rest (padded or cut to whole steps, as a whole epoch is).
  void set_epoch(int64_t epoch, int64_t trained = 0);
  int64_t epoch() const { return epoch_; }
  // Per-rank batch sizes from the next step_indices() on. Throws InvalidArgumentError unless
  // there is one per rank, each >= 0, summing to the global batch.
  void set_split(const std::vector<int64_t>& per_rank);
  const std::vector<int64_t>& split() const { return split_; }

  int64_t global_batch() const { return global_batch_; }
  int64_t steps_per_epoch() const { return steps_; }
  // This rank's indices in step `step` (0 <= step < steps_per_epoch()) of the current epoch.
  std::vector<int64_t> step_indices(int64_t step) const;

 private:
  const int64_t dataset_size_;
  const int64_t global_batch_;
  const int rank_;
  const int world_size_;
  const SamplerOptions options_;
  int64_t steps_;
  int64_t epoch_ = 0;
  std::vector<int64_t> split_;
  std::vector<int64_t> order_;  // the epoch's order, padded or cut to steps_ * global_batch_
};

}  // namespace ringtorch
