#include "models/mlp3.h"

#include <torch/nn/functional/activation.h>

namespace ringtorch {

Mlp3Impl::Mlp3Impl(const ImageShape& input) {
  fc1 = register_module("fc1", torch::nn::Linear(input.channels * input.height * input.width, 1024));
  fc2 = register_module("fc2", torch::nn::Linear(1024, 1024));
  fc3 = register_module("fc3", torch::nn::Linear(1024, input.classes));
}

torch::Tensor Mlp3Impl::forward(const torch::Tensor& x) {
  auto h = torch::relu(fc1->forward(x.flatten(1)));
  return fc3->forward(torch::relu(fc2->forward(h)));
}

}  // namespace ringtorch
