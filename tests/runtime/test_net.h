// The small model the checkpoint tests save and load: fc1 8->16, fc2 16->4 and a buffer
// "steps" (parameters and a buffer). tests/runtime/checkpoint_interop.py and
// torch_save_cases.py define the same model in Python.
#pragma once

#include <torch/torch.h>

namespace ringtorch {

struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 4));
    register_buffer("steps", torch::zeros({1}));
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Net);

}  // namespace ringtorch
