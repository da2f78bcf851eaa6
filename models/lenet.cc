#include "models/lenet.h"

#include <torch/nn/functional/pooling.h>

namespace ringtorch {

LeNetImpl::LeNetImpl(const ImageShape& input_shape) : input(input_shape) {
  conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(input.channels, 6, 5).padding(2)));
  conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(6, 16, 5)));
  fc1 = register_module("fc1", torch::nn::Linear(16 * ((input.height / 2 - 4) / 2) * ((input.width / 2 - 4) / 2), 120));
  fc2 = register_module("fc2", torch::nn::Linear(120, 84));
  fc3 = register_module("fc3", torch::nn::Linear(84, input.classes));
}

torch::Tensor LeNetImpl::forward(const torch::Tensor& x) {
  auto h = x.dim() == 2 ? x.view({-1, input.channels, input.height, input.width}) : x;
  h = torch::max_pool2d(torch::relu(conv1->forward(h)), 2);
  h = torch::max_pool2d(torch::relu(conv2->forward(h)), 2);
  h = torch::relu(fc1->forward(h.flatten(1)));
  return fc3->forward(torch::relu(fc2->forward(h)));
}

}  // namespace ringtorch
