// broadcast_training_state: one rank's training state (model parameters and buffers, optimizer
// state, CPU generator) given to every rank of a group, as a checkpoint sent through the group
// instead of a file (checkpoint_format.h). ringtrain uses it at each epoch end for ranks that sat
// out the epoch (batch_balancer.h, 3.), so that they evaluate, checkpoint and finish with the
// weights the others trained: every rank ends bitwise equal.
//
// Example (given: ringtorch::ProcessGroup& group, torch::nn::Module& model, torch::optim::Optimizer& optimizer):
//   ringtorch::broadcast_training_state(group, /*root=*/0, model, &optimizer);
//
// A collective: every rank of `group` calls it with the same root, and the same model and
// optimizer kinds. `first_wait` bounds the first wait (for the root's size) instead of the
// group's timeout: a rank that arrives long before the root (it sat out an epoch) gives its
// expected wait there. Failures throw as the group's collectives do; a state that does not fit
// the receiver's model throws as restoring a checkpoint does (path "broadcast from rank R").
// `extra_state`, when given, travels too (a checkpoint's extra_state: PowerSGD's step and Q, say):
// the root's is sent, and on every other rank it is replaced by what the root sent.
//
// Thread-safety: the training thread (it writes into the model, the optimizer and the generator).
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <map>
#include <string>
#include <vector>

#include <ringtorch/process_group.h>

namespace ringtorch {

void broadcast_training_state(ProcessGroup& group, int root, torch::nn::Module& model,
                              torch::optim::Optimizer* optimizer, ProcessGroup::Timeout first_wait = {},
                              std::map<std::string, at::Tensor>* extra_state = nullptr);

// The root's `bytes` on every rank (the others pass anything): their size, then the bytes. A
// collective, as above.
std::vector<char> broadcast_bytes(ProcessGroup& group, int root, std::vector<char> bytes,
                                  ProcessGroup::Timeout first_wait = {});

}  // namespace ringtorch
