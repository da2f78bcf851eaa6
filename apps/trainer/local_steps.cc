#include "apps/trainer/local_steps.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include <ringtorch/error.h>
#include <ringtorch/str_cat.h>
#include <ringtorch/timeline.h>

#include "base/log.h"

namespace ringtorch {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kPrefix[] = "local_sgd.";
constexpr char kInnerOptimizer[] = "local_sgd.inner_optimizer";
constexpr char kInnerOptimizerSizes[] = "local_sgd.inner_optimizer_sizes";

std::map<std::string, at::Tensor> outer_state(const LocalSgd& local) {
  std::map<std::string, at::Tensor> state;
  for (auto& [name, tensor] : local.state_dict()) state[kPrefix + name] = tensor;
  return state;
}

void restore_outer_state(LocalSgd& local, const std::map<std::string, at::Tensor>& saved) {
  std::map<std::string, at::Tensor> state;
  const std::string prefix = kPrefix;
  for (const auto& [name, tensor] : saved) {
    if (name.compare(0, prefix.size(), prefix) == 0) state[name.substr(prefix.size())] = tensor;
  }
  local.load_state_dict(state);
}

// This rank's inner optimizer from `vector`; one that does not fit (another model, or a rank
// whose optimizer had not stepped when it was saved) leaves the state as it is, with a warning.
void load_inner_optimizer(TrainingRun& run, const at::Tensor& vector, const std::string& source) {
  if (vector.numel() == 0) return;
  try {
    load_optimizer_state_vector(*run.optimizer, vector);
  } catch (const Error& e) {  // InvalidArgumentError (sizes) or IoError (a field's shape)
    log_warning(str_cat("rank ", run.rank, ": local steps: its own inner optimizer state from ", source,
                        " does not fit (", e.what(), "); it goes on with the state loaded with the weights"));
  }
}

}  // namespace

LocalSgdOptions local_sgd_options(const TrainerOptions& o) {
  LocalSgdOptions options;
  options.outer_lr = o.outer_lr;
  options.outer_momentum = o.outer_momentum;
  options.bf16_outer_gradient = o.outer_compression == "bf16";
  options.overlap_steps = o.outer_overlap;
  return options;
}

void start_from_rank0_weights(TrainingRun& run) {
  torch::NoGradGuard no_grad;
  torch::nn::Module& module = run.model.module();
  for (const auto& p : module.parameters()) run.group.broadcast(p.detach(), /*root=*/0);
  for (const auto& b : module.buffers()) run.group.broadcast(b.detach(), /*root=*/0);
}

StepOutcome train_period(TrainingRun& run, const std::vector<int64_t>& indices, const at::Tensor& last_parameter,
                         bool synchronize) {
  TimelineSpan period_span("period", "train");
  const auto start = Clock::now();
  const double waited_before = run.local_sgd->stats().wait_seconds;  // --outer-overlap: inside inner steps
  const size_t batch_size = static_cast<size_t>(run.options.batch_size);
  StepOutcome outcome;
  outcome.trained = true;
  outcome.inner_steps = 0;
  outcome.samples = 0;
  double loss_sum = 0, first_non_finite = 0;
  // The next batch's start in `indices`: the next in turn, or with --balance dynamic the next claimed.
  size_t turn = 0;
  const auto next_batch = [&]() -> std::optional<size_t> {
    if (run.claims) {
      const std::optional<int64_t> claimed = run.claims->next();
      return claimed ? std::optional<size_t>(static_cast<size_t>(*claimed) * batch_size) : std::nullopt;
    }
    if (turn >= indices.size()) return std::nullopt;
    const size_t begin = turn;
    turn += batch_size;
    return begin;
  };
  while (const std::optional<size_t> begin = next_batch()) {
    TimelineSpan span("inner step", "train");
    const std::vector<int64_t> batch(indices.begin() + *begin,
                                     indices.begin() + std::min(indices.size(), *begin + batch_size));
    auto [x, y] = run.train_set->batch(batch);
    run.optimizer->zero_grad();
    at::Tensor loss = torch::cross_entropy_loss(run.model.forward(x.to(run.device)), y.to(run.device));
    loss.backward();
    run.optimizer->step();
    const double value = loss.item<double>();
    if (!std::isfinite(value) && std::isfinite(first_non_finite)) first_non_finite = value;
    loss_sum += value;
    run.local_sgd->record_inner_step(static_cast<int64_t>(batch.size()));
    outcome.samples += static_cast<int64_t>(batch.size());
    ++outcome.inner_steps;
  }
  const auto computed = Clock::now();
  const double waited_inside = run.local_sgd->stats().wait_seconds - waited_before;
  if (synchronize) {
    run.local_sgd->synchronize();
  } else {
    run.local_sgd->outer_step();
  }
  if (outcome.inner_steps > 0)
    outcome.loss =
        std::isfinite(first_non_finite) ? loss_sum / static_cast<double>(outcome.inner_steps) : first_non_finite;
  // The same on every rank after the outer step (with --outer-overlap, a period later): a rank
  // whose replica diverged spoils it for all.
  outcome.averaged_gradient_finite =
      !last_parameter.defined() || std::isfinite(last_parameter.detach().sum().item<double>());
  const auto end = Clock::now();
  outcome.seconds = std::chrono::duration<double>(end - start).count();
  outcome.compute_seconds = std::chrono::duration<double>(computed - start).count() - waited_inside;
  return outcome;
}

std::map<std::string, at::Tensor> local_sgd_checkpoint_state(TrainingRun& run) {
  std::map<std::string, at::Tensor> state = outer_state(*run.local_sgd);
  const at::Tensor mine = optimizer_state_vector(*run.optimizer);
  int64_t size = mine.numel();
  std::vector<int64_t> sizes(static_cast<size_t>(run.world));
  run.group.allgather(&size, sizes.data(), 1, c10::ScalarType::Long);
  const int64_t longest = *std::max_element(sizes.begin(), sizes.end());
  if (longest == 0) return state;  // no rank has stepped yet
  at::Tensor padded = at::zeros({longest}, mine.options());
  padded.narrow(0, 0, size).copy_(mine);
  at::Tensor rows = at::empty({run.world * longest}, mine.options());
  run.group.allgather(padded, rows);
  state[kInnerOptimizer] = rows.view({run.world, longest});
  state[kInnerOptimizerSizes] = at::tensor(sizes, at::kLong);
  return state;
}

std::string restore_local_sgd_from_checkpoint(TrainingRun& run, const std::map<std::string, at::Tensor>& saved) {
  try {
    restore_outer_state(*run.local_sgd, saved);
  } catch (const InvalidArgumentError& e) {  // the library's message names the entry, not the rank or flag
    throw InvalidArgumentError(str_cat("rank ", run.rank, ": resuming local steps: ", e.what(),
                                       " (resume from another checkpoint, or without --local-steps)"));
  }
  const auto rows = saved.find(kInnerOptimizer);
  const auto sizes = saved.find(kInnerOptimizerSizes);
  if (rows == saved.end() || sizes == saved.end()) return {};
  const at::Tensor& r = rows->second;
  const at::Tensor& s = sizes->second;
  if (r.dim() != 2 || s.dim() != 1 || s.size(0) != r.size(0) || s.scalar_type() != at::kLong ||
      s.min().item<int64_t>() < 0 || s.max().item<int64_t>() > r.size(1)) {
    throw InvalidArgumentError(str_cat("rank ", run.rank, ": the checkpoint's '", kInnerOptimizer, "' (", r.sizes(),
                                       ") and '", kInnerOptimizerSizes, "' (", s.sizes(),
                                       ") do not describe one row per rank; it was not written by ringtrain "
                                       "--local-steps (resume without --local-steps, or from another checkpoint)"));
  }
  if (r.size(0) != run.world) {
    return str_cat("local steps: the checkpoint holds the inner optimizers of ", r.size(0), " ranks; at world size ",
                   run.world, " every rank goes on with rank 0's");
  }
  load_inner_optimizer(run, r[run.rank].narrow(0, 0, s[run.rank].item<int64_t>()), "the checkpoint");
  return {};
}

std::map<std::string, at::Tensor> local_sgd_commit_state(TrainingRun& run) {
  std::map<std::string, at::Tensor> state = outer_state(*run.local_sgd);
  state[kInnerOptimizer] = optimizer_state_vector(*run.optimizer);
  return state;
}

void restore_local_sgd_from_commit(TrainingRun& run, const std::map<std::string, at::Tensor>& synced,
                                   const std::map<std::string, at::Tensor>* own) {
  restore_outer_state(*run.local_sgd, synced);
  if (!own) return;
  const auto mine = own->find(kInnerOptimizer);
  if (mine != own->end()) load_inner_optimizer(run, mine->second, "its last commit");
}

}  // namespace ringtorch
