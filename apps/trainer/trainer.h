// The seeds' training program as a library call (at the apps layer: it wires datasets/,
// models/ and runtime/ together, which no lower layer may do): load the dataset, build the model, wrap it in
// DistributedDataParallel, train with a DistributedSampler, evaluate after each epoch,
// checkpoint on rank 0, and report. apps/ringtrain is its command line.
//
// Output (stdout): per epoch and rank "Rank R, Epoch [e/E], Loss: x" as the seeds print it;
// on rank 0 "Test accuracy: 0.8123 (8123/10000)", progress with samples/s (a bar on a
// terminal, periodic lines elsewhere: progress.h), and at the end one JSON line (see
// TrainingReport). --metrics FILE gets one JSON line per epoch.
//
// Thread-safety: one call per process at a time.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/comm/process_group.h"

namespace ringtorch {

struct TrainerOptions {
  std::string dataset = "fashion-mnist";
  std::string data_dir;  // empty: the dataset's default
  std::string model = "lenet";
  int epochs = 1;
  int batch_size = 64;  // per rank
  double lr = 0.01;
  double momentum = 0.9;
  double weight_decay = 0;
  std::string optimizer = "sgd";  // sgd | adam
  uint64_t seed = 0;
  int threads = 0;                // intra-op threads per rank; 0: leave LibTorch's choice
  std::string checkpoint_dir;     // empty: no checkpoints
  bool resume = false;            // continue from checkpoint_dir's newest checkpoint
  std::string metrics_path;       // empty: no metrics file
  int log_interval = 100;         // batches between progress lines on rank 0 (lines style)
  std::string progress = "auto";  // auto | bar | lines | off (progress.h)
  // Devices (device_selection.h): --device auto|cpu|cuda|cuda:N and --gpus ids, resolved with
  // LOCAL_RANK and the visible CUDA devices; `devices`, when set, is used as given instead
  // (several entries: DataParallel inside the process, CPU "devices" included).
  std::string device = "auto";
  std::vector<int> gpus;
  std::vector<c10::Device> devices;
};

// Throws InvalidArgumentError naming the option and value for bad options (before any collective).
void validate(const TrainerOptions& options);

struct TrainingReport {
  int world_size = 0;
  std::string device;             // "cpu", "cuda:0", "cuda:0,cuda:1" (DataParallel)
  double samples_per_second = 0;  // all ranks together, training only
  std::vector<double> epoch_seconds;
  double final_loss = 0;                    // mean over the last epoch's batches and ranks
  double test_accuracy = 0;                 // after the last epoch, counted over all ranks
  std::vector<double> parameter_checksums;  // one per rank; all equal
  std::string to_json() const;
};

// Collective: every rank of `group` calls it with the same options.
TrainingReport train(const TrainerOptions& options, ProcessGroup& group);

}  // namespace ringtorch
