// resnet20: the CIFAR ResNet-20 of He et al. (2016, section 4.2): a 3x3 convolution to 16
// channels, three stages of three basic blocks (16, 32, 64 channels; the second and third
// stages halve the resolution), global average pooling and a linear classifier; BatchNorm
// after every convolution. Shortcuts that change shape are a 1x1 convolution + BatchNorm
// ("option B", as torchvision's ResNets). Python's definition, whose parameter and buffer
// names (conv1.weight, layer1.0.bn1.running_mean, layer2.0.downsample.0.weight, fc.bias, ...)
// this one keeps:
//
//   class BasicBlock(nn.Module):
//       def __init__(self, in_planes, planes, stride=1):
//           super().__init__()
//           self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
//           self.bn1 = nn.BatchNorm2d(planes)
//           self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
//           self.bn2 = nn.BatchNorm2d(planes)
//           self.downsample = None
//           if stride != 1 or in_planes != planes:
//               self.downsample = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride, bias=False),
//                                               nn.BatchNorm2d(planes))
//       def forward(self, x):
//           out = F.relu(self.bn1(self.conv1(x)))
//           out = self.bn2(self.conv2(out))
//           return F.relu(out + (x if self.downsample is None else self.downsample(x)))
//
//   class ResNet20(nn.Module):
//       def __init__(self, in_channels=3, num_classes=10):
//           super().__init__()
//           self.conv1 = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
//           self.bn1 = nn.BatchNorm2d(16)
//           self.layer1 = nn.Sequential(BasicBlock(16, 16), BasicBlock(16, 16), BasicBlock(16, 16))
//           self.layer2 = nn.Sequential(BasicBlock(16, 32, 2), BasicBlock(32, 32), BasicBlock(32, 32))
//           self.layer3 = nn.Sequential(BasicBlock(32, 64, 2), BasicBlock(64, 64), BasicBlock(64, 64))
//           self.fc = nn.Linear(64, num_classes)
//       def forward(self, x):
//           out = F.relu(self.bn1(self.conv1(x)))
//           out = self.layer3(self.layer2(self.layer1(out)))
//           return self.fc(F.adaptive_avg_pool2d(out, 1).flatten(1))
//
// models/python/ringtorch_models.py holds these definitions; tests compare the state dicts' names and
// shapes with it.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace ringtorch {

struct ResNetBasicBlockImpl : torch::nn::Module {
  ResNetBasicBlockImpl(int64_t in_planes, int64_t planes, int64_t stride);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Sequential downsample{nullptr};  // null when the shape does not change
};
TORCH_MODULE(ResNetBasicBlock);

struct ResNet20Impl : torch::nn::Module {
  explicit ResNet20Impl(int64_t in_channels = 3, int64_t classes = 10);
  // x: [batch, in_channels, H, W] (any H, W >= 4) -> logits [batch, classes]
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  torch::nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet20);

}  // namespace ringtorch
