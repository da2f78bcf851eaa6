#include "models/registry.h"

#include <functional>
#include <map>

#include "models/lenet.h"
#include "models/mlp.h"
#include "models/mlp3.h"
#include "rendezvous/error.h"

namespace ringtorch {
namespace {

const std::map<std::string, std::function<torch::nn::AnyModule()>>& registry() {
  static const std::map<std::string, std::function<torch::nn::AnyModule()>> models = {
      {"lenet", [] { return torch::nn::AnyModule(LeNet()); }},
      {"mlp", [] { return torch::nn::AnyModule(Mlp()); }},
      {"mlp3", [] { return torch::nn::AnyModule(Mlp3()); }},
  };
  return models;
}

}  // namespace

torch::nn::AnyModule make_model(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
    throw InvalidArgumentError("unknown model '" + name + "'; known models: " + known);
  }
  return it->second();
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& [name, make] : registry()) names.push_back(name);
  return names;
}

}  // namespace ringtorch
