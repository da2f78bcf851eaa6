// train(): set-up, the epochs (train, evaluate, report), the finish. Everything optional
// subscribes to those phases as a TrainerPart (training_run.h, trainer_parts.h).
#include "apps/trainer/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include <ringtorch/batch_split.h>
#include <ringtorch/error.h>
#include <ringtorch/image_dataset.h>
#include <ringtorch/models.h>
#include <ringtorch/timeline.h>

#include "apps/plot/run_plot.h"
#include "apps/trainer/batch_plans.h"
#include "apps/trainer/device_selection.h"
#include "apps/trainer/grad_compression_flag.h"
#include "apps/trainer/local_steps.h"
#include "apps/trainer/progress.h"
#include "apps/trainer/trainer_parts.h"
#include "apps/trainer/training_epoch.h"
#include "apps/trainer/training_run.h"

namespace ringtorch {

void validate(const TrainerOptions& o) {
  auto bad = [](const std::string& key, const std::string& value, const std::string& why) {
    throw InvalidArgumentError(str_cat(key, " ", value, ": ", why));
  };
  // "--model: unknown model 'x'; known models: lenet, mlp, ..."
  auto known = [](const std::string& what, const std::string& value, const std::vector<std::string>& names) {
    if (std::find(names.begin(), names.end(), value) != names.end()) return;
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw InvalidArgumentError(str_cat("--", what, ": unknown ", what, " '", value, "'; known ", what, "s: ", list));
  };
  known("model", o.model, model_names());
  known("dataset", o.dataset, dataset_names());
  if (o.dataset == "cifar10" && o.data_dir.empty())
    bad("--dataset", o.dataset, "needs --data-dir (the binary version's batches)");
  if (o.epochs < 1) bad("--epochs", std::to_string(o.epochs), "must be at least 1");
  if (o.batch_size < 1) bad("--batch-size", std::to_string(o.batch_size), "must be at least 1");
  if (!(o.lr > 0)) bad("--lr", std::to_string(o.lr), "must be positive");
  if (o.momentum < 0) bad("--momentum", std::to_string(o.momentum), "must not be negative");
  if (o.weight_decay < 0) bad("--weight-decay", std::to_string(o.weight_decay), "must not be negative");
  if (o.optimizer != "sgd" && o.optimizer != "adam") bad("--optimizer", o.optimizer, "use sgd or adam");
  if (o.threads < 0) bad("--threads", std::to_string(o.threads), "must not be negative");
  if (o.resume && o.checkpoint_dir.empty()) bad("--resume", "", "needs --checkpoint-dir");
  if (!o.init_from.empty()) {  // before any rendezvous; whether it fits the model, once it is built
    std::error_code ec;
    if (!std::filesystem::is_regular_file(o.init_from, ec)) {
      bad("--init-from", o.init_from,
          std::filesystem::exists(o.init_from, ec) ? "is not a regular file" : "does not exist");
    }
  }
  const GradCompression compression = parse_grad_compression(o.grad_compression);
  if (o.powersgd_start_step < 0)
    bad("--powersgd-start-step", std::to_string(o.powersgd_start_step), "must not be negative");
  if (compression.kind != "powersgd" && o.powersgd_start_step != TrainerOptions().powersgd_start_step) {
    bad("--powersgd-start-step", std::to_string(o.powersgd_start_step),
        str_cat("needs --grad-compression powersgd or powersgd:RANK (it counts the plain steps before PowerSGD "
                "starts; here --grad-compression is ",
                o.grad_compression, ")"));
  }
  if (o.local_steps < 0) bad("--local-steps", std::to_string(o.local_steps), "must be at least 1");
  if (!(o.outer_lr > 0) || !std::isfinite(o.outer_lr))
    bad("--outer-lr", std::to_string(o.outer_lr), "must be positive and finite");
  if (!(o.outer_momentum >= 0 && o.outer_momentum < 1))
    bad("--outer-momentum", std::to_string(o.outer_momentum), "must be at least 0 and below 1");
  if (o.outer_compression != "none" && o.outer_compression != "bf16")
    bad("--outer-compression", o.outer_compression, "use none or bf16");
  if (o.local_steps > 0 && o.grad_compression != "none") {
    bad("--local-steps", std::to_string(o.local_steps),
        str_cat("does not combine with --grad-compression ", o.grad_compression,
                ": local steps all-reduce no gradients (--outer-compression bf16 halves what the outer steps send)"));
  }
  if (o.local_steps == 0 &&
      (o.outer_compression != "none" || o.outer_lr != 0.7 || o.outer_momentum != 0.9 || o.outer_overlap > 0)) {
    throw InvalidArgumentError(
        "--outer-lr, --outer-momentum, --outer-compression and --outer-overlap need --local-steps (they set local "
        "SGD's outer step)");
  }
  if (o.outer_overlap < 0) bad("--outer-overlap", std::to_string(o.outer_overlap), "must not be negative");
  if (o.outer_overlap > 0 && o.elastic == "in-process") {
    throw InvalidArgumentError(
        "--outer-overlap does not combine with --elastic in-process (every outer step commits there, and a commit "
        "needs the replicas equal: each would wait for its all-reduce)");
  }
  if (o.checkpoint_every_steps > 0 && o.checkpoint_dir.empty()) {
    bad("--checkpoint-every-steps", std::to_string(o.checkpoint_every_steps), "needs --checkpoint-dir");
  }
  if (o.log_interval < 0) bad("--log-interval", std::to_string(o.log_interval), "must not be negative");
  if (o.balance == "dynamic" && o.local_steps == 0) {
    bad("--balance", o.balance,
        "needs --local-steps H (a period's batches are handed out as the ranks ask; DDP's steps need every rank's "
        "batch before they start: use auto)");
  }
  if (o.balance != "equal" && o.balance != "auto" && o.balance != "dynamic") {
    const std::vector<double> weights = parse_weights(o.balance);
    if (std::all_of(weights.begin(), weights.end(), [](double w) { return w == 0; })) {
      bad("--balance", o.balance, "every rank's weight is 0");
    }
  }
  if (o.global_batch < 0) bad("--global-batch", std::to_string(o.global_batch), "must be at least 1");
  if (o.global_batch > 0 && o.balance == "equal")
    bad("--global-batch", std::to_string(o.global_batch), "needs --balance auto, dynamic or weights");
  parse_progress_style(o.progress, stdout);
  if (!o.plot_path.empty()) {
    if (o.plot_path.size() < 4 || o.plot_path.substr(o.plot_path.size() - 4) != ".svg")
      bad("--plot", o.plot_path, "give a file name ending in .svg");
    if (!can_plot())
      bad("--plot", o.plot_path, "this build has no PLplot; apt-get install libplplot-dev, then rebuild");
  }
  // The flags' own errors (names, repeats); whether the CUDA devices exist is checked in train().
  if (o.devices.empty()) select_devices(o.device, o.gpus, 0, /*cuda_device_count=*/1024);
}

std::string TrainingReport::to_json() const {
  nlohmann::json j = {{"world_size", world_size},
                      {"device", device},
                      {"samples_per_s", samples_per_second},
                      {"epoch_seconds", epoch_seconds},
                      {"final_loss", final_loss},
                      {"test_accuracy", test_accuracy},
                      {"parameter_checksums", parameter_checksums},
                      {"grad_compression", grad_compression}};
  if (grad_compression.rfind("powersgd", 0) == 0) {
    // The element counts are null where no step ran compressed (a start step past the end).
    const bool measured = powersgd_elements_before > 0;
    j["powersgd"] = {{"start_step", powersgd_start_step},
                     {"elements_per_step", measured ? nlohmann::json(powersgd_elements_before) : nlohmann::json()},
                     {"elements_sent_per_step", measured ? nlohmann::json(powersgd_elements_after) : nlohmann::json()}};
  }
  if (local_steps > 0) {
    j["local_steps"] = {{"steps", local_steps},
                        {"outer_lr", outer_lr},
                        {"outer_momentum", outer_momentum},
                        {"outer_compression", outer_compression},
                        {"outer_overlap", outer_overlap},
                        {"outer_steps", outer_steps},
                        {"elements_per_outer_step", elements_per_outer_step}};
  }
  if (!ranks_json.empty()) j["ranks"] = nlohmann::json::parse(ranks_json);
  if (!split.empty()) {
    j["balance"] = balance;
    j["split"] = split;
    j["weights"] = weights;
  }
  return j.dump();
}

namespace {

// The report's totals after the last epoch: checksums of every rank's parameters (equal when the
// replicas agree) and every rank's times over the run. Collectives.
void finish_report(TrainingRun& run, const RankTimes& run_times, TrainingReport& report) {
  double checksum = 0;
  for (const auto& p : run.model.module().parameters()) checksum += p.detach().to(at::kDouble).sum().item<double>();
  at::Tensor mine = at::full({1}, checksum, at::kDouble), all = at::empty({run.world}, at::kDouble);
  run.group.allgather(mine, all);
  report.parameter_checksums.assign(all.data_ptr<double>(), all.data_ptr<double>() + run.world);
  report.ranks_json = rank_times_json(gather_rank_times(run.group, run_times));
}

}  // namespace

TrainingReport train(const TrainerOptions& o, ProcessGroup& group, const ElasticHooks& elastic) {
  validate(o);
  if (!o.timeline_path.empty()) Timeline::start();
  if (Timeline::enabled()) Timeline::name_this_thread("training loop");
  TrainingRun run = set_up_run(o, group, elastic.datasets);
  TrainerParts plan_parts;
  const std::shared_ptr<BatchPlan> batches = make_batch_plan(run, plan_parts);
  TrainerParts parts = make_trainer_parts(o, elastic, run.rank, std::move(plan_parts));
  for (auto& part : parts) part->on_start(run);
  // The weights a part loaded (a resume, a recovery, --init-from), rank 0's on every rank, are the
  // first period's start.
  if (run.local_sgd) {
    start_from_rank0_weights(run);
    run.local_sgd->reset_anchor();
  }
  ProgressReporter reporter(stdout, run.rank == 0 ? parse_progress_style(o.progress, stdout) : ProgressStyle::kOff,
                            o.log_interval);
  TrainingReport report;
  report.world_size = run.world;
  report.device = run.devices.describe();
  report.grad_compression = parse_grad_compression(o.grad_compression).describe();
  RankTimes run_times;
  double trained_seconds = 0;
  int64_t trained_samples = 0;
  for (int64_t epoch = run.progress.epoch; epoch < o.epochs; ++epoch) {
    EpochOutcome outcome = train_epoch(run, *batches, parts, reporter, epoch);
    evaluate_epoch(run, outcome);
    run_times += outcome.times;
    trained_seconds += outcome.seconds;
    trained_samples += outcome.trained_samples;
    report.final_loss = outcome.loss;
    report.test_accuracy = outcome.test_accuracy;
    report.epoch_seconds.push_back(outcome.seconds);
    run.progress.epoch = epoch + 1;
    run.progress.samples_in_epoch = 0;
    run.progress.metadata = run.checkpoint_metadata();
    for (auto& part : parts) part->on_epoch_end(run, outcome);
  }
  if (report.epoch_seconds.empty()) {
    // Nothing was left to train: a resume, or an in-process recovery (a node admitted at the
    // last commit of the last epoch), started at the end. The report still measures the weights
    // it holds, instead of a zero accuracy; no epoch ran here, so there is no loss to report.
    if (run.rank == 0) {
      std::printf("nothing left to train: the state taken over is at the end of epoch %lld of %d\n",
                  (long long)run.progress.epoch, o.epochs);
    }
    EpochOutcome outcome;
    evaluate_epoch(run, outcome);
    report.test_accuracy = outcome.test_accuracy;
    report.final_loss = std::numeric_limits<double>::quiet_NaN();
  }
  report.samples_per_second = trained_seconds > 0 ? trained_samples / trained_seconds : 0;
  finish_report(run, run_times, report);
  if (run.powersgd) {
    report.powersgd_start_step = o.powersgd_start_step;
    report.powersgd_elements_before = run.powersgd->elements_before_compression();
    report.powersgd_elements_after = run.powersgd->elements_after_compression();
  }
  if (run.local_sgd) {
    report.local_steps = o.local_steps;
    report.outer_lr = o.outer_lr;
    report.outer_momentum = o.outer_momentum;
    report.outer_compression = o.outer_compression;
    report.outer_overlap = o.outer_overlap;
    report.outer_steps = run.local_sgd->stats().outer_steps;
    report.elements_per_outer_step = run.local_sgd->elements_per_outer_step();
  }
  for (auto& part : parts) part->on_finish(run, report);
  return report;
}

}  // namespace ringtorch
