#include "runtime/training/batch_balancer.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/batch_split.h"
#include "base/error.h"

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
  probe_size_ = automatic_ ? std::max<int64_t>(1, std::llround(settings_.probe * global_batch_)) : 0;
  at::Tensor mine = at::tensor(
      {device.is_cuda() ? int64_t{1} : int64_t{0}, int64_t{device.has_index() ? device.index() : 0}}, at::kLong);
  at::Tensor all = at::empty({2 * group.size()}, at::kLong);
  group.allgather(mine, all);
  const int64_t* v = all.data_ptr<int64_t>();
  for (int r = 0; r < group.size(); ++r) devices_.push_back(v[2 * r] ? str_cat("cuda:", v[2 * r + 1]) : "cpu");
}

void BatchBalancer::record_step(double compute_seconds, double step_seconds, int64_t samples) {
  ++steps_recorded_;
  if (steps_recorded_ <= settings_.warmup_steps) return;
  ++steps_measured_;
  compute_seconds_ += std::max(compute_seconds, 0.0);
  step_seconds_ += std::max(step_seconds, 0.0);
  samples_ += samples;
}

bool BatchBalancer::due_after_step(int64_t steps_run) const {
  const int64_t measured = steps_run - settings_.warmup_steps;
  return automatic_ && !settled() && measured > 0 && measured % settings_.interval == 0;
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
  steps_measured_ = 0;
  const int world = group.size();
  // Compute seconds, step seconds and samples of every rank, in one all-gather.
  at::Tensor mine = at::tensor({compute_seconds_, step_seconds_, static_cast<double>(samples_)}, at::kDouble);
  at::Tensor all = at::empty({3 * world}, at::kDouble);
  group.allgather(mine, all);
  compute_seconds_ = step_seconds_ = 0;
  samples_ = 0;
  const double* v = all.data_ptr<double>();
  std::vector<double> seconds_per_sample, waited;
  double samples = 0, step_seconds = 0;
  for (int r = 0; r < world; ++r) {
    if (v[3 * r + 2] <= 0 || v[3 * r] <= 0) return false;  // a rank measured nothing: keep the split
    seconds_per_sample.push_back(v[3 * r] / v[3 * r + 2]);
    waited.push_back(v[3 * r + 1] - v[3 * r]);
    samples += v[3 * r + 2];
    step_seconds = std::max(step_seconds, v[3 * r + 1]);
  }
  const double throughput = samples / step_seconds;
  const auto [fastest, slowest] = std::minmax_element(seconds_per_sample.begin(), seconds_per_sample.end());
  measured_ratio_ = *slowest / *fastest;

  if (probing_) {  // the last decision was a probe: keep it if it paid
    probing_ = false;
    if (throughput > throughput_before_probe_ * (1 + settings_.probe_gain)) {
      kept_at_this_size_ = true;
      return false;
    }
    // Back. Then: after moves that paid, a smaller one the same way; before any, the other
    // way at the same size; the other way tried too, a smaller one.
    if (kept_at_this_size_ || tried_other_direction_) {
      probe_size_ /= 2;
      if (tried_other_direction_) probe_direction_ = 1;
      tried_other_direction_ = kept_at_this_size_ = false;
    } else {
      tried_other_direction_ = true;
      probe_direction_ = -probe_direction_;
    }
    return apply(before_probe_);
  }
  // 1. Model: until it is content; once settled, again at each call (an epoch end), for drift.
  if (!model_content_ || settled()) {
    const std::vector<double> weights = next_weights(weights_, seconds_per_sample, model_steps_++ == 0, settings_);
    const std::vector<int64_t> split = split_global_batch(global_batch_, weights);
    const int64_t threshold = std::max<int64_t>(1, std::llround(settings_.min_change * global_batch_));
    bool moved = false;
    for (size_t r = 0; r < split.size(); ++r) moved = moved || std::llabs(split[r] - split_[r]) >= threshold;
    if (moved) {
      weights_ = weights;
      split_ = split;
      model_content_ = false;
      if (settled()) probe_size_ = std::max<int64_t>(1, std::llround(settings_.probe * global_batch_) / 2);
      return true;
    }
    model_content_ = true;
  }
  // 2. Probe: a few samples from the rank slowest per sample to the fastest (direction +1), or
  // back the other way (-1) after that did not pay.
  if (settled() || world < 2) return false;
  auto from = static_cast<size_t>(slowest - seconds_per_sample.begin());
  auto to = static_cast<size_t>(fastest - seconds_per_sample.begin());
  if (probe_direction_ < 0) std::swap(from, to);
  const int64_t size = std::min(probe_size_, split_[from] - 1);
  if (from == to || size < 1) {
    probe_size_ = 0;
    return false;
  }
  before_probe_ = split_;
  throughput_before_probe_ = throughput;
  std::vector<int64_t> probe = split_;
  probe[from] -= size;
  probe[to] += size;
  probing_ = true;
  return apply(probe);
}

std::string BatchBalancer::describe() const {
  std::string text;
  for (size_t r = 0; r < split_.size(); ++r) {
    text += str_cat(r ? ", " : "", "rank ", r, " ", devices_[r], " ", split_[r], "/", global_batch_);
  }
  if (measured_ratio_ > 0) {
    char ratio[32];
    std::snprintf(ratio, sizeof(ratio), "%.1f", measured_ratio_);
    text += str_cat(" (measured ", ratio, "x)");
  }
  return text;
}

}  // namespace ringtorch
