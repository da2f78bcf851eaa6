// DataParallel: torch.nn.DataParallel with persistent replicas. One process, several devices
// (CPU "devices" allowed, so CPU-only machines run it too):
//
// Example (given: torch::Tensor images, torch::Tensor labels):
//   ringtorch::DataParallel dp([] { return ringtorch::make_model("lenet"); },
//                              {torch::Device("cuda:0"), torch::Device("cuda:1")});
//   torch::optim::SGD sgd(dp.module().parameters(), 0.01);  // the primary replica's
//   auto loss = torch::cross_entropy_loss(dp.forward(images), labels);
//   loss.backward();  // every replica's gradients end up summed in the primary's .grad
//   sgd.step();       // the next forward copies the primary's weights to the others
//
// The replicas are built once (one per device; replica 0, on devices[0], is the primary), not
// cloned per call as LibTorch's data_parallel does. forward() copies the primary's parameters
// and buffers into the other replicas, splits the batch along dim 0, runs chunk 0 on the calling
// thread and every other chunk on its replica's own thread, and concatenates the outputs on the
// output device (default devices[0]).
// At the end of backward, a callback adds the other replicas' gradients into the primary's.
//
// Composes with DistributedDataParallel (several devices per process, a group across
// processes): `DistributedDataParallel ddp(dp, group)`; DDP then reduces across processes once
// the replicas' gradients are summed (at the end of backward, so without overlap).
//
// Thread-safety: one training thread calls forward/backward; each replica but the primary has
// one worker thread, owned by this object and joined by its destructor.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace ringtorch {

class DataParallel {
 public:
  // Throws InvalidArgumentError for an empty device list or replicas with different numbers of
  // parameters or buffers.
  DataParallel(const std::function<torch::nn::AnyModule()>& make_replica, std::vector<torch::Device> devices,
               std::optional<torch::Device> output_device = std::nullopt);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  torch::Tensor forward(const torch::Tensor& input);

  torch::nn::Module& module();  // the primary replica: give its parameters to the optimizer
  torch::nn::Module& replica(size_t index);
  size_t replica_count() const;
  // Copies the primary's parameters and buffers into the other replicas (forward does this).
  void sync_replicas();
  // Called at the end of every backward, after the replicas' gradients are in the primary's
  // (DistributedDataParallel's entry point). Runs on autograd's thread.
  void add_backward_listener(std::function<void()> listener);

  struct State;  // shared with the autograd hooks (data_parallel.cc)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace ringtorch
