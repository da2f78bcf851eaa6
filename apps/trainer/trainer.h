// The seeds' training program as a library call (at the apps layer: it wires datasets/,
// models/ and runtime/ together, which no lower layer may do): load the dataset, build the model, wrap it in
// DistributedDataParallel, train with a DistributedSampler, evaluate after each epoch,
// checkpoint on rank 0, and report. apps/ringtrain is its command line.
//
// Output (stdout): per epoch and rank "Rank R, Epoch [e/E], Loss: x" as the seeds print it;
// on rank 0 "Test accuracy: 0.8123 (8123/10000)", progress with samples/s (a bar on a
// terminal, periodic lines elsewhere: progress.h), and at the end one JSON line (see
// TrainingReport). --metrics FILE gets one JSON line per epoch. After each epoch rank 0 prints
// the straggler table (rank_report.h). --timeline FILE: every rank's timeline, gathered to rank
// 0, in one Chrome trace; --plot FILE.svg: loss, accuracy and samples/s per rank (PLplot).
//
// Thread-safety: one call per process at a time.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ringtorch/elastic_state.h>
#include <ringtorch/error.h>
#include <ringtorch/image_dataset.h>
#include <ringtorch/process_group.h>

#include "apps/trainer/trainer_options.h"

namespace ringtorch {

// Throws InvalidArgumentError naming the option and value for bad options (before any collective).
void validate(const TrainerOptions& options);

struct TrainingReport {
  int world_size = 0;
  std::string device;             // "cpu", "cuda:0", "cuda:0,cuda:1" (DataParallel)
  double samples_per_second = 0;  // all ranks together, training only
  std::vector<double> epoch_seconds;
  double final_loss = 0;     // the last epoch's mean loss: over batches and ranks; with --balance, over samples;
                             // NaN (null in the JSON) when no epoch was left to train in this call
  double test_accuracy = 0;  // after the last epoch, counted over all ranks
  std::vector<double> parameter_checksums;  // one per rank; all equal
  // With --balance auto or weights (else empty): the mode, and the final per-rank batches and
  // weights.
  std::string balance;
  std::vector<int64_t> split;
  std::vector<double> weights;
  // Per rank over the whole run: samples, samples/s, compute and communication-wait seconds
  // (rank_report.h), as a JSON array's text.
  std::string ranks_json;
  std::string grad_compression = "none";  // --grad-compression, as "powersgd:4"
  // With PowerSGD, once it started: gradient elements per step, and elements sent per step.
  int64_t powersgd_start_step = 0, powersgd_elements_before = 0, powersgd_elements_after = 0;
  // With --local-steps (else 0): H, the outer settings, the outer steps taken and the elements
  // each all-reduced; each rank's inner steps are its "steps" in ranks_json.
  int local_steps = 0;
  double outer_lr = 0, outer_momentum = 0;
  std::string outer_compression;
  int outer_overlap = 0;
  int64_t outer_steps = 0, elements_per_outer_step = 0;
  std::string to_json() const;
};

// --elastic in-process (docs/training.md, "Elastic training"): the state train() commits every
// `commit_every_steps` steps and at epoch ends, and syncs from the newest commit of any rank
// when it starts; at each commit the ranks agree whether `generation_ended` (a node joins or
// left), and if so train() throws MembershipChanged so that the caller makes the next group.
struct ElasticHooks {
  ElasticState* state = nullptr;  // null: no in-process recovery
  int commit_every_steps = 10;
  std::function<bool()> generation_ended;
  // Filled by the first train() call and reused by the next: a recovery does not read the
  // dataset again. Null: train() loads its own.
  struct Datasets {
    std::optional<ImageDataset> train, test;
  };
  Datasets* datasets = nullptr;
};

// Thrown out of train() at a commit where the ranks agreed that the generation ended
// (--elastic in-process): the caller makes the next group and trains on.
class MembershipChanged : public MembershipChangedError {
 public:
  using MembershipChangedError::MembershipChangedError;
};

// Collective: every rank of `group` calls it with the same options.
TrainingReport train(const TrainerOptions& options, ProcessGroup& group, const ElasticHooks& elastic = {});

}  // namespace ringtorch
