// ringtrain's --grad-compression none|fp16|bf16|powersgd[:RANK] and --powersgd-start-step N:
// which comm hook DistributedDataParallel uses, and how PowerSGD's state (powersgd.h) travels in
// checkpoints and elastic commits (TrainingProgress::extra_state, names "powersgd.*").
//
// In a checkpoint (rank 0 writes it, every rank reads it): "powersgd.step", "powersgd.q.<bucket>"
// (the same on every rank) and "powersgd.errors.<bucket>", every rank's error buffer as one row
// of a [world size, bucket size] tensor. A resume at the same world size gives each rank its own
// row, so it continues exactly as the uninterrupted run; at another world size every rank takes
// the rows' mean (the averaged gradient, which is what the errors feed, then carries the same
// residual). In an elastic commit (each rank keeps its own): "powersgd.error.<bucket>", this
// rank's; after an in-process recovery a rank whose own commit is the one synced takes its own
// errors back, a rank that joined starts from zeros. To a rank that sat out an epoch (--balance),
// the epoch's end hands the step and Q of the ranks that trained (powersgd_shared_state), and its
// errors restart from zeros: its own went stale while it did not train.
//
// Thread-safety: the training thread.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <ringtorch/comm_hooks.h>
#include <ringtorch/powersgd.h>
#include <ringtorch/process_group.h>

#include "apps/trainer/grad_compression_flag.h"

namespace ringtorch {

// The hook for `choice` (none: the default all-reduce); `powersgd` receives PowerSGD's state
// when it is the choice (else null).
CommHook make_comm_hook(const GradCompression& choice, int64_t powersgd_start_step,
                        std::shared_ptr<PowerSgdState>* powersgd);

// For a checkpoint: a collective of `group` (every rank calls it, rank 0 gets the errors).
std::map<std::string, at::Tensor> powersgd_checkpoint_state(const PowerSgdState& state, ProcessGroup& group);
// From a checkpoint's extra_state, for this rank of `world`. Returns a note for the log when the
// errors were averaged (another world size) or absent; empty otherwise. Throws
// InvalidArgumentError for entries that do not fit.
std::string restore_powersgd_from_checkpoint(PowerSgdState& state, const std::map<std::string, at::Tensor>& saved,
                                             int rank, int world);

// For an elastic commit (no collective): this rank's own state.
std::map<std::string, at::Tensor> powersgd_commit_state(const PowerSgdState& state);
// The step and Q's, which every rank that trains holds alike, without this rank's errors; for a
// rank that sat out, restore_powersgd_from_commit(state, shared, nullptr) takes them.
std::map<std::string, at::Tensor> powersgd_shared_state(const PowerSgdState& state);
// After ElasticState::sync: the synced state's Q and step; this rank's own errors when `own`
// (its own commit's extra_state) is from the synced step, else none (zeros).
void restore_powersgd_from_commit(PowerSgdState& state, const std::map<std::string, at::Tensor>& synced,
                                  const std::map<std::string, at::Tensor>* own);

}  // namespace ringtorch
