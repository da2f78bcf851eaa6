// Checkpoints: rank 0 writes, every rank resumes.
//
// Example (given: torch::nn::Module& model, torch::optim::SGD& sgd, ringtorch::ProcessGroup& group):
//   ringtorch::Checkpointer checkpoints("runs/lenet", /*keep_last=*/3);
//   ringtorch::TrainingProgress progress;
//   if (auto resumed = checkpoints.load_latest(model, &sgd)) progress = *resumed;  // every rank
//   progress.metadata["model"] = "lenet";
//   checkpoints.save(model, &sgd, progress, &group);  // every rank calls; rank 0 writes
//
// File format: `checkpoint-<step, 10 digits>.pt`, a plain dict saved with torch::pickle_save
// (zip), so Python's torch.load reads it and `model.load_state_dict(ckpt["model"])` accepts it:
//   "format"           "ringtorch-checkpoint-2"
//   "model"            {name: tensor} for every parameter and buffer
//   "optimizer_state"  {"kind", "parameters"}: per-parameter state as tensors and ints
//                      (optimizer_state.h; absent without optimizer)
//   "epoch", "step", "samples_in_epoch"   ints (how much of the epoch's order all ranks trained)
//   "rng_state"        uint8 tensor: the CPU generator's state
//   "metadata"         {str: str}
//   "extra_state"      {str: tensor}: a training mode's own state (PowerSGD's: docs/training.md);
//                      absent when there is none
// Beside it, `checkpoint-<step>.pt.crc32`: "<crc32 hex> <bytes>", written after the data file.
// Both are written to a temporary name, fsynced and renamed, so a checkpoint is either whole or
// absent (a temporary file left by a writer killed mid-save is removed by the next Checkpointer); one whose sidecar
// does not match is skipped on load with a warning naming the file, and the previous one is used. One without a
// sidecar (Python's torch.save wrote it, or its writer stopped between the two renames) is loaded with a warning that
// its bytes are unverified; a save whose sidecar cannot be written (a full disk) removes its data file. Format 1
// (the earliest) kept LibTorch's optimizer archive, a TorchScript module, as bytes under "optimizer": its weights and
// position still load, its optimizer state is skipped with a warning (loading it compiles the code stored in the file,
// and damaged code crashed that compiler).
//
// Thread-safety: none; one training thread. Every rank must see the directory to resume (rank 0
// writes it): progress and optimizer state are read by each rank, not broadcast.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ringtorch/checkpoint_format.h>
#include <ringtorch/process_group.h>

namespace ringtorch {

class Checkpointer {
 public:
  explicit Checkpointer(std::string directory, int keep_last = 3);

  // Rank 0 (or the caller, without a group) writes; then every rank of `group` learns whether
  // it did (one small all-reduce), so none runs ahead of a checkpoint being written and all
  // throw when rank 0 could not write. Returns the file's path. A model holding NaN or inf is
  // never written: the newest finite checkpoint stays, rank 0 throws InvalidArgumentError naming
  // the tensor and the others InvalidArgumentError saying that rank 0 refused; any other failure
  // of rank 0 is rank 0's error there and IoError on the others.
  std::string save(const torch::nn::Module& model, torch::optim::Optimizer* optimizer, const TrainingProgress& progress,
                   ProcessGroup* group = nullptr);

  // Restores the newest loadable checkpoint into `model` (and `optimizer`, and the CPU RNG);
  // damaged ones are skipped with a warning on stderr naming the file and why. nullopt: the
  // directory holds no checkpoint file. Throws IoError when it holds some and none could be
  // loaded (the model is then as it was), InvalidArgumentError for a whole checkpoint that does
  // not fit `model`.
  std::optional<TrainingProgress> load_latest(torch::nn::Module& model, torch::optim::Optimizer* optimizer);

  // Complete checkpoints (sidecar present), oldest first.
  std::vector<std::string> list() const;
  // Every checkpoint file, with or without its sidecar (what load_latest tries, and what
  // retention, keep_last, counts), oldest first.
  std::vector<std::string> all_files() const;
  const std::string& directory() const { return directory_; }

 private:
  // Once per Checkpointer, before its first save or load: removes the temporary files that
  // writers killed mid-save left in the directory (base/atomic_file.h).
  void tidy();

  std::string directory_;
  int keep_last_;
  bool tidied_ = false;
};

// The name of the first parameter or buffer of `model` holding NaN or inf; empty when all are
// finite. One pass over the weights (what Checkpointer::save checks before writing).
std::string first_non_finite(const torch::nn::Module& model);

// Reads one checkpoint file without a checksum (e.g. one Python re-saved with torch.save).
// Throws IoError for an unreadable file, InvalidArgumentError when its model entry does not
// match `model` (missing or unexpected names, other shapes).
TrainingProgress load_checkpoint_file(const std::string& path, torch::nn::Module& model,
                                      torch::optim::Optimizer* optimizer);

// Loads a state_dict file (what Python's torch.save(model.state_dict(), path) writes, a
// checkpoint with a "model" entry, ...: restore_state_dict in checkpoint_format.h) into
// `model`'s parameters and buffers, strictly. Returns what was used. Throws IoError for an
// unreadable file, InvalidArgumentError when it does not fit `model`.
std::string load_state_dict_file(const std::string& path, torch::nn::Module& model);

}  // namespace ringtorch
