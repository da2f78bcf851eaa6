// The content of one checkpoint file, to bytes and back, without files or processes: the dict
// layout that checkpoint.h documents, saved with torch::pickle_save. checkpoint.h adds the files
// (atomic writes, checksum sidecars, rotation) and the group's barrier.
//
// Thread-safety: free functions; restoring writes into the model, the optimizer and the CPU
// generator, so one caller at a time per model.
#pragma once

#include <ATen/core/ivalue.h>
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
  // State beyond the model and the optimizer that a training mode keeps, by name (PowerSGD's Q
  // and error buffers: "powersgd.*"); the checkpoint's "extra_state" dict. Empty: none.
  std::map<std::string, at::Tensor> extra_state;
};

// The checkpoint of `model` (its parameters and buffers), `optimizer` (may be null), `progress`
// (its extra_state included) and the CPU generator's state.
std::vector<char> serialize_checkpoint(const torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                                       const TrainingProgress& progress);

// Restores `bytes` into `model`, `optimizer` (when the checkpoint has its state) and the CPU
// generator, all or nothing: on any failure they are left as they were. `path` is the file the
// bytes came from, for messages. Throws InvalidArgumentError when the weights do not fit `model`
// (missing or unexpected names, other shapes, an entry of the wrong kind) and IoError for bytes
// that are not a readable checkpoint (what LibTorch says about them included).
TrainingProgress restore_checkpoint(const std::vector<char>& bytes, const std::string& path, torch::nn::Module& model,
                                    torch::optim::Optimizer* optimizer);

// What Python's torch.load(path, weights_only=True) returns, as an IValue: `bytes` are a zip
// archive written by torch.save (torch 1.13 and 2.x, pickle protocols 2-5) or torch::pickle_save.
// Dicts (keys: strings, integers 0 to 2^31-1), lists, tuples, None, bools, integers, floats,
// strings (bytes too) and CPU tensors; an OrderedDict becomes a dict. Throws IoError naming
// `path` for damaged bytes and for anything else (another class, a set, a float key), naming it.
c10::IValue read_torch_save(const std::vector<char>& bytes, const std::string& path);

// Loads the weights of a state_dict into `model`, as Python's
// model.load_state_dict(torch.load(path), strict=True): `bytes` are what torch.save wrote for a
// state_dict (an OrderedDict or dict of name -> tensor), or for a dict whose "model",
// "state_dict" or "model_state_dict" entry is one (a ringtorch checkpoint included). Names
// saved from a model wrapped in DistributedDataParallel ("module.fc1.weight") lose the
// "module." when every name has it. Returns what was used ("the state_dict", "its 'model'
// entry", ...). Throws InvalidArgumentError naming each missing, unexpected or mis-shaped entry
// (the model unchanged) and IoError for bytes that are not a readable torch.save archive.
std::string restore_state_dict(const std::vector<char>& bytes, const std::string& path, torch::nn::Module& model);

}  // namespace ringtorch
