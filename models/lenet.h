// lenet: LeNet-5 for images of any ImageShape (default 1x28x28). Python's definition, whose parameter names
// (conv1.weight, conv2.bias, fc1 ... fc3) this one keeps:
//
//   class LeNet(nn.Module):
//       def __init__(self):
//           super().__init__()
//           self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
//           self.conv2 = nn.Conv2d(6, 16, 5)
//           self.fc1 = nn.Linear(16 * 5 * 5, 120)
//           self.fc2 = nn.Linear(120, 84)
//           self.fc3 = nn.Linear(84, 10)
//       def forward(self, x):
//           x = F.max_pool2d(F.relu(self.conv1(x)), 2)
//           x = F.max_pool2d(F.relu(self.conv2(x)), 2)
//           x = F.relu(self.fc1(x.flatten(1)))
//           return self.fc3(F.relu(self.fc2(x)))
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <ringtorch/models.h>

namespace ringtorch {

struct LeNetImpl : torch::nn::Module {
  // For other images than the default 1x28x28, conv1 takes C channels and fc1 takes
  // 16 * ((H/2 - 4)/2) * ((W/2 - 4)/2) features (16*6*6 for CIFAR's 3x32x32).
  explicit LeNetImpl(const ImageShape& input = {});
  // x: [batch, C, H, W] (or [batch, C*H*W]) -> logits [batch, classes]
  torch::Tensor forward(const torch::Tensor& x);

  ImageShape input;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(LeNet);

}  // namespace ringtorch
