// Fuzz target: restoring a checkpoint's bytes (runtime/training/checkpoint_format.h) into a small
// model (a Linear layer and a BatchNorm, so parameters and buffers) with an SGD optimizer that
// has momentum state. Any bytes must restore or throw a ringtorch::Error (which
// Checkpointer::load_latest turns into "skipping checkpoint"); and a restore that throws must
// leave the model and the optimizer exactly as they were (all or nothing).
//
// The pickle is read by ringtorch's own reader (pickle_reader.cc), instrumented; LibTorch's zip
// reader is not: coverage guides the fuzzer through ringtorch's code only, and LibTorch's crashes
// still count (a signal ends the run as a finding). Seeds: a checkpoint of this model as
// ringtorch writes it, and as Python's torch.save writes it again (SETITEM, OrderedDict).
//
// RINGTORCH_FUZZ_WRITE_SEED=FILE writes a valid checkpoint of this model there (the seed corpus).
#include <ATen/Parallel.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <ringtorch/checkpoint_format.h>
#include <ringtorch/error.h>

namespace {

struct Target {
  torch::nn::Sequential model{torch::nn::Linear(3, 2), torch::nn::BatchNorm1d(2)};
  torch::optim::SGD sgd{model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9)};

  Target() {  // one step, so that the optimizer has momentum buffers to restore
    model->train();
    auto loss = model->forward(torch::ones({4, 3})).sum();
    loss.backward();
    sgd.step();
  }

  // Parameters, buffers and momentum buffers, copied.
  std::vector<at::Tensor> snapshot() {
    std::vector<at::Tensor> tensors;
    for (const auto& t : model->parameters()) tensors.push_back(t.detach().clone());
    for (const auto& t : model->buffers()) tensors.push_back(t.detach().clone());
    std::map<std::string, at::Tensor> momentum;  // by LibTorch's key for each parameter
    for (const auto& [key, state] : sgd.state()) {
      momentum[key] = static_cast<torch::optim::SGDParamState&>(*state).momentum_buffer().clone();
    }
    for (const auto& [key, buffer] : momentum) tensors.push_back(buffer);
    return tensors;
  }
};

// Bitwise, so that NaN weights a checkpoint may hold compare equal to themselves.
bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  at::set_num_threads(1);
  if (const char* seed = std::getenv("RINGTORCH_FUZZ_WRITE_SEED")) {
    torch::manual_seed(0);
    Target t;
    ringtorch::TrainingProgress progress{2, 40, 128, {{"model", "fuzz"}}, {}};
    const std::vector<char> bytes = ringtorch::serialize_checkpoint(*t.model, &t.sgd, progress);
    std::ofstream(seed, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A fresh model and optimizer for every input, so that each input replays alone.
  torch::manual_seed(0);
  Target t;
  const std::vector<at::Tensor> before = t.snapshot();
  bool restored = false;
  try {
    ringtorch::restore_checkpoint(std::vector<char>(data, data + size), "fuzz.pt", *t.model, &t.sgd);
    restored = true;
  } catch (const ringtorch::Error&) {
  }
  if (!restored) {
    const std::vector<at::Tensor> after = t.snapshot();
    // A failed restore must not change the model or the optimizer.
    if (after.size() != before.size()) std::abort();
    for (size_t i = 0; i < before.size(); ++i) {
      if (!same_bits(before[i], after[i])) std::abort();
    }
  }
  return 0;
}
