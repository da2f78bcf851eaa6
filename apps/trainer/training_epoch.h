// One epoch of train(): its steps, then its evaluation (training_run.h).
//
// Output (stdout): "Rank R, Epoch [e/E], Loss: x" on every rank, and on rank 0 the straggler
// table (rank_report.h) and "Test accuracy: 0.8123 (8123/10000)".
#pragma once

#include "apps/trainer/progress.h"
#include "apps/trainer/training_run.h"

namespace ringtorch {

// The epoch's steps, each followed by every part's on_step_end; then the parts'
// on_epoch_trained, the per-rank times (gathered), the loss line and the mean loss over all
// ranks. Collectives. Fills the training fields of the outcome.
EpochOutcome train_epoch(TrainingRun& run, BatchPlan& batches, TrainerParts& parts, ProgressReporter& reporter,
                         int64_t epoch);

// The test accuracy over the whole test set (each rank takes every world-th image, so nothing
// is counted twice; the counts are summed): a collective. Rank 0 prints it.
void evaluate_epoch(TrainingRun& run, EpochOutcome& outcome);

}  // namespace ringtorch
