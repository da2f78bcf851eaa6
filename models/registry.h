// Models by name, as ringtrain's --model flag names them. Each entry's parameter names match
// the natural PyTorch Python definition (models/README.md), so checkpoints load on either side.
//
//   torch::nn::AnyModule model = ringtorch::make_model("mlp");
//   auto logits = model.forward(images);
#pragma once

#include <string>
#include <vector>

#include <torch/nn/modules/container/any.h>

namespace ringtorch {

// Throws InvalidArgumentError naming the known models for an unknown name.
torch::nn::AnyModule make_model(const std::string& name);

std::vector<std::string> model_names();

}  // namespace ringtorch
