// Models by name, as ringtrain's --model flag names them. Each entry's parameter names match
// the natural PyTorch Python definition (models/README.md), so checkpoints load on either side.
//
// Example (given: torch::Tensor images):
//   torch::nn::AnyModule model = ringtorch::make_model("mlp");     // 1x28x28 images
//   auto cifar = ringtorch::make_model("resnet20", {3, 32, 32});  // 3x32x32 images
//   auto logits = model.forward(images);
#pragma once

#include <torch/nn/modules/container/any.h>

#include <string>
#include <vector>

namespace ringtorch {

// The images a model is built for; the defaults are (Fashion-)MNIST's.
struct ImageShape {
  int64_t channels = 1, height = 28, width = 28;
  int64_t classes = 10;
};

// Throws InvalidArgumentError naming the known models for an unknown name, and for images too
// small for the model.
torch::nn::AnyModule make_model(const std::string& name, const ImageShape& input = {});

std::vector<std::string> model_names();

}  // namespace ringtorch
