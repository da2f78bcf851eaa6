// mlp3: a three-layer perceptron, 784-1024-1024-10 with ReLU. Python's definition, whose
// parameter names (fc1.weight ... fc3.bias) this one keeps:
//
//   class MLP3(nn.Module):
//       def __init__(self):
//           super().__init__()
//           self.fc1 = nn.Linear(784, 1024)
//           self.fc2 = nn.Linear(1024, 1024)
//           self.fc3 = nn.Linear(1024, 10)
//       def forward(self, x):
//           x = F.relu(self.fc1(x.flatten(1)))
//           return self.fc3(F.relu(self.fc2(x)))
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <ringtorch/models.h>

namespace ringtorch {

struct Mlp3Impl : torch::nn::Module {
  // C*H*W-1024-1024-classes: 784 inputs for the default 1x28x28.
  explicit Mlp3Impl(const ImageShape& input = {});
  // x: [batch, C*H*W] or [batch, C, H, W] -> logits [batch, classes]
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(Mlp3);

}  // namespace ringtorch
