#include "apps/trainer/trainer_parts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include <ringtorch/checkpoint.h>
#include <ringtorch/error.h>
#include <ringtorch/timeline.h>

#include "apps/plot/run_plot.h"
#include "apps/trainer/grad_compression.h"
#include "apps/trainer/local_steps.h"
#include "base/atomic_file.h"
#include "base/log.h"

namespace ringtorch {
namespace {

// "resumed at epoch 2 step 937 with world size 3 (was 2); ..." for rank 0's log.
std::string describe_resume(const TrainingProgress& p, const TrainerOptions& o, int world) {
  std::string text = str_cat("resumed at epoch ", p.epoch + 1, " step ", p.step, " with world size ", world);
  const auto was = p.metadata.find("world_size");
  if (was == p.metadata.end()) return text;
  text += str_cat(" (was ", was->second, ")");
  if (p.samples_in_epoch > 0) {
    text +=
        str_cat("; ", p.samples_in_epoch, " samples of epoch ", p.epoch + 1, " were trained, the rest is dealt out");
  }
  if (was->second != std::to_string(world)) {
    if (o.balance != "equal" && o.global_batch > 0) {
      text += str_cat("; the global batch stays ", o.global_batch, " (--global-batch)");
    } else {
      text += str_cat("; --batch-size ", o.batch_size, " is per rank, so the global batch is now ",
                      int64_t{o.batch_size} * world, " (was ", o.batch_size, " x ", was->second, "); --lr stays ", o.lr,
                      " (scale it yourself to follow the linear scaling rule)");
    }
  }
  return text;
}

// Whether a save inside the epoch is due after `step`: not after its last step (the epoch's end
// saves then), nor while a rank sits out, nor on a rank that does not train.
bool inside_epoch(const TrainingRun& run, const StepOutcome& step) {
  return step.trained && !step.last_in_epoch && !run.ranks_sit_out;
}

// --init-from FILE: every rank loads the weights of a state_dict (Python's torch.save of
// model.state_dict(), or a checkpoint) before training; an elastic recovery after it replaces
// them, and with --resume a directory that holds checkpoints makes it unneeded (the resume
// loads one, or fails). The ranks agree on the outcome and on the weights (one all-reduce), so a
// rank that cannot read the file, or read another file under the same path, stops them all
// instead of leaving the others in the first collective or training apart.
class InitFromPart : public TrainerPart {
 public:
  void on_start(TrainingRun& run) override {
    const std::string& path = run.options.init_from;
    if (run.options.resume && !Checkpointer(run.options.checkpoint_dir).all_files().empty()) {
      if (run.rank == 0)
        std::printf("--init-from %s: not loaded, --resume continues from %s\n", path.c_str(),
                    run.options.checkpoint_dir.c_str());
      return;
    }
    std::exception_ptr failure;
    std::string source;
    double checksum = 0;
    try {
      source = load_state_dict_file(path, run.model.module());
      checksum = weights_checksum(run.model.module());
    } catch (...) {
      failure = std::current_exception();
    }
    // [failed rank + 1 (0: none), checksum, -checksum]: the max of each.
    at::Tensor told = at::tensor({failure ? run.rank + 1.0 : 0.0, checksum, -checksum}, at::kDouble);
    run.group.allreduce(told, ReduceOp::kMax);
    if (failure) std::rethrow_exception(failure);
    const int failed = static_cast<int>(told[0].item<double>()) - 1;
    if (failed >= 0) {
      throw InvalidArgumentError(
          str_cat("--init-from ", path, ": rank ", failed, " could not load it (its error says why)"),
          FailureSite{run.rank, failed, "init-from"});
    }
    const double highest = told[1].item<double>(), lowest = -told[2].item<double>();
    if (std::isfinite(highest) && std::isfinite(lowest) && highest != lowest) {  // NaN: the loss check says it
      throw InvalidArgumentError(str_cat("--init-from ", path, ": the ranks loaded different weights (is ", path,
                                         " the same file on every node?)"),
                                 FailureSite{run.rank, -1, "init-from"});
    }
    if (run.rank == 0) {
      std::printf("initialized the model from %s (%s)\n", path.c_str(), source.c_str());
      std::fflush(stdout);
    }
  }

 private:
  // A sum that differs when any weight differs (in practice): each tensor's sum, weighted by its
  // place.
  static double weights_checksum(torch::nn::Module& model) {
    torch::NoGradGuard no_grad;
    double sum = 0;
    int64_t place = 1;
    for (const auto& p : model.parameters())
      sum += static_cast<double>(place++) * p.to(at::kDouble).sum().item<double>();
    for (const auto& b : model.buffers()) {
      if (b.is_floating_point()) sum += static_cast<double>(place) * b.to(at::kDouble).sum().item<double>();
      ++place;
    }
    return sum;
  }
};

class CheckpointPart : public TrainerPart {
 public:
  explicit CheckpointPart(const TrainerOptions& o) : checkpoints_(o.checkpoint_dir) {}

  void on_start(TrainingRun& run) override {
    if (!run.options.resume) return;
    if (auto resumed = checkpoints_.load_latest(run.model.module(), run.optimizer.get())) {
      run.progress = *resumed;
      std::string note;
      if (run.powersgd) {
        note = restore_powersgd_from_checkpoint(*run.powersgd, run.progress.extra_state, run.rank, run.world);
      }
      if (run.local_sgd) note = restore_local_sgd_from_checkpoint(run, run.progress.extra_state);
      run.progress.extra_state.clear();  // restored; not carried into later saves' positions
      if (run.rank == 0) std::printf("%s\n", describe_resume(run.progress, run.options, run.world).c_str());
      if (run.rank == 0 && !note.empty()) std::printf("%s\n", note.c_str());
      std::fflush(stdout);  // the moment training resumes, for logs and bench/compare_elastic
    } else if (run.rank == 0) {
      std::printf("--resume: no checkpoint in %s yet; starting from scratch\n", run.options.checkpoint_dir.c_str());
      std::fflush(stdout);
    }
  }
  void on_step_end(TrainingRun& run, const StepOutcome& step) override {
    const int every = run.options.checkpoint_every_steps;
    if (every <= 0 || !inside_epoch(run, step) || run.progress.step % every != 0) return;
    save(run, run.position_in_epoch(step.epoch, step.samples_done));
  }
  void on_epoch_end(TrainingRun& run, const EpochOutcome&) override { save(run, run.progress); }

 private:
  void save(TrainingRun& run, const TrainingProgress& at) {
    TimelineSpan span("checkpoint", "train");
    // Trained on past NaN by request: skip the save rather than stop (the weights are the same
    // on every rank, so every rank skips alike). Without the flag Checkpointer refuses.
    if (run.options.allow_non_finite) {
      const std::string bad = first_non_finite(run.model.module());
      if (!bad.empty()) {
        if (run.rank == 0) {
          log_warning(str_cat("checkpoint at step ", at.step, " not written: ", bad,
                              " holds NaN or inf (--allow-non-finite); the newest finite checkpoint stays"));
        }
        return;
      }
    }
    TrainingProgress with_state = at;
    if (run.powersgd) with_state.extra_state = powersgd_checkpoint_state(*run.powersgd, run.group);  // a collective
    if (run.local_sgd) with_state.extra_state = local_sgd_checkpoint_state(run);                     // a collective
    checkpoints_.save(run.model.module(), run.optimizer.get(), with_state, &run.group);
  }
  Checkpointer checkpoints_;
};

class ElasticPart : public TrainerPart {
 public:
  explicit ElasticPart(const ElasticHooks& hooks) : hooks_(hooks) {}

  // In-process recovery: the newest state any rank committed (a new group after a lost peer or
  // a node that joined); none in a fresh job, which commits what it starts from.
  void on_start(TrainingRun& run) override {
    if (auto committed = hooks_.state->sync(run.group, run.model.module(), run.optimizer.get())) {
      run.progress = *committed;
      if (run.powersgd) {
        const bool own_is_synced = hooks_.state->own_step() == committed->step;
        restore_powersgd_from_commit(*run.powersgd, committed->extra_state,
                                     own_is_synced ? &hooks_.state->own_extra_state() : nullptr);
      }
      if (run.local_sgd) {
        const bool own_is_synced = hooks_.state->own_step() == committed->step;
        restore_local_sgd_from_commit(run, committed->extra_state,
                                      own_is_synced ? &hooks_.state->own_extra_state() : nullptr);
      }
      run.progress.extra_state.clear();
      if (run.rank == 0) {
        std::printf("recovered in process at epoch %lld step %lld with world size %d: the state rank %d committed\n",
                    (long long)run.progress.epoch + 1, (long long)run.progress.step, run.world,
                    hooks_.state->last_source());
        std::fflush(stdout);
      }
    } else {
      commit(run, run.progress);
    }
  }
  void on_step_end(TrainingRun& run, const StepOutcome& step) override {
    if (step.trained) hooks_.state->reached(run.progress.step);
    // With --local-steps every step is an outer step: commit each (local_steps.h).
    const int every = run.local_sgd ? 1 : hooks_.commit_every_steps;
    if (!inside_epoch(run, step) || run.progress.step % every != 0) return;
    commit_and_check_membership(run, run.position_in_epoch(step.epoch, step.samples_done));
  }
  void on_epoch_end(TrainingRun& run, const EpochOutcome&) override { commit_and_check_membership(run, run.progress); }

 private:
  // Commits the state, then the ranks agree whether the generation ended (one rank may see the
  // store's key a moment before another), and all leave together.
  void commit_and_check_membership(TrainingRun& run, const TrainingProgress& at) {
    TimelineSpan span("elastic commit", "train");
    commit(run, at);
    at::Tensor ended = at::tensor({hooks_.generation_ended && hooks_.generation_ended() ? 1 : 0}, at::kInt);
    run.group.allreduce(ended, ReduceOp::kMax);
    if (ended.item<int>() != 0) {
      throw MembershipChanged(str_cat("the generation ended at step ", at.step, " (a node joins or left)"));
    }
  }
  void commit(TrainingRun& run, const TrainingProgress& at) {
    TrainingProgress with_state = at;
    if (run.powersgd) with_state.extra_state = powersgd_commit_state(*run.powersgd);  // this rank's own
    if (run.local_sgd) with_state.extra_state = local_sgd_commit_state(run);
    hooks_.state->commit(run.model.module(), run.optimizer.get(), with_state);
  }
  const ElasticHooks hooks_;
};

class MetricsPart : public TrainerPart {
 public:
  explicit MetricsPart(const std::string& path) : out_(path, std::ios::app) {
    if (!out_) throw IoError(str_cat("--metrics ", path, ": cannot open for writing"));
  }
  void on_epoch_end(TrainingRun& run, const EpochOutcome& epoch) override {
    nlohmann::json line = {{"epoch", epoch.epoch + 1},
                           {"loss", epoch.loss},
                           {"test_accuracy", epoch.test_accuracy},
                           {"seconds", epoch.seconds},
                           {"samples_per_s", epoch.trained_samples / epoch.seconds},
                           {"ranks", nlohmann::json::parse(rank_times_json(epoch.ranks))}};
    if (!run.split.empty()) line["split"] = run.split;
    out_ << line.dump() << "\n";
    out_.flush();
  }

 private:
  std::ofstream out_;
};

class PlotPart : public TrainerPart {
 public:
  void on_epoch_end(TrainingRun&, const EpochOutcome& epoch) override {
    EpochMetrics point;
    point.epoch = static_cast<int>(epoch.epoch + 1);
    point.loss = epoch.loss;
    point.test_accuracy = epoch.test_accuracy;
    point.seconds = epoch.seconds;
    point.samples_per_s = epoch.trained_samples / epoch.seconds;
    for (const auto& r : epoch.ranks) point.rank_samples_per_s.push_back(r.samples_per_second());
    history_.push_back(point);
  }
  // After the last collective (the parts' order): a plot that cannot be written fails rank 0
  // alone, not the others.
  void on_finish(TrainingRun& run, TrainingReport&) override {
    if (history_.empty()) return;
    const TrainerOptions& o = run.options;
    plot_run(history_, o.plot_path,
             str_cat(o.model, " on ", o.dataset, ", ", run.world, run.world == 1 ? " rank" : " ranks"));
    std::printf("[ringtorch] plot: %s\n", o.plot_path.c_str());
  }

 private:
  std::vector<EpochMetrics> history_;
};

// Every rank's trace to rank 0 (lengths allgathered, then the bytes gathered to rank 0 in
// blocks of the longest), which merges them into one file. Works across hosts without a shared
// filesystem; only rank 0 holds all of them.
class TimelinePart : public TrainerPart {
 public:
  void on_finish(TrainingRun& run, TrainingReport&) override {
    ProcessGroup& group = run.group;
    const std::string mine = Timeline::chrome_trace_json();
    int64_t length = static_cast<int64_t>(mine.size());
    std::vector<int64_t> lengths(static_cast<size_t>(group.size()));
    group.allgather(&length, lengths.data(), 1, c10::ScalarType::Long);
    const int64_t block = *std::max_element(lengths.begin(), lengths.end());
    at::Tensor local = at::zeros({block}, at::kByte);
    std::memcpy(local.data_ptr<uint8_t>(), mine.data(), mine.size());
    at::Tensor all = group.rank() == 0 ? at::empty({block * group.size()}, at::kByte) : at::Tensor();
    group.gather(local, all, /*root=*/0);
    if (group.rank() != 0) return;
    std::vector<std::string> traces, names;
    const char* bytes = reinterpret_cast<const char*>(all.data_ptr<uint8_t>());
    for (size_t r = 0; r < lengths.size(); ++r) {
      traces.emplace_back(bytes + static_cast<int64_t>(r) * block, static_cast<size_t>(lengths[r]));
      names.push_back(str_cat("of rank ", r));
    }
    size_t events = 0;
    const std::string merged = merge_chrome_trace_texts(traces, names, &events);
    const std::string& path = run.options.timeline_path;
    write_file_atomically(path, merged, "--timeline");
    std::printf(
        "[ringtorch] timeline: %s (%d ranks, %zu events); open it in https://ui.perfetto.dev or chrome://tracing\n",
        path.c_str(), group.size(), events);
  }
};

}  // namespace

TrainerParts make_trainer_parts(const TrainerOptions& o, const ElasticHooks& elastic, int rank,
                                TrainerParts plan_parts) {
  TrainerParts parts = std::move(plan_parts);
  // What rank 0 writes at the end (or at the first epoch's end) is checked now, before any
  // training: an unwritable --plot used to fail the run after its last epoch.
  if (rank == 0) {
    if (!o.timeline_path.empty()) check_writable(o.timeline_path, "--timeline");
    if (!o.plot_path.empty()) check_writable(o.plot_path, "--plot");
    if (!o.checkpoint_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(o.checkpoint_dir, ec);
      check_writable(o.checkpoint_dir + "/checkpoint", "--checkpoint-dir");
    }
  }
  if (rank == 0 && !o.metrics_path.empty()) parts.push_back(std::make_shared<MetricsPart>(o.metrics_path));
  if (!o.timeline_path.empty()) parts.push_back(std::make_shared<TimelinePart>());
  if (rank == 0 && !o.plot_path.empty()) parts.push_back(std::make_shared<PlotPart>());
  // Before the checkpoint: a resume replaces the weights it loaded.
  if (!o.init_from.empty()) parts.push_back(std::make_shared<InitFromPart>());
  if (!o.checkpoint_dir.empty()) parts.push_back(std::make_shared<CheckpointPart>(o));
  if (elastic.state) parts.push_back(std::make_shared<ElasticPart>(elastic));
  return parts;
}

}  // namespace ringtorch
