// ringtrain's --local-steps H (DiLoCo's inner and outer steps, local_sgd.h): how one period
// trains, and how the outer state and every rank's own inner optimizer travel in checkpoints and
// elastic commits (TrainingProgress::extra_state, names "local_sgd.*").
//
// With --local-steps the training loop's step is a period: the rank's share of the period's
// samples (H batches of --batch-size; with --balance, its part of H global batches, split by
// speed) trained in inner steps of --batch-size on the rank's own replica, then the outer step,
// after which every replica is the same. So --checkpoint-every-steps counts outer steps, and
// in-process elastic commits happen at every outer step (a recovery goes on from the last one).
// With --outer-overlap N the outer step's all-reduce travels during the next period's first N
// inner steps, and the periods before an evaluation or a checkpoint synchronize (the replicas are
// equal then only).
//
// In a checkpoint (rank 0 writes it): "local_sgd.outer_steps" and "local_sgd.momentum.<i>" (the
// same on every rank), "local_sgd.inner_optimizer" (every rank's inner optimizer state as one
// row, optimizer_state_vector(), padded to the longest) and "local_sgd.inner_optimizer_sizes".
// A resume at the same world size gives each rank its own row back (it continues exactly as the
// uninterrupted run); at another world size every rank keeps the optimizer state of rank 0,
// which the checkpoint holds as usual. In an elastic commit (each rank keeps its own): the outer
// state and "local_sgd.inner_optimizer", this rank's.
//
// Thread-safety: the training thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ringtorch/local_sgd.h>

#include "apps/trainer/training_run.h"

namespace ringtorch {

LocalSgdOptions local_sgd_options(const TrainerOptions& options);

// Every rank takes rank 0's parameters and buffers (as DDP's constructor does): local SGD
// averages changes, so replicas that started apart would stay apart. A collective of run.group.
void start_from_rank0_weights(TrainingRun& run);

// One period on `indices` (this rank's share, may be empty; with run.claims the whole period's,
// of which it trains the batches it claims): inner steps of --batch-size, then
// the outer step (a collective of the training group), finished before it returns when
// `synchronize` (LocalSgd::synchronize(): with --outer-overlap the replicas are equal only
// then). Its compute time is the inner steps'; its wait is the outer step's.
StepOutcome train_period(TrainingRun& run, const std::vector<int64_t>& indices, const at::Tensor& last_parameter,
                         bool synchronize);

// For a checkpoint: a collective of run.group (every rank calls it, rank 0 gets the rows).
std::map<std::string, at::Tensor> local_sgd_checkpoint_state(TrainingRun& run);
// From a checkpoint's extra_state, after the checkpoint loaded the weights and rank 0's
// optimizer state. Returns a note for rank 0's log (another world size), else empty.
std::string restore_local_sgd_from_checkpoint(TrainingRun& run, const std::map<std::string, at::Tensor>& saved);

// For an elastic commit (no collective): the outer state and this rank's inner optimizer.
std::map<std::string, at::Tensor> local_sgd_commit_state(TrainingRun& run);
// After ElasticState::sync: the synced outer state; this rank's own inner optimizer when `own`
// (its own commit's extra_state) is from the synced step, else the synced rank's.
void restore_local_sgd_from_commit(TrainingRun& run, const std::map<std::string, at::Tensor>& synced,
                                   const std::map<std::string, at::Tensor>* own);

}  // namespace ringtorch
