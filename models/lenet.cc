#include "models/lenet.h"

#include <torch/nn/functional/pooling.h>

namespace ringtorch {

LeNetImpl::LeNetImpl() {
  conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 6, 5).padding(2)));
  conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(6, 16, 5)));
  fc1 = register_module("fc1", torch::nn::Linear(16 * 5 * 5, 120));
  fc2 = register_module("fc2", torch::nn::Linear(120, 84));
  fc3 = register_module("fc3", torch::nn::Linear(84, 10));
}

torch::Tensor LeNetImpl::forward(const torch::Tensor& x) {
  auto h = x.dim() == 2 ? x.view({-1, 1, 28, 28}) : x;
  h = torch::max_pool2d(torch::relu(conv1->forward(h)), 2);
  h = torch::max_pool2d(torch::relu(conv2->forward(h)), 2);
  h = torch::relu(fc1->forward(h.flatten(1)));
  return fc3->forward(torch::relu(fc2->forward(h)));
}

}  // namespace ringtorch
