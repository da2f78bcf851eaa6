// The content of one checkpoint file, to bytes and back, without files or processes: the dict
// layout that checkpoint.h documents, saved with torch::pickle_save. checkpoint.h adds the files
// (atomic writes, checksum sidecars, rotation) and the group's barrier.
//
// Thread-safety: free functions; restoring writes into the model, the optimizer and the CPU
// generator, so one caller at a time per model.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ringtorch {

struct TrainingProgress {
  int64_t epoch = 0;
  int64_t step = 0;                             // optimizer steps so far, over all epochs
  int64_t samples_in_epoch = 0;                 // samples of `epoch` all ranks together trained (its order's prefix)
  std::map<std::string, std::string> metadata;  // run metadata (model name, world size, ...)
};

// The checkpoint of `model` (its parameters and buffers), `optimizer` (may be null), `progress`
// and the CPU generator's state.
std::vector<char> serialize_checkpoint(const torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                                       const TrainingProgress& progress);

// Restores `bytes` into `model`, `optimizer` (when the checkpoint has its state) and the CPU
// generator, all or nothing: on any failure they are left as they were. `path` is the file the
// bytes came from, for messages. Throws InvalidArgumentError when the weights do not fit `model`
// (missing or unexpected names, other shapes, an entry of the wrong kind) and IoError for bytes
// that are not a readable checkpoint (what LibTorch says about them included).
TrainingProgress restore_checkpoint(const std::vector<char>& bytes, const std::string& path, torch::nn::Module& model,
                                    torch::optim::Optimizer* optimizer);

}  // namespace ringtorch
