// ElasticState: the training state held in memory for recovery inside the process (Horovod's
// elastic State; ringtrain --elastic in-process, docs/training.md "Elastic training"). The
// training loop commits it every N steps: model parameters and buffers, optimizer state, the
// CPU generator and the position in the data, as a checkpoint in bytes (checkpoint_format.h).
// When a peer is lost, the survivors drop their process group, join the next generation and
// make a new group; sync() then gives every rank, new ones included, the newest commit any rank
// holds, and training goes on from there: at most the steps since that commit are redone.
//
// Example (given: ringtorch::ProcessGroup& group, torch::nn::Module& model, torch::optim::SGD& sgd,
//          ringtorch::ElasticState& state, ringtorch::TrainingProgress& progress):
//   if (auto committed = state.sync(group, model, &sgd)) progress = *committed;  // every rank
//   // ... train a step, ++progress.step ...
//   if (progress.step % 10 == 0) state.commit(model, &sgd, progress);
//
// Thread-safety: the training thread.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ringtorch/checkpoint_format.h>
#include <ringtorch/process_group.h>

namespace ringtorch {

class ElasticState {
 public:
  // Keeps a copy of the state (replacing the previous commit).
  void commit(const torch::nn::Module& model, torch::optim::Optimizer* optimizer, const TrainingProgress& progress);
  // The step of the newest commit; -1 before the first.
  int64_t committed_step() const { return step_; }
  // The training loop's step, noted after each one: how much a recovery redoes.
  void reached(int64_t step) { reached_ = step; }
  int64_t reached_step() const { return reached_; }

  // A collective of `group`: finds the newest commit of any rank (the lowest rank among equals),
  // restores it into every rank's `model` and `optimizer`, keeps it as every rank's commit, and
  // returns its progress; nullopt when no rank has committed (a fresh job: every rank keeps its
  // state). Throws as collectives do, and as restoring a checkpoint does when it does not fit.
  std::optional<TrainingProgress> sync(ProcessGroup& group, torch::nn::Module& model,
                                       torch::optim::Optimizer* optimizer);
  // The rank sync() took the state from; -1 before a sync found one.
  int last_source() const { return source_; }
  // This rank's own newest commit's step and extra_state (TrainingProgress::extra_state), kept
  // when sync() replaces the commit with another rank's: for state that is each rank's own, such
  // as PowerSGD's error buffers, which a rank may take back when its commit is the one synced
  // (own_step() == the synced step). -1 and empty before the first commit.
  int64_t own_step() const { return own_step_; }
  const std::map<std::string, at::Tensor>& own_extra_state() const { return own_extra_state_; }

 private:
  std::vector<char> bytes_;
  int64_t step_ = -1;
  int64_t reached_ = -1;
  int source_ = -1;
  int64_t own_step_ = -1;
  std::map<std::string, at::Tensor> own_extra_state_;
};

}  // namespace ringtorch
