#include <ATen/ATen.h>

#include <cstring>
#include <vector>

#include <ringtorch/checkpoint_format.h>
#include <ringtorch/error.h>
#include <ringtorch/state_broadcast.h>

namespace ringtorch {

std::vector<char> broadcast_bytes(ProcessGroup& group, int root, std::vector<char> bytes,
                                  ProcessGroup::Timeout first_wait) {
  const bool sending = group.rank() == root;
  at::Tensor size = at::tensor({static_cast<int64_t>(sending ? bytes.size() : 0)}, at::kLong);
  group.broadcast(size, root, first_wait);
  at::Tensor payload = at::empty({size.item<int64_t>()}, at::kByte);
  if (sending && !bytes.empty()) std::memcpy(payload.data_ptr(), bytes.data(), bytes.size());
  group.broadcast(payload, root);
  if (sending) return bytes;
  bytes.resize(static_cast<size_t>(payload.numel()));
  if (!bytes.empty()) std::memcpy(bytes.data(), payload.data_ptr(), bytes.size());
  return bytes;
}

void broadcast_training_state(ProcessGroup& group, int root, torch::nn::Module& model,
                              torch::optim::Optimizer* optimizer, ProcessGroup::Timeout first_wait,
                              std::map<std::string, at::Tensor>* extra_state) {
  const bool sending = group.rank() == root;
  std::vector<char> bytes;
  if (sending) {
    TrainingProgress with_extra;
    if (extra_state) with_extra.extra_state = *extra_state;
    bytes = serialize_checkpoint(model, optimizer, with_extra);
  }
  bytes = broadcast_bytes(group, root, std::move(bytes), first_wait);
  if (sending) return;
  TrainingProgress received = restore_checkpoint(bytes, str_cat("broadcast from rank ", root), model, optimizer);
  if (extra_state) *extra_state = std::move(received.extra_state);
}

}  // namespace ringtorch
