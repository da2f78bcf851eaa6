// The optional parts of ringtrain's training loop (training_run.h's TrainerPart), each made only
// when its flag asks for it:
//   CheckpointPart  --checkpoint-dir: resumes from the newest checkpoint (--resume), saves every
//                   --checkpoint-every-steps steps inside an epoch and at every epoch's end
//                   (every rank calls; rank 0 writes)
//   ElasticPart     --elastic in-process: syncs from the newest commit of any rank at the start,
//                   commits every --commit-every-steps steps and at epoch ends, and leaves the
//                   loop (MembershipChanged) when the ranks agree that the generation ended
//   MetricsPart     --metrics FILE (rank 0): one JSON line per epoch
//   PlotPart        --plot FILE.svg (rank 0): loss, accuracy and samples/s per epoch, drawn at the end
//   TimelinePart    --timeline FILE: every rank's timeline gathered to rank 0, merged into FILE
//
// Thread-safety: the training loop's thread.
#pragma once

#include <memory>

#include "apps/trainer/training_run.h"

namespace ringtorch {

// Every part `options` asks for, after `plan_parts` (the batch plan's, if any), in the order
// the loop calls them: the balancer first (the metrics line records the split it decided at the
// epoch's end), the timeline before the plot (a plot that cannot be written then fails rank 0
// after the last collective, not the others), the checkpoint before the elastic commit, and
// both last at an epoch's end (a generation that ended leaves after the epoch was reported).
TrainerParts make_trainer_parts(const TrainerOptions& options, const ElasticHooks& elastic, int rank,
                                TrainerParts plan_parts);

}  // namespace ringtorch
