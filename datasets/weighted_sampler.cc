#include <numeric>

#include <ringtorch/batch_split.h>
#include <ringtorch/error.h>
#include <ringtorch/weighted_sampler.h>

namespace ringtorch {
namespace {

int64_t steps_in_epoch(int64_t size, int64_t global_batch, bool drop_last) {
  if (global_batch < 1 || size < 0) return 0;
  return drop_last ? size / global_batch : (size + global_batch - 1) / global_batch;
}

}  // namespace

WeightedDistributedSampler::WeightedDistributedSampler(int64_t dataset_size, int64_t global_batch, int rank,
                                                       int world_size, SamplerOptions options)
    : dataset_size_(dataset_size),
      global_batch_(global_batch),
      rank_(rank),
      world_size_(world_size),
      options_(options),
      steps_(steps_in_epoch(dataset_size, global_batch, options.drop_last)) {
  if (world_size < 1) throw InvalidArgumentError(str_cat("WeightedDistributedSampler: world size ", world_size));
  if (rank < 0 || rank >= world_size) {
    throw InvalidArgumentError(str_cat("WeightedDistributedSampler: rank ", rank, " is outside [0, ", world_size, ")"));
  }
  if (dataset_size < 0) throw InvalidArgumentError(str_cat("WeightedDistributedSampler: dataset size ", dataset_size));
  if (global_batch < world_size) {
    throw InvalidArgumentError(str_cat("a global batch of ", global_batch, " is smaller than the ", world_size,
                                       " ranks; every rank needs at least one sample per step"));
  }
  split_ = split_global_batch(global_batch, std::vector<double>(static_cast<size_t>(world_size), 1.0));
  set_epoch(0);
}

void WeightedDistributedSampler::set_epoch(int64_t epoch, int64_t trained) {
  if (trained < 0 || trained > dataset_size_) {
    throw InvalidArgumentError(
        str_cat("WeightedDistributedSampler: start ", trained, " is outside the epoch's ", dataset_size_, " indices"));
  }
  epoch_ = epoch;
  order_ = epoch_order(dataset_size_, options_, epoch);
  order_.erase(order_.begin(), order_.begin() + trained);
  steps_ = steps_in_epoch(dataset_size_ - trained, global_batch_, options_.drop_last);
  const auto total = static_cast<size_t>(steps_ * global_batch_);
  // Pad by repeating from the start (as often as needed when the set is tiny), or cut.
  for (size_t i = 0; order_.size() < total && !order_.empty(); ++i) order_.push_back(order_[i]);
  order_.resize(total);
}

void WeightedDistributedSampler::set_split(const std::vector<int64_t>& per_rank) {
  if (per_rank.size() != static_cast<size_t>(world_size_)) {
    throw InvalidArgumentError(str_cat("a split of ", per_rank.size(), " batches for ", world_size_, " ranks"));
  }
  int64_t sum = 0;
  for (int64_t b : per_rank) {
    if (b < 0) throw InvalidArgumentError(str_cat("a split with a negative batch (", b, ")"));
    sum += b;
  }
  if (sum != global_batch_) {
    throw InvalidArgumentError(str_cat("a split summing to ", sum, " for a global batch of ", global_batch_));
  }
  split_ = per_rank;
}

std::vector<int64_t> WeightedDistributedSampler::step_indices(int64_t step) const {
  if (step < 0 || step >= steps_) {
    throw InvalidArgumentError(str_cat("step ", step, " is outside the epoch's ", steps_, " steps"));
  }
  const int64_t offset = std::accumulate(split_.begin(), split_.begin() + rank_, int64_t{0});
  const auto first = order_.begin() + step * global_batch_ + offset;
  return std::vector<int64_t>(first, first + split_[static_cast<size_t>(rank_)]);
}

}  // namespace ringtorch
