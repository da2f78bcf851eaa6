#include "apps/trainer/training_epoch.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include <ringtorch/checkpoint.h>
#include <ringtorch/error.h>
#include <ringtorch/str_cat.h>
#include <ringtorch/timeline.h>

#include "apps/trainer/local_steps.h"
#include "base/log.h"

namespace ringtorch {
namespace {

using Clock = std::chrono::steady_clock;

// One optimizer step on `indices`. Its compute time is the step without its waits for the
// others (the agreement at forward, the end of backward waiting for buckets); time this process
// stood still for its CPU quota counts as compute even inside a wait (DdpOptions::stall_clock).
StepOutcome train_step(TrainingRun& run, const std::vector<int64_t>& indices, const at::Tensor& last_parameter,
                       std::string span_args) {
  TimelineSpan step_span("step", "train");
  step_span.set_args(std::move(span_args));
  const auto start = Clock::now();
  at::Tensor x, y, loss;
  {
    TimelineSpan span("load batch", "train");
    std::tie(x, y) = run.train_set->batch(indices);
    run.optimizer->zero_grad();
  }
  {
    TimelineSpan span("forward", "train");
    loss = torch::cross_entropy_loss(run.ddp->forward(x.to(run.device)), y.to(run.device));
  }
  {
    TimelineSpan span("backward", "train");  // DDP's buckets are reduced inside it
    loss.backward();
  }
  // One small tensor, the same on every rank after the all-reduce: the output layer's bias (the
  // last parameter), through which a non-finite loss on any rank reaches every rank's gradient.
  const bool averaged_gradient_finite = !last_parameter.defined() || !last_parameter.grad().defined() ||
                                        std::isfinite(last_parameter.grad().sum().item<double>());
  {
    TimelineSpan span("optimizer", "train");
    run.optimizer->step();
  }
  StepOutcome outcome;
  outcome.trained = true;
  outcome.loss = loss.item<double>();
  outcome.averaged_gradient_finite = averaged_gradient_finite;
  outcome.samples = static_cast<int64_t>(indices.size());
  const DdpIterationStats stats = run.ddp->last_iteration_stats();
  auto waited = run.ddp->last_step_agreement_wait() - run.ddp->last_step_agreement_stalled();
  if (stats.finished > stats.last_gradient)
    waited += stats.finished - stats.last_gradient - stats.stalled_while_waiting;
  const auto took = Clock::now() - start;
  outcome.seconds = std::chrono::duration<double>(took).count();
  outcome.compute_seconds = std::chrono::duration<double>(took - waited).count();
  return outcome;
}

// Training that diverged stops where it did (or, with --allow-non-finite, says so once).
void check_finite(TrainingRun& run, bool finite, const std::string& what) {
  if (finite) return;
  const std::string text = str_cat("rank ", run.rank, ": ", what, ": training diverged");
  if (!run.options.allow_non_finite) {
    // A compressed gradient can be what overflowed (fp16 ends at 65504); the callers check the
    // last parameter's gradient only, so where another's overflowed the next step's loss says so.
    const std::string& compression = run.options.grad_compression;
    const std::string instead =
        compression == "fp16" ? ", or --grad-compression bf16 (fp16's largest value is 65504)"
        : compression != "none"
            ? str_cat(", or --grad-compression none (the gradients were compressed with ", compression, ")")
            : std::string();
    throw InvalidArgumentError(text + " (lower --lr" + instead +
                               ", or resume from the last checkpoint; --allow-non-finite trains on regardless)");
  }
  static std::atomic<bool> said{false};  // thread ranks share the process
  if (!said.exchange(true)) log_warning(text + " (--allow-non-finite: training on; said once)");
}

// The epoch's mean loss over all ranks: per batch with equal batches (as always), per sample
// with --balance (ranks' batches differ in size). A collective.
double mean_loss_over_ranks(TrainingRun& run, double loss_sum, int64_t batches, double loss_by_sample,
                            int64_t samples) {
  const double mean = batches ? loss_sum / static_cast<double>(batches) : 0;
  at::Tensor losses = run.options.balance != "equal"
                          ? at::tensor({loss_by_sample, static_cast<double>(samples)}, at::kDouble)
                          : at::tensor({mean, 1.0}, at::kDouble);
  run.group.allreduce(losses, ReduceOp::kSum);
  return losses[1].item<double>() > 0 ? losses[0].item<double>() / losses[1].item<double>() : 0;
}

}  // namespace

EpochOutcome train_epoch(TrainingRun& run, BatchPlan& batches, TrainerParts& parts, ProgressReporter& reporter,
                         int64_t epoch) {
  TimelineSpan epoch_span("epoch", "train");
  epoch_span.set_args(str_cat("{\"epoch\":", epoch + 1, "}"));
  // A checkpoint taken inside this epoch says how many of its samples the job trained; the
  // batches deal out the rest (Note [Resuming inside an epoch], training_run.cc).
  const int64_t trained_before =
      epoch == run.progress.epoch ? std::min(run.progress.samples_in_epoch, run.train_size) : 0;
  const int64_t steps = batches.begin_epoch(epoch, trained_before);
  reporter.begin_epoch(epoch, run.options.epochs, batches.epoch_samples());
  const auto epoch_start = Clock::now();
  EpochOutcome outcome;
  outcome.epoch = epoch;
  double loss_sum = 0, loss_by_sample = 0;
  int64_t trained_batches = 0;
  std::optional<double> latest_loss;  // this rank's, for the progress line
  const auto parameters = run.model.module().parameters();
  const at::Tensor last_parameter = parameters.empty() ? at::Tensor() : parameters.back();
  for (int64_t step = 0; step < steps; ++step) {
    StepOutcome s;
    if (run.trains()) {
      const std::vector<int64_t> indices = batches.step_indices(step);
      if (run.local_sgd) {
        // Replicas equal where the parts need them (local_steps.h): the epoch's end, a checkpoint.
        const int every = run.options.checkpoint_every_steps;
        const bool checkpoint_next = every > 0 && (run.progress.step + 1) % every == 0;
        s = train_period(run, indices, last_parameter, step + 1 == steps || checkpoint_next);
      } else {
        s = train_step(run, indices, last_parameter,
                       Timeline::enabled()
                           ? str_cat("{\"epoch\":", epoch + 1, ",\"step\":", step, ",\"samples\":", indices.size(), "}")
                           : std::string());
      }
      const char* unit = run.local_sgd ? " period " : " step ";
      if (!std::isfinite(s.loss)) {
        check_finite(run, false,
                     str_cat("the loss is ", s.loss, " at epoch ", epoch + 1, unit, step + 1, " of ", steps));
      } else {
        check_finite(run, s.averaged_gradient_finite,
                     str_cat(run.local_sgd ? "the parameters after the outer step hold"
                                           : "the gradient averaged over the ranks holds",
                             " NaN or inf at epoch ", epoch + 1, unit, step + 1, " of ", steps,
                             " (another rank's loss was not finite)"));
      }
      loss_sum += s.loss * static_cast<double>(s.inner_steps);
      loss_by_sample += s.loss * static_cast<double>(s.samples);
      outcome.times.compute_seconds += s.compute_seconds;
      outcome.times.wait_seconds += s.seconds - s.compute_seconds;
      outcome.times.samples += s.samples;
      outcome.times.steps += s.inner_steps;
      trained_batches += s.inner_steps;
    }
    s.epoch = epoch;
    s.step = step;
    s.last_in_epoch = step + 1 == steps;
    s.samples_done = batches.trained_after(step + 1);
    ++run.progress.step;  // the job's optimizer steps, for checkpoints
    if (s.trained && s.inner_steps > 0) latest_loss = s.loss;
    if (s.trained) reporter.update(s.samples_done, trained_batches, latest_loss);
    for (auto& part : parts) part->on_step_end(run, s);
  }
  reporter.end_epoch();
  // The epoch's training time: until its last step, which for a rank that sits out is when the
  // others hand over their state (an epoch-end cost for those, like evaluation).
  auto training_end = Clock::now();
  for (auto& part : parts) part->on_epoch_trained(run, steps);
  if (!run.trains()) training_end = Clock::now();
  outcome.seconds = std::chrono::duration<double>(training_end - epoch_start).count();
  outcome.times.loop_seconds = outcome.seconds;
  outcome.trained_samples = batches.trained_after(steps) - trained_before;
  outcome.ranks = gather_rank_times(run.group, outcome.times);
  if (run.rank == 0) std::fputs(format_rank_table(str_cat("epoch ", epoch + 1), outcome.ranks).c_str(), stdout);
  const double rank_loss = trained_batches ? loss_sum / static_cast<double>(trained_batches) : 0;
  if (outcome.times.samples == 0 && !run.trains()) {
    std::printf("Rank %d, Epoch [%lld/%d]: sat out\n", run.rank, (long long)epoch + 1, run.options.epochs);
  } else if (trained_batches == 0) {
    // With --local-steps a rank far slower than the others may train none of an epoch's batches:
    // it claims none (--balance dynamic), or its weight gives it none of a short epoch's periods.
    std::printf("Rank %d, Epoch [%lld/%d], no batch trained here%s\n", run.rank, (long long)epoch + 1,
                run.options.epochs, run.claims ? " (the other ranks claimed them all)" : "");
  } else {
    std::printf("Rank %d, Epoch [%lld/%d], Loss: %.4f", run.rank, (long long)epoch + 1, run.options.epochs, rank_loss);
    if (run.local_sgd) std::printf(", inner steps: %lld", (long long)outcome.times.steps);
    std::printf("\n");
  }
  std::fflush(stdout);
  {
    // Every rank, those that sat out too: they hold the same weights by now, and a rank that
    // skipped this would wait alone in the next collective.
    const std::string bad = first_non_finite(run.model.module());
    check_finite(run, bad.empty(), str_cat(bad, " holds NaN or inf at the end of epoch ", epoch + 1));
  }
  outcome.loss = mean_loss_over_ranks(run, loss_sum, trained_batches, loss_by_sample, outcome.times.samples);
  return outcome;
}

void evaluate_epoch(TrainingRun& run, EpochOutcome& outcome) {
  TimelineSpan span("evaluate", "train");
  torch::NoGradGuard no_grad;
  PlacedModel& model = run.model;
  model.module().eval();
  const int batch_size = 1000;
  int64_t correct = 0, total = 0;
  std::vector<int64_t> indices;
  for (int64_t i = run.rank; i < run.test_set->size(); i += run.world) indices.push_back(i);
  for (size_t start = 0; start < indices.size(); start += batch_size) {
    std::vector<int64_t> chunk(indices.begin() + start, indices.begin() + std::min(indices.size(), start + batch_size));
    auto [x, y] = run.test_set->batch(chunk);
    correct += model.forward(x.to(run.device)).argmax(1).cpu().eq(y).sum().item<int64_t>();
    total += static_cast<int64_t>(chunk.size());
  }
  model.module().train();
  at::Tensor counts = at::tensor({correct, total}, at::kLong);
  run.group.allreduce(counts, ReduceOp::kSum);
  outcome.correct = counts[0].item<int64_t>();
  outcome.evaluated = counts[1].item<int64_t>();
  outcome.test_accuracy = static_cast<double>(outcome.correct) / static_cast<double>(outcome.evaluated);
  if (run.rank == 0) {
    std::printf("Test accuracy: %.4f (%lld/%lld)\n", outcome.test_accuracy, (long long)outcome.correct,
                (long long)outcome.evaluated);
    std::fflush(stdout);
  }
}

}  // namespace ringtorch
