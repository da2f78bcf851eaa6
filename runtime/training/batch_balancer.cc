#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <ringtorch/batch_balancer.h>
#include <ringtorch/batch_split.h>
#include <ringtorch/error.h>

namespace ringtorch {

std::vector<double> next_weights(const std::vector<double>& current, const std::vector<double>& seconds_per_sample,
                                 bool first, const BalanceSettings& s) {
  double current_total = 0, speed_total = 0;
  for (double w : current) current_total += w;
  for (double t : seconds_per_sample) speed_total += 1.0 / t;
  std::vector<double> next(current.size());
  double next_total = 0;
  for (size_t r = 0; r < current.size(); ++r) {
    const double now = current[r] / current_total;
    const double measured = (1.0 / seconds_per_sample[r]) / speed_total;
    double w = first ? measured : now + s.smoothing * (measured - now);
    w = std::clamp(w, now / s.max_factor, now * s.max_factor);
    next[r] = w;
    next_total += w;
  }
  for (double& w : next) w /= next_total;
  return next;
}

BatchBalancer::BatchBalancer(ProcessGroup& group, int64_t global_batch, std::vector<double> weights, bool automatic,
                             c10::Device device, BalanceSettings settings)
    : global_batch_(global_batch), automatic_(automatic), settings_(settings), weights_(std::move(weights)) {
  if (weights_.size() != static_cast<size_t>(group.size())) {
    throw InvalidArgumentError(
        str_cat("balance: ", weights_.size(), " weights for ", group.size(), " ranks; give one weight per rank"));
  }
  split_ = split_global_batch(global_batch_, weights_);
  for (double w : weights_) sitting_out_.push_back(w == 0);
  previous_compute_.assign(weights_.size(), 0);
  previous_samples_.assign(weights_.size(), 0);
  probe_size_ = automatic_ ? first_probe_size() : 0;
  // Per rank: its device, then what it was told to split (whether automatically, the global
  // batch, its split of it), which must be the same everywhere: nodes started with command
  // lines of their own could differ, and would then deal overlapping samples without a word.
  const int world = group.size();
  const int per_rank = 4 + world;
  std::vector<int64_t> mine{device.is_cuda() ? int64_t{1} : int64_t{0},
                            int64_t{device.has_index() ? device.index() : 0}, automatic_ ? int64_t{1} : int64_t{0},
                            global_batch_};
  mine.insert(mine.end(), split_.begin(), split_.end());
  at::Tensor all = at::empty({per_rank * world}, at::kLong);
  group.allgather(at::tensor(mine, at::kLong), all);
  const int64_t* v = all.data_ptr<int64_t>();
  auto told = [&](int r) {
    const int64_t* of = v + per_rank * r;
    std::string split;
    for (int q = 0; q < world; ++q) split += str_cat(q ? "/" : "", of[4 + q]);
    return str_cat("to split the global batch of ", of[3], " as ", split, of[2] ? ", then automatically" : "");
  };
  for (int r = 1; r < world; ++r) {
    if (!std::equal(v + per_rank * r + 2, v + per_rank * (r + 1), v + 2)) {
      throw InvalidArgumentError(str_cat("balance: rank ", r, " was told ", told(r), ", rank 0 ", told(0),
                                         "; give every rank the same weights and global batch (ringtrain: the same ",
                                         "--balance, and --global-batch or --batch-size)"));
    }
  }
  for (int r = 0; r < world; ++r) {
    devices_.push_back(v[per_rank * r] ? str_cat("cuda:", v[per_rank * r + 1]) : "cpu");
  }
}

void BatchBalancer::record_step(double compute_seconds, double step_seconds, int64_t samples) {
  ++steps_recorded_;
  const bool on_trial = trial_ && trial_steps_++ % 2 == 1;  // as next_step_split() said before it
  if (steps_recorded_ <= settings_.warmup_steps) return;
  ++steps_measured_;
  compute_seconds_ += std::max(compute_seconds, 0.0);
  step_seconds_ += std::max(step_seconds, 0.0);
  samples_ += samples;
  if (on_trial) {
    trial_step_seconds_ += std::max(step_seconds, 0.0);
    trial_samples_ += samples;
  }
}

int64_t BatchBalancer::first_probe_size() const {
  return settings_.probe > 0 ? std::max<int64_t>(1, std::llround(settings_.probe * global_batch_)) : 0;
}

bool BatchBalancer::due_after_step(int64_t steps_run) const {
  const int64_t measured = steps_run - settings_.warmup_steps;
  // Without probes (probe 0) the model decides at every interval, for the whole run.
  return automatic_ && (!settled() || settings_.probe <= 0) && !anyone_sits_out() && measured > 0 &&
         measured % settings_.interval == 0;
}

std::vector<int> BatchBalancer::training_ranks() const {
  std::vector<int> ranks;
  for (size_t r = 0; r < sitting_out_.size(); ++r) {
    if (!sitting_out_[r]) ranks.push_back(static_cast<int>(r));
  }
  return ranks;
}

bool BatchBalancer::anyone_sits_out() const {
  return std::find(sitting_out_.begin(), sitting_out_.end(), true) != sitting_out_.end();
}

bool BatchBalancer::consider_sitting_out(const std::vector<double>& compute, const std::vector<double>& samples,
                                         double balanced_throughput) {
  const std::vector<int> training = training_ranks();
  if (settings_.sit_out_margin <= 0 || training.size() < 2) return false;
  // What the others would train without rank `excluded`, split by their speed: the sum of their
  // measured rates (samples per second of compute; linear in the batch, so their own fixed
  // costs make it an underestimate, which errs toward keeping the rank; their collectives are
  // left out, which errs the other way when more than one of them remains).
  auto others_rate = [&](int excluded) {
    double rate = 0;
    for (int q : training) {
      if (q != excluded) rate += samples[q] / compute[q];
    }
    return rate;
  };
  int bench = -1;
  double best = 0;  // how many times faster the others would be without `bench`, by its test
  char why[160] = "";
  for (int r : training) {
    const double others = others_rate(r);
    // (a) Its step at one sample, from the fit through this decision's and the last one's
    // points, against the others' time for all B.
    const double db = samples[r] - previous_samples_[r];
    if (previous_samples_[r] > 0 && std::abs(db) >= 1) {
      const double per_sample = std::max(0.0, (compute[r] - previous_compute_[r]) / db);
      const double minimum = std::max(0.0, compute[r] - per_sample * samples[r]) + per_sample;
      const double others_step = static_cast<double>(global_batch_) / others;
      if (minimum > settings_.sit_out_margin * others_step && minimum / others_step > best) {
        bench = r;
        best = minimum / others_step;
        std::snprintf(why, sizeof(why), "its step takes %.1f ms even at 1 sample, the others %.1f ms for all %lld",
                      minimum * 1e3, others_step * 1e3, static_cast<long long>(global_batch_));
      }
    }
    // (b) At a split that follows measured speed: the others alone against the job's measured
    // throughput with it (it costs the others more waiting than its samples are worth). Only
    // when one rank would remain: several would still pay their own collectives, which their
    // compute rates leave out, and (b) would then bench ranks that merely share the wait.
    if (balanced_throughput > 0 && training.size() == 2 &&
        others > (1 + settings_.sit_out_gain) * balanced_throughput && others / balanced_throughput > best) {
      bench = r;
      best = others / balanced_throughput;
      std::snprintf(why, sizeof(why), "the others alone would train %.0f samples/s, the job with it %.0f", others,
                    balanced_throughput);
    }
  }
  if (bench < 0) return false;
  sitting_out_[static_cast<size_t>(bench)] = true;
  weights_[static_cast<size_t>(bench)] = 0;
  double total = 0;
  for (double w : weights_) total += w;
  for (double& w : weights_) w /= total;
  split_ = split_global_batch(global_batch_, weights_);
  // The fit's last points were measured with the benched rank in the group: start afresh.
  std::fill(previous_samples_.begin(), previous_samples_.end(), 0.0);
  // The others start over: the model all the way, then probes among them.
  model_steps_ = 0;
  model_content_ = trial_ = tried_other_direction_ = kept_at_this_size_ = false;
  probe_direction_ = 1;
  probe_size_ = training.size() > 2 ? first_probe_size() : 0;
  sit_out_reason_ = str_cat("; rank ", bench, " sits out: ", why);
  return true;
}

bool BatchBalancer::apply(const std::vector<int64_t>& split) {
  if (split == split_) return false;
  split_ = split;
  double total = 0;
  for (int64_t b : split_) total += static_cast<double>(b);
  for (size_t r = 0; r < split_.size(); ++r) weights_[r] = static_cast<double>(split_[r]) / total;
  return true;
}

bool BatchBalancer::rebalance(ProcessGroup& group) {
  // Too few steps measured since the last decision to judge: keep measuring. Every rank counts
  // the same steps, so every rank skips the all-gather together.
  if (!automatic_ || steps_measured_ < settings_.interval) return false;
  const auto steps = static_cast<double>(steps_measured_);
  steps_measured_ = 0;
  sit_out_reason_.clear();
  const int world = group.size();
  // Compute seconds, step seconds and samples of every rank, then the step seconds and samples
  // of the trial's steps among them, in one all-gather.
  constexpr int kValues = 5;
  at::Tensor mine = at::tensor({compute_seconds_, step_seconds_, static_cast<double>(samples_), trial_step_seconds_,
                                static_cast<double>(trial_samples_)},
                               at::kDouble);
  at::Tensor all = at::empty({kValues * world}, at::kDouble);
  group.allgather(mine, all);
  compute_seconds_ = step_seconds_ = trial_step_seconds_ = 0;
  samples_ = trial_samples_ = 0;
  const double* v = all.data_ptr<double>();
  // Per rank (those that sit out keep 0): compute seconds per sample, and per-step means.
  std::vector<double> seconds_per_sample(static_cast<size_t>(world), 0), compute(seconds_per_sample),
      samples_per_step(seconds_per_sample);
  const std::vector<int> training = training_ranks();
  // Step seconds: the slowest rank's (every step waits for it). A trial's steps and the others
  // are measured in the same way, apart.
  double samples = 0, step_seconds = 0, trial_samples = 0, trial_step_seconds = 0, other_step_seconds = 0;
  for (int r : training) {
    const double* mine_of = v + kValues * r;
    if (mine_of[2] <= 0 || mine_of[0] <= 0) {  // a rank measured nothing: keep the split
      trial_ = false;
      return false;
    }
    seconds_per_sample[r] = mine_of[0] / mine_of[2];
    compute[r] = mine_of[0] / steps;
    samples_per_step[r] = mine_of[2] / steps;
    samples += mine_of[2];
    step_seconds = std::max(step_seconds, mine_of[1]);
    trial_samples += mine_of[4];
    trial_step_seconds = std::max(trial_step_seconds, mine_of[3]);
    other_step_seconds = std::max(other_step_seconds, mine_of[1] - mine_of[3]);
  }
  last_step_seconds_ = step_seconds / steps;
  const double throughput = samples / step_seconds;
  // On trial: the throughput of the trial's steps and of the others (0 when one kind is missing).
  const double trial_throughput = trial_step_seconds > 0 ? trial_samples / trial_step_seconds : 0;
  const double other_throughput = other_step_seconds > 0 ? (samples - trial_samples) / other_step_seconds : 0;
  size_t fastest = static_cast<size_t>(training.front()), slowest = fastest;
  for (int r : training) {
    if (seconds_per_sample[r] < seconds_per_sample[fastest]) fastest = static_cast<size_t>(r);
    if (seconds_per_sample[r] > seconds_per_sample[slowest]) slowest = static_cast<size_t>(r);
  }
  measured_ratio_ = seconds_per_sample[slowest] / seconds_per_sample[fastest];
  // 3. first: a rank that only slows the job sits out, whatever was on trial. The throughput
  // test (b) waits for a split that follows the measured speeds (the model content: this
  // interval ran on its split, or on it and a trial from it: the better of the two).
  const double balanced = !model_content_ ? 0 : trial_ ? std::max(trial_throughput, other_throughput) : throughput;
  if (consider_sitting_out(compute, samples_per_step, balanced)) return true;
  previous_compute_ = compute;
  previous_samples_ = samples_per_step;
  if (training.size() < 2) return false;

  if (trial_) {  // keep the trial's split if its steps paid, then start the next trial
    trial_ = false;
    bool changed = false;
    if (trial_throughput > other_throughput * (1 + settings_.probe_gain) && other_throughput > 0) {
      kept_at_this_size_ = true;
      changed = apply(trial_split_);
    } else if (kept_at_this_size_ || tried_other_direction_) {
      // After moves that paid, a smaller one the same way; both ways tried and none paid, a
      // smaller one from the first way.
      probe_size_ /= 2;
      if (!kept_at_this_size_) probe_direction_ = 1;
      tried_other_direction_ = kept_at_this_size_ = false;
    } else {  // before any paid: the other way at the same size
      tried_other_direction_ = true;
      probe_direction_ = -probe_direction_;
    }
    start_trial(slowest, fastest);
    return changed;
  }
  // 1. Model: until it is content; once settled, again at each call (an epoch end), for drift.
  if (!model_content_ || settled()) {
    std::vector<double> current, measured;  // of the ranks that train
    for (int r : training) {
      current.push_back(weights_[r]);
      measured.push_back(seconds_per_sample[r]);
    }
    const std::vector<double> moved_weights = next_weights(current, measured, model_steps_++ == 0, settings_);
    std::vector<double> weights(weights_.size(), 0.0);
    for (size_t i = 0; i < training.size(); ++i) weights[training[i]] = moved_weights[i];
    const std::vector<int64_t> split = split_global_batch(global_batch_, weights);
    const int64_t threshold = std::max<int64_t>(1, std::llround(settings_.min_change * global_batch_));
    bool moved = false;
    for (size_t r = 0; r < split.size(); ++r) moved = moved || std::llabs(split[r] - split_[r]) >= threshold;
    if (moved) {
      weights_ = weights;
      split_ = split;
      model_content_ = false;
      if (settled() && settings_.probe > 0)
        probe_size_ = std::max<int64_t>(1, std::llround(settings_.probe * global_batch_) / 2);
      return true;
    }
    model_content_ = true;
  }
  start_trial(slowest, fastest);
  return false;
}

void BatchBalancer::start_trial(size_t slowest, size_t fastest) {
  // 2. A few samples from the rank slowest per sample to the fastest (direction +1), or back
  // the other way (-1) after that did not pay.
  if (settled()) return;
  size_t from = slowest, to = fastest;
  if (probe_direction_ < 0) std::swap(from, to);
  const int64_t size = std::min(probe_size_, split_[from] - 1);
  if (from == to || size < 1) {
    probe_size_ = 0;
    return;
  }
  trial_split_ = split_;
  trial_split_[from] -= size;
  trial_split_[to] += size;
  trial_ = true;
  trial_steps_ = 0;
}

std::string BatchBalancer::describe() const {
  std::string text;
  for (size_t r = 0; r < split_.size(); ++r) {
    text += str_cat(r ? ", " : "", "rank ", r, " ", devices_[r], " ");
    text += sitting_out_[r] ? std::string("sits out") : str_cat(split_[r], "/", global_batch_);
  }
  if (measured_ratio_ > 0) {
    char ratio[32];
    std::snprintf(ratio, sizeof(ratio), "%.1f", measured_ratio_);
    text += str_cat(" (measured ", ratio, "x", sit_out_reason_, ")");
  }
  return text;
}

}  // namespace ringtorch
