// The state of one train() call and the interfaces its loop is built from (trainer.h).
//
// train() is a short sequence of phases: set-up (set_up_run), then per epoch the steps
// (training_epoch.h), the evaluation and the report, then the finish. Everything optional
// (checkpoints, elastic commits, the metrics file, the timeline, the plot, the batch balancer)
// is a TrainerPart that subscribes to those phases; the loop itself does not know them. A new
// training mode is a new part, not an edit of the loop.
//
// Collectives: every rank builds the same parts from the same options and the loop calls them
// in the same order, so a part may run collectives in any of its hooks, as long as it runs the
// same ones on every rank.
//
// Thread-safety: one thread (the training loop) owns a TrainingRun and its parts.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ringtorch/batch_claims.h>
#include <ringtorch/checkpoint_format.h>
#include <ringtorch/data_parallel.h>
#include <ringtorch/distributed_data_parallel.h>
#include <ringtorch/local_sgd.h>
#include <ringtorch/powersgd.h>

#include "apps/trainer/device_selection.h"
#include "apps/trainer/rank_report.h"
#include "apps/trainer/trainer.h"

namespace ringtorch {

// The model on its device(s): one module, or DataParallel replicas (its primary is module()).
struct PlacedModel {
  torch::nn::AnyModule single;
  std::unique_ptr<DataParallel> replicas;
  torch::nn::Module& module() { return replicas ? replicas->module() : *single.ptr(); }
  torch::Tensor forward(const torch::Tensor& x) { return replicas ? replicas->forward(x) : single.forward(x); }
};

struct TrainingRun {
  TrainingRun(const TrainerOptions& o, ProcessGroup& g) : options(o), group(g) {}

  const TrainerOptions& options;
  ProcessGroup& group;  // the whole job's
  int rank = 0, world = 1;
  std::shared_ptr<ElasticHooks::Datasets> own_datasets;  // when the caller keeps none
  const ImageDataset* train_set = nullptr;
  const ImageDataset* test_set = nullptr;
  int64_t train_size = 0;  // the images trained each epoch (--max-train-samples caps it)
  DeviceSelection devices;
  c10::Device device = c10::Device(c10::kCPU);  // devices.devices[0]
  PlacedModel model;
  DdpOptions ddp_options;
  // --grad-compression powersgd: the hook's state, which checkpoints and elastic commits carry
  // (grad_compression.h); null otherwise.
  std::shared_ptr<PowerSgdState> powersgd;
  std::unique_ptr<DistributedDataParallel> ddp;  // null on a rank that sits out (--balance auto), or with local_sgd
  // --local-steps: the outer steps (local_steps.h) instead of DDP; null otherwise.
  std::unique_ptr<LocalSgd> local_sgd;
  // --balance dynamic (with --local-steps): a period's step_indices() are the whole period's, and
  // the rank trains the batches of them it claims here (batch_claims.h); null otherwise.
  std::shared_ptr<BatchClaims> claims;
  bool trains() const { return ddp || local_sgd; }  // false: this rank sits out
  // Some rank sits out: its weights lag until the epoch's end, so nothing is saved inside an
  // epoch meanwhile (rank 0 may be the one).
  bool ranks_sit_out = false;
  std::vector<int64_t> split;  // with --balance: the per-rank batches trained at; else empty
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  // The job's position: epochs done, optimizer steps, samples of the current epoch all ranks
  // trained. Checkpoints and elastic commits record it; resuming restores it.
  TrainingProgress progress;

  // From now on the model trains in `training_group` (all ranks, or the subgroup of those that
  // do not sit out); a rank outside it sits out (ddp becomes null).
  void train_in(const std::shared_ptr<ProcessGroup>& training_group);
  // The position after this run's first `samples_done` samples of `epoch`, for a save inside it.
  TrainingProgress position_in_epoch(int64_t epoch, int64_t samples_done) const;
  // The metadata every checkpoint carries (model, dataset, world size).
  std::map<std::string, std::string> checkpoint_metadata() const;
};

// Data, devices, the model (seeded, placed), DistributedDataParallel over `group` and the
// optimizer. `datasets` (ElasticHooks::Datasets) keeps the images across in-process recoveries;
// null: read them here.
TrainingRun set_up_run(const TrainerOptions& options, ProcessGroup& group, ElasticHooks::Datasets* datasets);

// One optimizer step as the loop saw it.
struct StepOutcome {
  int64_t epoch = 0;
  int64_t step = 0;         // within the epoch
  bool trained = false;     // false: this rank sits out
  int64_t inner_steps = 1;  // this rank's optimizer steps in it (--local-steps: the period's, maybe 0)
  bool last_in_epoch = false;
  int64_t samples = 0;       // this rank's
  int64_t samples_done = 0;  // of the epoch so far, all ranks (the epoch order's prefix)
  double loss = 0;
  // The gradient every rank holds after the all-reduce (the model's last parameter's): finite
  // on all ranks or on none, so a rank whose own loss stayed finite still sees another's NaN.
  // With --local-steps, the last parameter after the outer step, the same on every rank; with
  // --outer-overlap, the rank's own replica, whose outer step lands a period later: ranks may
  // see a NaN a period apart, and the first to stop leaves the others a lost peer.
  bool averaged_gradient_finite = true;
  double seconds = 0;          // the whole step
  double compute_seconds = 0;  // without its waits for the other ranks (rank_report.h)
};

// One epoch as the loop saw it: training, then evaluation.
struct EpochOutcome {
  int64_t epoch = 0;
  double seconds = 0;            // training, wall clock (evaluation excluded)
  int64_t trained_samples = 0;   // all ranks, this run
  RankTimes times;               // this rank's
  std::vector<RankTimes> ranks;  // every rank's (gathered)
  double loss = 0;               // mean over ranks (per batch; with --balance per sample)
  double test_accuracy = 0;
  int64_t correct = 0, evaluated = 0;
};

// Which samples each step trains on, and how far through the epoch's order the job is.
class BatchPlan {
 public:
  virtual ~BatchPlan() = default;
  // Starts `epoch` after `trained_before` samples of its order (a resumed epoch); returns the
  // number of steps.
  virtual int64_t begin_epoch(int64_t epoch, int64_t trained_before) = 0;
  virtual int64_t epoch_samples() const = 0;  // all ranks, trained_before included
  virtual std::vector<int64_t> step_indices(int64_t step) = 0;
  // All ranks' samples of the epoch after `steps` steps of this run, trained_before included.
  virtual int64_t trained_after(int64_t steps) const = 0;
};

// Something the loop calls at its phases. Every hook has a default that does nothing.
class TrainerPart {
 public:
  virtual ~TrainerPart() = default;
  virtual void on_start(TrainingRun&) {}                             // after set-up, before the first epoch
  virtual void on_step_end(TrainingRun&, const StepOutcome&) {}      // after each step (progress counts it)
  virtual void on_epoch_trained(TrainingRun&, int64_t /*steps*/) {}  // after the epoch's last step
  virtual void on_epoch_end(TrainingRun&, const EpochOutcome&) {}    // after evaluation; progress is at the epoch's end
  virtual void on_finish(TrainingRun&, TrainingReport&) {}           // after the last epoch
};

using TrainerParts = std::vector<std::shared_ptr<TrainerPart>>;

}  // namespace ringtorch
