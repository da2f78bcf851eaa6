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

TEST(ModelRegistry, UnknownNameListsTheKnownOnes) {
  try {
    make_model("resnet9000");
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("known models: mlp"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ringtorch
