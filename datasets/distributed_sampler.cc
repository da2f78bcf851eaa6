#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Functions.h>

#include <ringtorch/distributed_sampler.h>
#include <ringtorch/error.h>

namespace ringtorch {
namespace {

int64_t samples_per_rank(int64_t size, int replicas, bool drop_last) {
  if (drop_last && size % replicas != 0) return (size - replicas + replicas - 1) / replicas;  // ceil((n-r)/r)
  return (size + replicas - 1) / replicas;                                                    // ceil(n/r)
}

}  // namespace

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank, SamplerOptions options)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      options_(options),
      num_samples_(num_replicas >= 1 && dataset_size >= 0
                       ? samples_per_rank(dataset_size, num_replicas, options.drop_last)
                       : 0) {
  if (num_replicas < 1)
    throw InvalidArgumentError(str_cat("DistributedSampler: num_replicas ", num_replicas, " must be >= 1"));
  if (rank < 0 || rank >= num_replicas) {
    throw InvalidArgumentError(str_cat("DistributedSampler: rank ", rank, " is outside [0, ", num_replicas, ")"));
  }
  if (dataset_size < 0) throw InvalidArgumentError(str_cat("DistributedSampler: dataset size ", dataset_size, " < 0"));
}

std::vector<int64_t> epoch_order(int64_t dataset_size, const SamplerOptions& options, int64_t epoch) {
  std::vector<int64_t> all;
  all.reserve(static_cast<size_t>(dataset_size));
  if (options.shuffle) {
    // Python seeds a fresh torch.Generator with seed + epoch: the same mt19937 stream here.
    auto generator = at::detail::createCPUGenerator(options.seed + static_cast<uint64_t>(epoch));
    at::Tensor perm = at::randperm(dataset_size, generator, at::TensorOptions().dtype(at::kLong));
    const int64_t* p = perm.data_ptr<int64_t>();
    all.assign(p, p + dataset_size);
  } else {
    for (int64_t i = 0; i < dataset_size; ++i) all.push_back(i);
  }
  return all;
}

void DistributedSampler::set_start(int64_t trained) {
  if (trained < 0 || trained > dataset_size_) {
    throw InvalidArgumentError(
        str_cat("DistributedSampler: start ", trained, " is outside the epoch's ", dataset_size_, " indices"));
  }
  start_ = trained;
  num_samples_ = samples_per_rank(dataset_size_ - trained, num_replicas_, options_.drop_last);
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> all = epoch_order(dataset_size_, options_, epoch_);
  all.erase(all.begin(), all.begin() + start_);
  const int64_t rest = dataset_size_ - start_;
  const int64_t total = num_samples_ * num_replicas_;
  if (!options_.drop_last) {
    // Pad by repeating from the start (as often as needed when the set is tiny).
    for (int64_t i = 0; static_cast<int64_t>(all.size()) < total && rest > 0; ++i) all.push_back(all[i]);
  } else {
    all.resize(static_cast<size_t>(total));
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (int64_t i = rank_; i < total; i += num_replicas_) mine.push_back(all[static_cast<size_t>(i)]);
  return mine;
}

}  // namespace ringtorch
