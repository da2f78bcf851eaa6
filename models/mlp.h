// The seeds' SimpleModel: one Linear(784 -> 10) over a flattened 28x28 image.
// Parameter names equal the Python definition's (`fc.weight`, `fc.bias`), so state dicts match:
//
//   class SimpleModel(nn.Module):
//       def __init__(self):
//           super().__init__()
//           self.fc = nn.Linear(784, 10)
//       def forward(self, x):
//           return self.fc(x.flatten(1))
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace ringtorch {

struct MlpImpl : torch::nn::Module {
  MlpImpl();
  // x: [batch, 784] or [batch, 1, 28, 28] -> logits [batch, 10]
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Mlp);

}  // namespace ringtorch
