// The seeds' SimpleModel: one Linear(784 -> 10) over a flattened 1x28x28 image (any ImageShape:
// Linear(C*H*W -> 10)).
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

#include <ringtorch/models.h>

namespace ringtorch {

struct MlpImpl : torch::nn::Module {
  // Linear(C*H*W -> classes): 784 -> 10 for the default 1x28x28.
  explicit MlpImpl(const ImageShape& input = {});
  // x: [batch, C*H*W] or [batch, C, H, W] -> logits [batch, classes]
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Mlp);

}  // namespace ringtorch
