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

namespace ringtorch {

struct Mlp3Impl : torch::nn::Module {
  Mlp3Impl();
  // x: [batch, 784] or [batch, 1, 28, 28] -> logits [batch, 10]
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(Mlp3);

}  // namespace ringtorch
