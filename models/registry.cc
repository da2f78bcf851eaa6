#include <functional>
#include <map>

#include <ringtorch/error.h>
#include <ringtorch/models.h>

#include "models/lenet.h"
#include "models/mlp.h"
#include "models/mlp3.h"
#include "models/resnet20.h"

namespace ringtorch {
namespace {

using Factory = std::function<torch::nn::AnyModule(const ImageShape&)>;

const std::map<std::string, Factory>& registry() {
  static const std::map<std::string, Factory> models = {
      {"lenet", [](const ImageShape& s) { return torch::nn::AnyModule(LeNet(s)); }},
      {"mlp", [](const ImageShape& s) { return torch::nn::AnyModule(Mlp(s)); }},
      {"mlp3", [](const ImageShape& s) { return torch::nn::AnyModule(Mlp3(s)); }},
      {"resnet20", [](const ImageShape& s) { return torch::nn::AnyModule(ResNet20(s.channels, s.classes)); }},
  };
  return models;
}

}  // namespace

torch::nn::AnyModule make_model(const std::string& name, const ImageShape& input) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
    throw InvalidArgumentError("unknown model '" + name + "'; known models: " + known);
  }
  // LeNet's two 5x5 convolutions and poolings need at least 12x12; ResNet-20's strides 4x4.
  const int64_t smallest = name == "lenet" ? 12 : 4;
  if (input.channels < 1 || input.classes < 2 || input.height < smallest || input.width < smallest) {
    throw InvalidArgumentError(str_cat("model ", name, " cannot take ", input.channels, "x", input.height, "x",
                                       input.width, " images with ", input.classes, " classes (needs at least ",
                                       smallest, "x", smallest, " and two classes)"));
  }
  return it->second(input);
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& [name, make] : registry()) names.push_back(name);
  return names;
}

}  // namespace ringtorch
