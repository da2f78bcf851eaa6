#include "models/resnet20.h"

#include <torch/nn/functional/pooling.h>

namespace ringtorch {
namespace {

torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

torch::nn::Sequential stage(int64_t in_planes, int64_t planes, int64_t stride) {
  return torch::nn::Sequential(ResNetBasicBlock(in_planes, planes, stride), ResNetBasicBlock(planes, planes, 1),
                               ResNetBasicBlock(planes, planes, 1));
}

}  // namespace

ResNetBasicBlockImpl::ResNetBasicBlockImpl(int64_t in_planes, int64_t planes, int64_t stride) {
  conv1 = register_module("conv1", conv(in_planes, planes, 3, stride));
  bn1 = register_module("bn1", torch::nn::BatchNorm2d(planes));
  conv2 = register_module("conv2", conv(planes, planes, 3, 1));
  bn2 = register_module("bn2", torch::nn::BatchNorm2d(planes));
  if (stride != 1 || in_planes != planes) {
    downsample = register_module(
        "downsample", torch::nn::Sequential(conv(in_planes, planes, 1, stride), torch::nn::BatchNorm2d(planes)));
  }
}

torch::Tensor ResNetBasicBlockImpl::forward(const torch::Tensor& x) {
  auto out = torch::relu(bn1->forward(conv1->forward(x)));
  out = bn2->forward(conv2->forward(out));
  return torch::relu(out + (downsample ? downsample->forward(x) : x));
}

ResNet20Impl::ResNet20Impl(int64_t in_channels, int64_t classes) {
  conv1 = register_module("conv1", conv(in_channels, 16, 3, 1));
  bn1 = register_module("bn1", torch::nn::BatchNorm2d(16));
  layer1 = register_module("layer1", stage(16, 16, 1));
  layer2 = register_module("layer2", stage(16, 32, 2));
  layer3 = register_module("layer3", stage(32, 64, 2));
  fc = register_module("fc", torch::nn::Linear(64, classes));
}

torch::Tensor ResNet20Impl::forward(const torch::Tensor& x) {
  auto out = torch::relu(bn1->forward(conv1->forward(x)));
  out = layer3->forward(layer2->forward(layer1->forward(out)));
  return fc->forward(torch::adaptive_avg_pool2d(out, {1, 1}).flatten(1));
}

}  // namespace ringtorch
