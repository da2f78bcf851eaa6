#include <ATen/ATen.h>

#include <ringtorch/elastic_state.h>
#include <ringtorch/error.h>
#include <ringtorch/state_broadcast.h>

namespace ringtorch {

void ElasticState::commit(const torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                          const TrainingProgress& progress) {
  bytes_ = serialize_checkpoint(model, optimizer, progress);
  step_ = progress.step;
  own_step_ = progress.step;
  own_extra_state_ = progress.extra_state;
}

std::optional<TrainingProgress> ElasticState::sync(ProcessGroup& group, torch::nn::Module& model,
                                                   torch::optim::Optimizer* optimizer) {
  at::Tensor newest = at::tensor({step_}, at::kLong);
  group.allreduce(newest, ReduceOp::kMax);
  const int64_t best = newest.item<int64_t>();
  if (best < 0) return std::nullopt;
  at::Tensor holder = at::tensor({static_cast<int64_t>(step_ == best ? group.rank() : group.size())}, at::kLong);
  group.allreduce(holder, ReduceOp::kMin);
  source_ = static_cast<int>(holder.item<int64_t>());
  bytes_ = broadcast_bytes(group, source_, std::move(bytes_));
  step_ = best;
  return restore_checkpoint(bytes_, str_cat("the state committed at step ", best, " on rank ", source_), model,
                            optimizer);
}

}  // namespace ringtorch
