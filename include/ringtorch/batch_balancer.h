// BatchBalancer: per-rank batch sizes that follow each rank's measured speed (ringtrain's
// --balance auto; docs/training.md, "Ranks of unequal speed"). The global batch B stays fixed
// (so does the learning rate tied to it); each rank's share b_r follows weights w_r through
// split_global_batch (base/batch_split.h).
//
// Each rank records, per training step, the step's wall time, its compute time (the step
// without the time it waited for others: DDP's step agreement and the end-of-backward wait for
// buckets) and its samples. rebalance(), a collective every rank calls at the same step,
// all-gathers those sums since the last call and decides, the same way on every rank:
//  1. Model: move the weights toward the speeds 1 / (compute seconds per sample): all the way
//     the first time, half way later (smoothing), each weight at most x4 or /4 per call before
//     the weights are normalised again (bound); the split changes only when some rank's batch moves by more than 2% of
//     B (hysteresis), so that noise does not make it oscillate.
//  2. Probe: once the model is content (it is then left alone until settled, so that it does
//     not undo the probes), try moving a few samples (8% of B) from the rank slowest per sample
//     to the fastest: for the next interval, every other step trains on the moved split (the
//     trial) and the rest on the current one, and the move is kept only if the trial's steps
//     had 3% more throughput (samples per second of step time) than the others. Alternating
//     within one interval, as the benches alternate rounds, makes the comparison blind to the
//     machine's swings that last longer than two steps, which can be far larger than the 3% a
//     probe decides on (docs/benchmarks.md, "Two ranks of equal speed"). What carries over from one step to
//     the next is shared out between both kinds of step instead, and so weighs less in the
//     verdict: a CPU quota whose period is longer than a step (containers default to 100 ms;
//     the benches use 4 ms) may throttle a trial's excess in the step after it. The next trial starts at once: after
//     one that paid, the same size the same way; after one that did not, half the size the same way (when one of this
//     size paid) or the same size the other way (when none had; after both ways, half the size from the first way).
//     When the size reaches zero the balancer is settled. The model alone is blind to costs that depend on the split
//     other than compute: a rank limited by a CPU quota (a container) that runs out of it inside the collectives makes
//     every rank wait, the longer the more samples it takes.
//  3. Sit out: a rank can slow the job more than its samples are worth: every step waits for
//     its fixed per-step work (the forward and backward over all the weights, the optimizer,
//     its part of the collectives), and a rank held to a CPU quota stalls the others inside
//     every collective. It sits out for the rest of the run (weight 0; it cannot be measured
//     while it sits out) when either (a) from two decisions at different shares, its step
//     compute fitted as fixed + per-sample * b exceeds at b = 1 `sit_out_margin` times the
//     others' time for all B samples (at their measured compute per sample), or (b) at a split
//     that follows the measured speeds (the model content), with one other rank left, that
//     rank's rate (samples per second of compute) exceeds the job's measured throughput by
//     more than `sit_out_gain`. Both leave out the collectives the others would still run
//     among themselves, so with three or more ranks (a) alone applies, and it errs toward
//     benching by that much. One rank per decision, the one whose test says the others gain most. The
//     trainer then trains the others in a subgroup and gives the rank that sits out their state
//     at each epoch end (state_broadcast.h). At least one rank always trains.
// Decisions come every `interval` steps after the warm-up until settled (due_after_step), and
// at every epoch end (the trainer's call), where a model move wakes the probing up again. Once
// a rank sits out, only the epoch-end calls remain (that rank does not wait inside an epoch).
//
// Example (given: ringtorch::ProcessGroup& group, int64_t steps, const std::function<double(int64_t)>& train_step):
//   ringtorch::BatchBalancer balancer(group, 64, std::vector<double>(group.size(), 1.0), /*automatic=*/true,
//                                     c10::Device(c10::kCPU));
//   for (int64_t step = 0; step < steps; ++step) {
//     const int64_t mine = balancer.next_step_split()[group.rank()];  // 0 while it sits out (see 3.)
//     const double compute = train_step(mine);  // its compute seconds (the step took as long)
//     balancer.record_step(compute, compute, mine);
//     if (balancer.due_after_step(step + 1) && balancer.rebalance(group) && group.rank() == 0)
//       std::printf("%s\n", balancer.describe().c_str());
//   }
//
// Thread-safety: one training thread.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include <ringtorch/process_group.h>

namespace ringtorch {

struct BalanceSettings {
  int warmup_steps = 5;          // steps not measured at the start (allocation, caches)
  int interval = 40;             // measured steps between decisions until settled (probe 0: for the whole run)
  double smoothing = 0.5;        // share of the way to the measured weights, after the first call
  double max_factor = 4;         // a weight changes at most by this factor per call
  double min_change = 0.02;      // of B: smaller model moves of every rank's batch are not made
  double probe = 0.08;           // of B: the first probe's size; 0: no probes, the model decides every interval
  double probe_gain = 0.03;      // a trial is kept when its steps' throughput beats the others' by this share
  double sit_out_margin = 1.25;  // see 3. (a); 0 turns sitting out off
  double sit_out_gain = 0.10;    // see 3. (b)
};

// The weights after one model step (pure): from `current` toward 1 / seconds_per_sample.
// `first`: all the way (still bounded by max_factor).
std::vector<double> next_weights(const std::vector<double>& current, const std::vector<double>& seconds_per_sample,
                                 bool first, const BalanceSettings& settings = {});

class BatchBalancer {
 public:
  // A collective (it gathers the ranks' devices, for describe()). `weights`: one per rank (any
  // scale), the starting split; `automatic`: rebalance() moves them, else they stay. Throws
  // InvalidArgumentError for weights of the wrong count, or those split_global_batch refuses,
  // and on every rank when the ranks were given different splits, global batches or
  // `automatic` (the message names a rank that differs from rank 0, and how).
  BatchBalancer(ProcessGroup& group, int64_t global_batch, std::vector<double> weights, bool automatic,
                c10::Device device, BalanceSettings settings = {});

  int64_t global_batch() const { return global_batch_; }
  // The split the balancer stands at (reports, checkpoints, describe()).
  const std::vector<int64_t>& split() const { return split_; }
  // The split the next step trains on: split(), or on every other step of a probe's trial
  // (2.) the trial's. Every rank gets the same, as long as every rank records the same steps.
  const std::vector<int64_t>& next_step_split() const {
    return trial_ && trial_steps_ % 2 == 1 ? trial_split_ : split_;
  }
  const std::vector<double>& weights() const { return weights_; }
  bool automatic() const { return automatic_; }
  bool settled() const { return probe_size_ == 0; }
  // Whether rank `rank` sits out (3., or given weight 0), and the ranks that train, in
  // increasing order.
  bool sits_out(int rank) const { return sitting_out_[static_cast<size_t>(rank)]; }
  std::vector<int> training_ranks() const;
  bool anyone_sits_out() const;
  // The slowest rank's mean step wall seconds over the last decision's interval (0 before one):
  // how long a rank that sits out may expect each step of the others to take, at most.
  double last_step_seconds() const { return last_step_seconds_; }

  // Local: one training step's compute seconds (waits excluded) and wall seconds, on `samples`,
  // trained on next_step_split(). A rank that sits out records (0, 0, 0) for each step the
  // others train, so that every rank counts the same steps.
  void record_step(double compute_seconds, double step_seconds, int64_t samples);
  // Whether to call rebalance() after the run's `steps_run`-th step: every `interval` steps
  // after the warm-up until settled (with probe 0, for the whole run), none while a rank sits out. The same on every
  // rank (it counts steps only).
  bool due_after_step(int64_t steps_run) const;
  // Collective (see above), except when fewer than `interval` steps were measured since the
  // last decision: then it returns false at once on every rank and keeps measuring. Returns
  // true when split() changed (a trial starting is not a change); false without `automatic`.
  bool rebalance(ProcessGroup& group);

  // "rank 0 cpu 48/64, rank 1 cpu 16/64 (measured 3.1x)": the split, and after a rebalance the
  // compute speed of the fastest rank over the slowest's; a rank that sits out shows as "sits
  // out", and the decision that benched it adds why ("; rank 1 sits out: ...").
  std::string describe() const;

 private:
  bool apply(const std::vector<int64_t>& split);
  // 2.: starts the next trial from split(), moving samples from `slowest` to `fastest` (per
  // sample) or back, per probe_direction_; settles when there is nothing left to move.
  int64_t first_probe_size() const;  // of `global_batch_`; 0 without probes
  void start_trial(size_t slowest, size_t fastest);
  // 3.: benches one rank when the fit says so; `compute`/`samples`: this interval's per-step
  // means per rank. Returns whether it did.
  // `balanced_throughput`: the job's samples per second at a split that follows the measured
  // speeds (0: not yet at one; only test (a) then).
  bool consider_sitting_out(const std::vector<double>& compute, const std::vector<double>& samples,
                            double balanced_throughput);

  const int64_t global_batch_;
  const bool automatic_;
  const BalanceSettings settings_;
  std::vector<double> weights_;
  std::vector<int64_t> split_;
  std::vector<std::string> devices_;  // per rank
  double measured_ratio_ = 0;         // 0: not measured yet
  int model_steps_ = 0;
  bool model_content_ = false;          // the model's last step did not move the split
  int64_t probe_size_ = 0;              // samples per probe; 0: settled
  bool trial_ = false;                  // a probe is on trial, on every other step
  std::vector<int64_t> trial_split_;    // its split
  int64_t trial_steps_ = 0;             // steps recorded since it started (odd ones: the trial's)
  int probe_direction_ = 1;             // +1: from the slowest rank per sample to the fastest
  bool tried_other_direction_ = false;  // at this probe size
  bool kept_at_this_size_ = false;      // a probe of this size paid
  int64_t steps_recorded_ = 0;
  int64_t steps_measured_ = 0;                     // since the last decision, after the warm-up
  double compute_seconds_ = 0, step_seconds_ = 0;  // since the last rebalance, after the warm-up
  int64_t samples_ = 0;
  double trial_step_seconds_ = 0;  // the part of step_seconds_ and samples_ on the trial's steps
  int64_t trial_samples_ = 0;
  std::vector<bool> sitting_out_;         // per rank
  std::vector<double> previous_compute_;  // per rank: the last interval's mean step compute...
  std::vector<double> previous_samples_;  // ...and samples per step (0: none yet)
  double last_step_seconds_ = 0;
  std::string sit_out_reason_;  // for describe(), after the decision that made it
};

}  // namespace ringtorch
