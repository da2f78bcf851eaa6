#include "apps/trainer/batch_plans.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include <ringtorch/batch_split.h>
#include <ringtorch/error.h>
#include <ringtorch/state_broadcast.h>
#include <ringtorch/timeline.h>

#include "apps/trainer/grad_compression.h"

namespace ringtorch {
namespace {

SamplerOptions sampler_options(const TrainerOptions& o) { return {/*shuffle=*/true, o.seed, /*drop_last=*/false}; }

// With --local-steps the balancer's step is a period of many inner steps: one period of warm-up
// and decisions every 4 (the defaults count DDP's steps: 5 and 40), by the model alone: a
// period's compute time measures a rank's speed well, while probes judged on a few periods'
// throughput are fooled by its swings (docs/training.md, "Local SGD"). No rank is sat out: a slow rank no longer holds
// the others up at every step, only at the outer step, and what it trains counts by its samples.
BalanceSettings balance_settings(const TrainerOptions& o) {
  BalanceSettings settings;
  if (o.local_steps > 0) {
    settings.warmup_steps = 1;
    settings.interval = 4;
    settings.probe = 0;
    settings.sit_out_margin = 0;
  }
  return settings;
}

}  // namespace

EqualBatches::EqualBatches(const TrainingRun& run)
    : batch_size_(int64_t{run.options.batch_size} * std::max(1, run.options.local_steps)),
      world_(run.world),
      sampler_(run.train_size, run.world, run.rank, sampler_options(run.options)) {}

int64_t EqualBatches::begin_epoch(int64_t epoch, int64_t trained_before) {
  trained_before_ = trained_before;
  sampler_.set_epoch(epoch);
  sampler_.set_start(trained_before);
  mine_ = sampler_.indices();
  return (static_cast<int64_t>(mine_.size()) + batch_size_ - 1) / batch_size_;
}

int64_t EqualBatches::epoch_samples() const { return trained_before_ + static_cast<int64_t>(mine_.size()) * world_; }

std::vector<int64_t> EqualBatches::step_indices(int64_t step) {
  const size_t start = static_cast<size_t>(step * batch_size_);
  return std::vector<int64_t>(mine_.begin() + start, mine_.begin() + std::min(mine_.size(), start + batch_size_));
}

int64_t EqualBatches::trained_after(int64_t steps) const {
  return trained_before_ +
         static_cast<int64_t>(std::min(mine_.size(), static_cast<size_t>(steps * batch_size_))) * world_;
}

void BalancedBatches::on_start(TrainingRun& run) {
  const TrainerOptions& o = run.options;
  const int64_t global_batch = o.global_batch > 0 ? o.global_batch : int64_t{o.batch_size} * run.world;
  batches_per_step_ = std::max(1, o.local_steps);
  std::vector<double> weights(static_cast<size_t>(run.world), 1.0);
  const bool automatic = o.balance == "auto" || o.balance == "dynamic";
  if (!automatic) weights = parse_weights(o.balance);
  if (weights.size() != static_cast<size_t>(run.world)) {
    throw InvalidArgumentError(str_cat("--balance ", o.balance, " gives ", weights.size(), " weights for ", run.world,
                                       " ranks; give one weight per rank"));
  }
  balancer_.emplace(run.group, global_batch, weights, automatic, run.device, balance_settings(o));
  // auto and dynamic agree on all the balancer checks; a rank given the other would run
  // BatchClaims' collective alone.
  int64_t dynamic = o.balance == "dynamic";
  std::vector<int64_t> modes(static_cast<size_t>(run.world));
  run.group.allgather(&dynamic, modes.data(), 1, c10::ScalarType::Long);
  for (size_t r = 1; r < modes.size(); ++r) {
    if (modes[r] != modes[0]) {
      const auto name = [](int64_t mode) { return mode ? "dynamic" : "auto"; };
      throw InvalidArgumentError(str_cat("balance: rank ", r, " was told --balance ", name(modes[r]),
                                         ", rank 0 --balance ", name(modes[0]),
                                         "; give every rank the same --balance"));
    }
  }
  sampler_.emplace(run.train_size, global_batch, run.rank, run.world, sampler_options(o));  // split: per step
  run.split = balancer_->split();
  if (run.rank == 0) std::printf("[ringtorch] balance: %s\n", balancer_->describe().c_str());
  if (balancer_->anyone_sits_out()) train_without_ranks_sitting_out(run);
  if (o.balance == "dynamic") {
    claims_ = std::make_shared<BatchClaims>(run.group);
    run.claims = claims_;
    whole_batch_.assign(static_cast<size_t>(run.world), 0);
    whole_batch_[static_cast<size_t>(run.rank)] = global_batch;
    batch_size_ = o.batch_size;
  }
}

int64_t BalancedBatches::begin_epoch(int64_t epoch, int64_t trained_before) {
  trained_before_ = trained_before;
  sampler_->set_epoch(epoch, trained_before);
  return (sampler_->steps_per_epoch() + batches_per_step_ - 1) / batches_per_step_;
}

int64_t BalancedBatches::epoch_samples() const {
  return trained_before_ + sampler_->steps_per_epoch() * sampler_->global_batch();
}

std::vector<int64_t> BalancedBatches::step_indices(int64_t step) {
  // The balancer's split, or on every other step of a probe's trial the trial's; with claims,
  // the whole of every global batch, in the epoch's order.
  sampler_->set_split(claims_ ? whole_batch_ : balancer_->next_step_split());
  if (batches_per_step_ == 1 && !claims_) return sampler_->step_indices(step);
  std::vector<int64_t> indices;
  const int64_t end = std::min(sampler_->steps_per_epoch(), (step + 1) * batches_per_step_);
  for (int64_t k = step * batches_per_step_; k < end; ++k) {
    const std::vector<int64_t> part = sampler_->step_indices(k);
    indices.insert(indices.end(), part.begin(), part.end());
  }
  if (claims_) {
    const int64_t samples = static_cast<int64_t>(indices.size());
    claims_->begin_period((samples + batch_size_ - 1) / batch_size_, balancer_->weights());
  }
  return indices;
}

int64_t BalancedBatches::trained_after(int64_t steps) const {
  return trained_before_ + std::min(steps * batches_per_step_, sampler_->steps_per_epoch()) * sampler_->global_batch();
}

void BalancedBatches::on_step_end(TrainingRun& run, const StepOutcome& step) {
  // A rank that sits out records (0, 0, 0), so that every rank counts the same steps.
  balancer_->record_step(step.compute_seconds, step.seconds, step.samples);
  ++steps_run_;
  if (step.trained && balancer_->due_after_step(steps_run_)) rebalance(run);
}

void BalancedBatches::on_epoch_trained(TrainingRun& run, int64_t steps) {
  if (run.ranks_sit_out) give_state_to_ranks_sitting_out(run, steps);
}

void BalancedBatches::on_epoch_end(TrainingRun& run, const EpochOutcome& epoch) {
  if (epoch.epoch + 1 < run.options.epochs) rebalance(run);  // for the next epoch, from this one's measurements
}

void BalancedBatches::on_finish(TrainingRun& run, TrainingReport& report) {
  report.balance = run.options.balance;
  report.split = balancer_->split();
  report.weights = balancer_->weights();
  if (claims_) claims_->finish();  // every rank is past the last outer step (an epoch's end synchronizes)
}

void BalancedBatches::rebalance(TrainingRun& run) {
  const size_t training_before = balancer_->training_ranks().size();
  if (!balancer_->rebalance(run.group)) return;
  run.split = balancer_->split();
  if (run.rank == 0) std::printf("[ringtorch] balance: %s\n", balancer_->describe().c_str());
  if (balancer_->training_ranks().size() != training_before) train_without_ranks_sitting_out(run);
}

void BalancedBatches::train_without_ranks_sitting_out(TrainingRun& run) {
  if (run.local_sgd) return;  // a rank given weight 0 joins the outer steps with no samples
  run.ddp.reset();
  run.ranks_sit_out = balancer_->anyone_sits_out();
  run.train_in(run.group.new_group(balancer_->training_ranks()));
}

// Ranks that sat out arrive long before the others, so their first wait is the group's timeout
// plus twice the epoch's expected length: from the last measured step time, or the previous
// hand-over's wait (the first epoch of a rank given weight 0 has the timeout alone).
void BalancedBatches::give_state_to_ranks_sitting_out(TrainingRun& run, int64_t steps_in_epoch) {
  TimelineSpan span("state to ranks sitting out", "train");
  ProcessGroup::Timeout first_wait;
  const auto start = std::chrono::steady_clock::now();
  if (balancer_->sits_out(run.rank)) {
    const double expected =
        2.0 * std::max(static_cast<double>(steps_in_epoch) * balancer_->last_step_seconds(), last_handover_wait_);
    first_wait = run.group.timeout() + std::chrono::milliseconds(static_cast<int64_t>(expected * 1e3));
  }
  // With PowerSGD, its step and Q too: a rank that sat out kept neither going (grad_compression.h).
  const int root = balancer_->training_ranks().front();
  std::map<std::string, at::Tensor> powersgd;
  if (run.powersgd && run.rank == root) powersgd = powersgd_shared_state(*run.powersgd);
  broadcast_training_state(run.group, root, run.model.module(), run.optimizer.get(), first_wait,
                           run.powersgd ? &powersgd : nullptr);
  if (run.powersgd && balancer_->sits_out(run.rank)) restore_powersgd_from_commit(*run.powersgd, powersgd, nullptr);
  last_handover_wait_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::shared_ptr<BatchPlan> make_batch_plan(TrainingRun& run, TrainerParts& parts) {
  if (run.options.balance == "equal") return std::make_shared<EqualBatches>(run);
  auto balanced = std::make_shared<BalancedBatches>();
  parts.push_back(balanced);
  return balanced;
}

}  // namespace ringtorch
