// Which samples each step of ringtrain trains on (training_run.h's BatchPlan):
//   EqualBatches     --balance equal: DistributedSampler's share of the epoch, in batches of
//                    --batch-size, as PyTorch's DDP programs do (with --local-steps H, a step is a
//                    period of H of them)
//   BalancedBatches  --balance auto or weights: this rank's part of each global batch
//                    (WeightedDistributedSampler), split by a BatchBalancer (with --local-steps
//                    H, a step is a period: its part of H global batches); it is also the part
//                    that feeds the balancer each step's times, rebalances, and moves training
//                    to a subgroup when a rank sits out. --balance dynamic (--local-steps only):
//                    a step is all H global batches, which the ranks claim batch by batch as they
//                    train (run.claims, batch_claims.h, with the balancer's weights as speeds)
//
// Thread-safety: the training loop's thread.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <ringtorch/batch_balancer.h>
#include <ringtorch/distributed_sampler.h>
#include <ringtorch/weighted_sampler.h>

#include "apps/trainer/training_run.h"

namespace ringtorch {

class EqualBatches : public BatchPlan {
 public:
  explicit EqualBatches(const TrainingRun& run);
  int64_t begin_epoch(int64_t epoch, int64_t trained_before) override;
  int64_t epoch_samples() const override;
  std::vector<int64_t> step_indices(int64_t step) override;
  int64_t trained_after(int64_t steps) const override;

 private:
  const int64_t batch_size_;
  const int world_;
  DistributedSampler sampler_;
  std::vector<int64_t> mine_;  // this rank's indices of the epoch
  int64_t trained_before_ = 0;
};

class BalancedBatches : public BatchPlan, public TrainerPart {
 public:
  // on_start makes the balancer: a collective (it checks that every rank was given the same
  // split), run where the parts start.
  int64_t begin_epoch(int64_t epoch, int64_t trained_before) override;
  int64_t epoch_samples() const override;
  std::vector<int64_t> step_indices(int64_t step) override;
  int64_t trained_after(int64_t steps) const override;

  void on_start(TrainingRun& run) override;
  void on_step_end(TrainingRun& run, const StepOutcome& step) override;
  void on_epoch_trained(TrainingRun& run, int64_t steps) override;
  void on_epoch_end(TrainingRun& run, const EpochOutcome& epoch) override;
  void on_finish(TrainingRun& run, TrainingReport& report) override;

  const BatchBalancer& balancer() const { return *balancer_; }

 private:
  void rebalance(TrainingRun& run);
  // When a rank sits out, the others train in a subgroup of their own, so that no step waits
  // for it. A collective of the whole group.
  void train_without_ranks_sitting_out(TrainingRun& run);
  // At an epoch's end, ranks that sat out take the state the others trained.
  void give_state_to_ranks_sitting_out(TrainingRun& run, int64_t steps_in_epoch);

  std::optional<BatchBalancer> balancer_;
  std::optional<WeightedDistributedSampler> sampler_;
  std::shared_ptr<BatchClaims> claims_;  // --balance dynamic: run.claims
  int64_t trained_before_ = 0;
  // Global batches per step of the loop: 1, or with --local-steps H (a period; local_steps.h).
  int64_t batches_per_step_ = 1;
  std::vector<int64_t> whole_batch_;  // --balance dynamic: the split that gives this rank all
  int64_t batch_size_ = 0;            // --balance dynamic: of the batches claimed
  int64_t steps_run_ = 0;             // steps recorded, this run
  double last_handover_wait_ = 0;     // seconds, on a rank that sits out
};

// EqualBatches for --balance equal, else BalancedBatches, which is added to `parts` too.
std::shared_ptr<BatchPlan> make_batch_plan(TrainingRun& run, TrainerParts& parts);

}  // namespace ringtorch
