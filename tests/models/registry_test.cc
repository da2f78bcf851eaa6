#include "models/registry.h"

#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include "rendezvous/error.h"

namespace ringtorch {
namespace {

TEST(ModelRegistry, MlpHasThePythonParameterNamesAndShapes) {
  auto model = make_model("mlp");
  auto params = model.ptr()->named_parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params["fc.weight"].sizes(), (std::vector<int64_t>{10, 784}));
  EXPECT_EQ(params["fc.bias"].sizes(), (std::vector<int64_t>{10}));
  auto logits = model.forward(torch::zeros({5, 1, 28, 28}));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{5, 10}));
}

// Parameter names and shapes as Python's definitions in models/*.h give them (state_dict order).
TEST(ModelRegistry, Mlp3AndLeNetHaveThePythonParameterNamesAndShapes) {
  const std::vector<std::pair<std::string, std::vector<int64_t>>> mlp3 = {
      {"fc1.weight", {1024, 784}}, {"fc1.bias", {1024}}, {"fc2.weight", {1024, 1024}},
      {"fc2.bias", {1024}},        {"fc3.weight", {10, 1024}}, {"fc3.bias", {10}}};
  const std::vector<std::pair<std::string, std::vector<int64_t>>> lenet = {
      {"conv1.weight", {6, 1, 5, 5}}, {"conv1.bias", {6}},   {"conv2.weight", {16, 6, 5, 5}},
      {"conv2.bias", {16}},           {"fc1.weight", {120, 400}}, {"fc1.bias", {120}},
      {"fc2.weight", {84, 120}},      {"fc2.bias", {84}},    {"fc3.weight", {10, 84}},
      {"fc3.bias", {10}}};
  for (const auto& [name, expected] : {std::make_pair(std::string("mlp3"), mlp3), std::make_pair(std::string("lenet"), lenet)}) {
    auto model = make_model(name);
    auto params = model.ptr()->named_parameters();
    ASSERT_EQ(params.size(), expected.size()) << name;
    size_t i = 0;
    for (const auto& item : params) {
      EXPECT_EQ(item.key(), expected[i].first) << name;
      EXPECT_EQ(item.value().sizes(), expected[i].second) << name << " " << item.key();
      ++i;
    }
    EXPECT_EQ(model.forward(torch::zeros({3, 1, 28, 28})).sizes(), (std::vector<int64_t>{3, 10})) << name;
  }
}

TEST(ModelRegistry, UnknownNameListsTheKnownOnes) {
  try {
    make_model("resnet9000");
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("known models: lenet, mlp, mlp3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ringtorch
