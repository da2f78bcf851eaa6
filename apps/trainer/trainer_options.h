// What one training run is asked to do: ringtrain's flags (and job config keys) as a struct.
// trainer.h trains with it; job_config.h fills it from flags and JSON.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ringtorch {

struct TrainerOptions {
  std::string dataset = "fashion-mnist";
  std::string data_dir;  // empty: the dataset's default
  std::string model = "lenet";
  int epochs = 1;
  int batch_size = 64;  // per rank (with --balance: the global batch is batch_size x world size)
  // Ranks of unequal speed (docs/training.md): "equal" (every rank batch_size, as DDP),
  // "auto" (per-rank batches follow measured speed), weights "3:1" (one per rank), or with
  // local_steps "dynamic" (each period's batches go to the ranks as they ask: batch_claims.h).
  std::string balance = "equal";
  int global_batch = 0;           // with --balance other than equal: the global batch; 0: batch_size x world size
  int64_t max_train_samples = 0;  // > 0: train on the first N training images only (quick runs, benchmarks)
  double lr = 0.01;
  double momentum = 0.9;
  double weight_decay = 0;
  std::string optimizer = "sgd";  // sgd | adam
  uint64_t seed = 0;
  int threads = 0;             // intra-op threads per rank; 0: leave LibTorch's choice
  std::string checkpoint_dir;  // empty: no checkpoints
  bool resume = false;         // continue from checkpoint_dir's newest checkpoint
  // A state_dict file (Python's torch.save(model.state_dict(), FILE), or a checkpoint) every rank
  // loads into the model before training, strictly; a resume's checkpoint replaces it.
  std::string init_from;
  // How DDP's gradient buckets travel (grad_compression.h): "none" (all-reduce in the
  // gradients' dtype), "fp16", "bf16" (half the bytes), "powersgd" or "powersgd:RANK" (low-rank
  // approximation with error feedback; RANK default 4).
  std::string grad_compression = "none";
  // Backward passes all-reduced plainly before PowerSGD starts: 2, the least PyTorch accepts (on a
  // slow link each plain step costs as much as hundreds of compressed ones).
  int64_t powersgd_start_step = 2;
  // Local SGD (local_steps.h, DiLoCo): > 0: each rank takes this many inner steps of its own
  // between outer steps, with no gradient all-reduce (with --balance, the period trains this many
  // global batches, split by speed: ranks take unequal numbers of inner steps). 0: DDP.
  int local_steps = 0;
  double outer_lr = 0.7;                   // the outer optimizer's (SGD with Nesterov momentum)
  double outer_momentum = 0.9;             // 0: none
  std::string outer_compression = "none";  // none | bf16: the outer gradient's all-reduce
  int outer_overlap = 0;  // > 0: the outer all-reduce travels during this many of the next period's inner steps
  int checkpoint_every_steps = 0;  // > 0: also checkpoint every N optimizer steps inside an epoch
  // false: a NaN or infinite loss (any step) or weights (an epoch's end) stop training with an
  // error naming rank, epoch and step. true: warn once and go on; checkpoints are still never
  // written from non-finite weights.
  bool allow_non_finite = false;
  // "restart" (a lost peer ends the process; ringrun restarts it: torchrun's way) or
  // "in-process" (the survivors recover inside their processes: elastic_state.h).
  std::string elastic = "restart";
  int commit_every_steps = 10;    // --elastic in-process: steps between commits of the state
  std::string metrics_path;       // empty: no metrics file
  std::string timeline_path;      // empty: no timeline; else every rank's, merged on rank 0 (Chrome trace)
  std::string plot_path;          // empty: no picture; else an .svg of the run drawn by rank 0 at the end
  int log_interval = 100;         // batches between progress lines on rank 0 (lines style)
  std::string progress = "auto";  // auto | bar | lines | off (progress.h)
  // Devices (device_selection.h): --device auto|cpu|cuda|cuda:N and --gpus ids, resolved with
  // LOCAL_RANK and the visible CUDA devices; `devices`, when set, is used as given instead
  // (several entries: DataParallel inside the process, CPU "devices" included).
  std::string device = "auto";
  std::vector<int> gpus;
  std::vector<c10::Device> devices;
};

}  // namespace ringtorch
