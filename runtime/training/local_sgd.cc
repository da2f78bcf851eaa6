#include <torch/torch.h>

#include <chrono>
#include <cmath>

#include <ringtorch/error.h>
#include <ringtorch/local_sgd.h>
#include <ringtorch/str_cat.h>
#include <ringtorch/timeline.h>

#include "runtime/training/optimizer_state.h"

namespace ringtorch {
namespace {

// The dtype the outer gradient is summed in: the parameters' when they share one, else float32.
at::ScalarType common_dtype(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) return at::kFloat;
  const at::ScalarType first = tensors.front().scalar_type();
  for (const auto& t : tensors) {
    if (t.scalar_type() != first) return at::kFloat;
  }
  return first;
}

at::Tensor flat_cat(std::vector<at::Tensor> pieces, const at::TensorOptions& options) {
  if (pieces.empty()) return at::empty({0}, options);
  for (auto& p : pieces) p = p.reshape({-1}).to(options);
  return at::cat(pieces);
}

// Every value of an optimizer_state_dict() in a fixed order (parameters, then each one's fields
// as the kind writes them): tensors, and integer steps as one element each.
template <typename Visit>
void for_each_state_value(c10::impl::GenericDict parameters, Visit visit) {
  for (const auto& parameter : parameters) {
    c10::impl::GenericDict fields = parameter.value().toGenericDict();
    for (const auto& field : fields) visit(fields, field.key(), field.value());
  }
}

c10::impl::GenericDict state_parameters(const c10::IValue& state) {
  return state.toGenericDict().at("parameters").toGenericDict();
}

// Whether the outer step can take apply_outer_step_floats(): float32 CPU tensors, contiguous.
bool cpu_floats(const at::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous();
}

// The outer step for one float32 CPU parameter in one pass over its elements, where the tensor
// operations below made about fifteen with temporaries (measured: docs/benchmarks.md, "Local SGD
// on slow links and unequal ranks"). Element by element, in the tensor path's order: the
// averaged change c = sum / total; with momentum m, momentum = m momentum + c (c itself at the
// first step) and the step c + m momentum (Nesterov) or momentum; anchor -= lr step (when
// `move_anchor`: a step some rank trained for); then the parameter keeps this rank's change
// since `base` (`keep_change`) or becomes the anchor, and base becomes the anchor.
template <typename Sum>
void apply_outer_step_floats(const Sum* sum, float total, float m, bool first_momentum, bool nesterov, float lr,
                             bool move_anchor, bool keep_change, float* momentum, float* anchor, float* base,
                             float* parameter, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    if (move_anchor) {
      const float change = static_cast<float>(sum[k]) / total;
      float step = change;
      if (m > 0) {
        momentum[k] = first_momentum ? change : momentum[k] * m + change;
        step = nesterov ? change + m * momentum[k] : momentum[k];
      }
      anchor[k] = anchor[k] - lr * step;
    }
    parameter[k] = keep_change ? parameter[k] + (anchor[k] - base[k]) : anchor[k];
    base[k] = anchor[k];
  }
}

}  // namespace

at::Tensor optimizer_state_vector(const torch::optim::Optimizer& optimizer) {
  const c10::IValue state = optimizer_state_dict(optimizer);
  std::vector<at::Tensor> pieces;
  for_each_state_value(state_parameters(state), [&](auto&, const c10::IValue&, const c10::IValue& value) {
    if (value.isTensor()) {
      pieces.push_back(value.toTensor().reshape({-1}));
    } else if (value.isInt()) {
      pieces.push_back(at::full({1}, static_cast<double>(value.toInt()), at::kDouble));
    }
  });
  return flat_cat(std::move(pieces), at::TensorOptions().dtype(at::kDouble));
}

void load_optimizer_state_vector(torch::optim::Optimizer& optimizer, const at::Tensor& vector) {
  const c10::IValue state = optimizer_state_dict(optimizer);
  const at::Tensor flat = vector.reshape({-1});
  int64_t offset = 0;
  for_each_state_value(
      state_parameters(state), [&](c10::impl::GenericDict& fields, const c10::IValue& key, const c10::IValue& value) {
        const int64_t n = value.isTensor() ? value.toTensor().numel() : value.isInt() ? 1 : 0;
        if (offset + n > flat.numel()) {
          offset += n;
          return;
        }
        if (value.isTensor()) {
          const at::Tensor& saved = value.toTensor();
          fields.insert_or_assign(key, flat.narrow(0, offset, n).view(saved.sizes()).to(saved.scalar_type()).clone());
        } else if (value.isInt()) {
          fields.insert_or_assign(key, static_cast<int64_t>(flat[offset].item<double>()));
        }
        offset += n;
      });
  if (offset != flat.numel()) {
    throw InvalidArgumentError(str_cat("an optimizer state vector of ", flat.numel(),
                                       " values for an optimizer whose state holds ", offset,
                                       " (saved for another model, optimizer, or before its first step?)"));
  }
  optimizer.state() = parse_optimizer_state(optimizer, state, "(state vector)");
}

LocalSgd::LocalSgd(torch::nn::Module& module, std::shared_ptr<ProcessGroup> group, LocalSgdOptions options)
    : options_(options), group_(std::move(group)) {
  if (!(options_.outer_lr > 0) || !std::isfinite(options_.outer_lr))
    throw InvalidArgumentError(str_cat("LocalSgd: outer_lr ", options_.outer_lr, " must be positive and finite"));
  if (!(options_.outer_momentum >= 0 && options_.outer_momentum < 1))
    throw InvalidArgumentError(str_cat("LocalSgd: outer_momentum ", options_.outer_momentum, " must be in [0, 1)"));
  if (options_.overlap_steps < 0)
    throw InvalidArgumentError(str_cat("LocalSgd: overlap_steps ", options_.overlap_steps, " must not be negative"));
  for (const auto& p : module.parameters()) parameters_.push_back(p);
  for (const auto& b : module.buffers()) (b.is_floating_point() ? buffers_ : counters_).push_back(b);
  reset_anchor();
}

void LocalSgd::record_inner_step(int64_t samples) {
  ++stats_.inner_steps;
  ++stats_.inner_steps_in_period;
  stats_.samples_in_period += samples;
  if (pending_ && ++steps_since_start_ >= options_.overlap_steps) {
    TimelineSpan span("outer step applied", "train");
    finish_outer_step();
  }
}

void LocalSgd::set_group(std::shared_ptr<ProcessGroup> group) { group_ = std::move(group); }

void LocalSgd::reset_anchor() {
  torch::NoGradGuard no_grad;
  anchor_.clear();
  base_.clear();
  for (const auto& p : parameters_) {
    anchor_.push_back(p.detach().clone());
    base_.push_back(p.detach().clone());
  }
  pending_.reset();
  stats_.inner_steps_in_period = 0;
  stats_.samples_in_period = 0;
}

// Starts the all-reduce of Σ w_r (base - parameters_r), then the floating buffers' Σ w_r b_r
// and Σ w_r, in one flat tensor (two with a bf16 outer gradient: its own, and the rest at full
// precision), and the integer buffers' maximum. The parameters now become the base of the next
// period's change.
void LocalSgd::start_outer_step() {
  torch::NoGradGuard no_grad;
  const double weight = static_cast<double>(stats_.samples_in_period);
  const at::TensorOptions options = at::TensorOptions()
                                        .dtype(common_dtype(parameters_))
                                        .device(parameters_.empty() ? at::kCPU : parameters_[0].device());
  std::vector<at::Tensor> rest;
  for (const auto& b : buffers_) rest.push_back(b.detach() * weight);
  rest.push_back(at::full({1}, weight, options));
  bool floats = options.device().is_cpu();
  int64_t elements = 0;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    floats = floats && cpu_floats(parameters_[i]) && cpu_floats(base_[i]);  // both written through pointers
    elements += parameters_[i].numel();
  }
  std::vector<at::Tensor> changes;
  if (floats) {  // w (base - parameters) straight into the flat tensor sent, one pass (apply_outer_step_floats)
    at::Tensor flat = at::empty({elements}, options.dtype(options_.bf16_outer_gradient ? at::kBFloat16 : at::kFloat));
    const auto fill = [&](auto* out) {
      const float w = static_cast<float>(weight);
      for (size_t i = 0; i < parameters_.size(); ++i) {
        const float* p = parameters_[i].data_ptr<float>();
        float* base = base_[i].data_ptr<float>();
        for (int64_t k = 0, n = parameters_[i].numel(); k < n; ++k) {
          out[k] = (base[k] - p[k]) * w;
          base[k] = p[k];  // the base of the next period's change
        }
        out += parameters_[i].numel();
      }
    };
    if (options_.bf16_outer_gradient) {
      fill(flat.data_ptr<at::BFloat16>());
    } else {
      fill(flat.data_ptr<float>());
    }
    changes.push_back(flat);
  } else {
    for (size_t i = 0; i < parameters_.size(); ++i) changes.push_back((base_[i] - parameters_[i].detach()) * weight);
  }
  auto pending = std::make_unique<Pending>();
  if (options_.bf16_outer_gradient) {
    pending->change = floats ? changes.front() : flat_cat(changes, options.dtype(at::kBFloat16));
    pending->rest = flat_cat(rest, options);
    pending->works.push_back(group_->allreduce_async(pending->change, ReduceOp::kSum));
    pending->works.push_back(group_->allreduce_async(pending->rest, ReduceOp::kSum));
    elements_per_outer_step_ = pending->change.numel() + pending->rest.numel();
  } else {
    changes.insert(changes.end(), rest.begin(), rest.end());
    pending->rest = flat_cat(changes, options);
    pending->works.push_back(group_->allreduce_async(pending->rest, ReduceOp::kSum));
    elements_per_outer_step_ = pending->rest.numel();
  }
  if (!counters_.empty()) {
    pending->counts = flat_cat(counters_, counters_[0].options().dtype(at::kLong));
    pending->works.push_back(group_->allreduce_async(pending->counts, ReduceOp::kMax));
    elements_per_outer_step_ += pending->counts.numel();
  }
  if (!floats) {
    for (size_t i = 0; i < parameters_.size(); ++i) base_[i].copy_(parameters_[i]);
  }
  pending_ = std::move(pending);
  steps_since_start_ = 0;
  stats_.inner_steps_in_period = 0;
  stats_.samples_in_period = 0;
  ++stats_.outer_steps;
}

// Waits for the outer step in flight and applies it: the anchor moves by the outer optimizer's
// step, buffers take the average, and the parameters move with the anchor, keeping the change
// this rank made since the step started (none without overlap: then they are the anchor itself).
void LocalSgd::finish_outer_step() {
  torch::NoGradGuard no_grad;
  std::unique_ptr<Pending> pending = std::move(pending_);
  const auto waiting = std::chrono::steady_clock::now();
  for (auto& work : pending->works) work->wait();
  stats_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - waiting).count();
  const at::Tensor& rest = pending->rest;
  // The outer gradient's sums come first: in their own tensor with bf16, else at the start of `rest`.
  const at::Tensor& changes = pending->change.defined() ? pending->change : rest;
  if (pending->counts.defined()) {
    int64_t offset = 0;
    for (auto& c : counters_) {
      c.copy_(pending->counts.narrow(0, offset, c.numel()).view_as(c));
      offset += c.numel();
    }
  }
  const double total_weight = rest[rest.numel() - 1].item<double>();
  const bool move_anchor = total_weight > 0;  // else no rank trained: the anchor stays
  const bool trained_since = stats_.inner_steps_in_period > 0;
  const double m = options_.outer_momentum;
  const bool first_momentum = momentum_.empty();
  bool floats =
      changes.device().is_cpu() && (changes.scalar_type() == at::kFloat || changes.scalar_type() == at::kBFloat16);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    floats = floats && cpu_floats(parameters_[i]) && cpu_floats(anchor_[i]) && cpu_floats(base_[i]) &&
             (first_momentum || cpu_floats(momentum_[i]));  // a loaded momentum keeps its saved strides
  }
  int64_t offset = 0;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const at::Tensor& p = parameters_[i];
    if (m > 0 && first_momentum && move_anchor) momentum_.push_back(at::empty_like(p));
    if (floats) {
      float* momentum = m > 0 && move_anchor ? momentum_[i].data_ptr<float>() : nullptr;
      const auto apply = [&](const auto* sum) {
        apply_outer_step_floats(sum + offset, static_cast<float>(total_weight), static_cast<float>(m), first_momentum,
                                options_.nesterov, static_cast<float>(options_.outer_lr), move_anchor, trained_since,
                                momentum, anchor_[i].data_ptr<float>(), base_[i].data_ptr<float>(), p.data_ptr<float>(),
                                p.numel());
      };
      if (changes.scalar_type() == at::kBFloat16) {
        apply(changes.data_ptr<at::BFloat16>());
      } else {
        apply(changes.data_ptr<float>());
      }
      offset += p.numel();
      continue;
    }
    if (move_anchor) {
      at::Tensor change = changes.narrow(0, offset, p.numel()).view(p.sizes()).to(p.scalar_type()) / total_weight;
      at::Tensor step = change;
      if (m > 0) {
        if (first_momentum) {
          momentum_[i].copy_(change);
        } else {
          momentum_[i].mul_(m).add_(change);
        }
        step = options_.nesterov ? change + m * momentum_[i] : momentum_[i];
      }
      anchor_[i].sub_(step, options_.outer_lr);
    }
    offset += p.numel();
    if (trained_since) {
      p.add_(anchor_[i] - base_[i]);
    } else {
      p.copy_(anchor_[i]);  // exactly: the replicas are bitwise equal
    }
    base_[i].copy_(anchor_[i]);
  }
  if (move_anchor) {
    int64_t at = pending->change.defined() ? 0 : offset;  // the buffers follow the outer gradient in `rest`
    for (auto& b : buffers_) {
      b.copy_(rest.narrow(0, at, b.numel()).view(b.sizes()) / total_weight);
      at += b.numel();
    }
  }
}

void LocalSgd::outer_step() {
  TimelineSpan span("outer step", "train");
  if (pending_) finish_outer_step();
  start_outer_step();
  if (options_.overlap_steps <= 0) finish_outer_step();
}

void LocalSgd::synchronize() {
  TimelineSpan span("outer step", "train");
  if (pending_) finish_outer_step();
  start_outer_step();
  finish_outer_step();
}

std::map<std::string, at::Tensor> LocalSgd::state_dict() const {
  std::map<std::string, at::Tensor> state;
  state["outer_steps"] = at::tensor(stats_.outer_steps, at::kLong);
  for (size_t i = 0; i < momentum_.size(); ++i) state[str_cat("momentum.", i)] = momentum_[i].detach().cpu().clone();
  return state;
}

void LocalSgd::load_state_dict(const std::map<std::string, at::Tensor>& state) {
  std::vector<at::Tensor> momentum;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const auto found = state.find(str_cat("momentum.", i));
    if (found == state.end()) break;
    if (found->second.sizes() != parameters_[i].sizes()) {
      throw InvalidArgumentError(str_cat("local SGD state: 'momentum.", i, "' has shape ", found->second.sizes(),
                                         ", its parameter ", parameters_[i].sizes(), " (saved with another model?)"));
    }
    momentum.push_back(found->second.to(parameters_[i].options()).clone());
  }
  if (!momentum.empty() && momentum.size() != parameters_.size()) {
    throw InvalidArgumentError(str_cat("local SGD state: the outer momentum of ", momentum.size(), " of ",
                                       parameters_.size(), " parameters (saved with another model?)"));
  }
  momentum_ = std::move(momentum);
  const auto steps = state.find("outer_steps");
  if (steps != state.end() && (steps->second.numel() != 1 || steps->second.is_floating_point())) {
    throw InvalidArgumentError(str_cat("local SGD state: 'outer_steps' is not one integer (", steps->second.sizes(),
                                       ", ", steps->second.scalar_type(), ")"));
  }
  stats_.outer_steps = steps == state.end() ? 0 : steps->second.item<int64_t>();
  reset_anchor();
}

}  // namespace ringtorch
