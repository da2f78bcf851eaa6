// PowerSGD gradient compression (Vogels, Karimireddy and Jaggi, NeurIPS 2019) as a comm hook,
// with the semantics of PyTorch's torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook.
//
// Example (given: ringtorch::DdpOptions& options):
//   ringtorch::PowerSgdOptions psgd;
//   psgd.matrix_approximation_rank = 4;
//   psgd.start_step = 2;
//   auto powersgd = std::make_shared<ringtorch::PowerSgdState>(psgd);
//   options.comm_hook = ringtorch::powersgd_hook(powersgd);  // then DistributedDataParallel(model, group, options)
//
// Per bucket and step: the bucket's gradient plus this rank's error (what earlier steps did not
// send) is the input. Each gradient of two or more dimensions is viewed as a matrix M (its first
// dimension by the rest) and, where (rows + columns) x r x min_compression_rate < rows x columns,
// approximated as P Q^T of rank r: P = M Q, all-reduced and orthogonalized; Q = M^T P,
// all-reduced; the result is P Q^T / world size. Vectors, scalars and matrices too small to gain
// travel uncompressed, together in one all-reduce with the P matrices. Q is kept for the next step
// (warm start); the first Q of a bucket is drawn from a generator seeded by random_seed and the
// bucket's index, the same on every rank. The error is the input minus the result. Tensors of
// one dimension are never compressed (PyTorch compresses them as n x 1 when min_compression_rate
// < 1). The first
// start_step backward passes all-reduce plainly. Per step on the wire: the uncompressed tensors
// plus (rows + columns) x r per compressed matrix, in two all-reduces per bucket.
//
// Thread-safety: the hook runs on the backward thread; state_dict() and load_state_dict() take
// the same lock, and belong between steps (not during backward).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <ringtorch/comm_hooks.h>

namespace ringtorch {

struct PowerSgdOptions {
  int matrix_approximation_rank = 1;  // r: PyTorch's default (ringtrain's powersgd takes 4)
  // Backward passes reduced with a plain all-reduce before compression starts (PyTorch's
  // start_powerSGD_iter, whose default is 1000; ringtrain's --powersgd-start-step is 2).
  int64_t start_step = 1000;
  double min_compression_rate = 2;  // compress a matrix only when it shrinks at least this much
  bool use_error_feedback = true;
  bool warm_start = true;                // keep Q between steps; false: a new random Q each step
  double orthogonalization_epsilon = 0;  // added to column norms (0: a zero column stays zero)
  uint64_t random_seed = 0;
};

class PowerSgdState;
// The hook: `state` is shared by every call (one state per DistributedDataParallel).
CommHook powersgd_hook(std::shared_ptr<PowerSgdState> state);

class PowerSgdState {
 public:
  explicit PowerSgdState(PowerSgdOptions options = {});

  const PowerSgdOptions& options() const { return options_; }
  // Backward passes seen so far (the hook counts one at each step's last bucket).
  int64_t step() const;
  // Over the last compressed step: gradient elements in, elements on the wire (0 before).
  int64_t elements_before_compression() const;
  int64_t elements_after_compression() const;

  // This rank's state as named tensors (copies): "step"; "q.<bucket>" (the warm-start Q's of a
  // bucket, back to back); "error.<bucket>" (this rank's error, the bucket's size). Q and the step
  // are the same on every rank; the errors are each rank's own.
  std::map<std::string, at::Tensor> state_dict() const;
  // Replaces the state with `state` (state_dict()'s names; a missing error or Q starts as zeros
  // or a fresh draw). Sizes are checked when the hook next meets the bucket: a saved Q or error
  // that does not fit it (a state saved with another model, bucket size or rank) is replaced the
  // same way, with a warning naming the bucket.
  void load_state_dict(const std::map<std::string, at::Tensor>& state);

 private:
  friend CommHook powersgd_hook(std::shared_ptr<PowerSgdState> state);
  static PendingReduction reduce(const std::shared_ptr<PowerSgdState>& self, ProcessGroup& group,
                                 const GradBucket& bucket);

  PowerSgdOptions options_;
  mutable std::mutex mutex_;
  int64_t step_ = 0;
  std::map<size_t, at::Tensor> q_;                    // per bucket index
  std::map<size_t, at::Tensor> errors_;               // per bucket index
  int64_t elements_before_ = 0, elements_after_ = 0;  // the last compressed step
  int64_t counting_before_ = 0, counting_after_ = 0;  // the step in progress
};

}  // namespace ringtorch
