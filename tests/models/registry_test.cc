#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <ringtorch/error.h>
#include <ringtorch/models.h>

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
      {"fc1.weight", {1024, 784}}, {"fc1.bias", {1024}},       {"fc2.weight", {1024, 1024}},
      {"fc2.bias", {1024}},        {"fc3.weight", {10, 1024}}, {"fc3.bias", {10}}};
  const std::vector<std::pair<std::string, std::vector<int64_t>>> lenet = {
      {"conv1.weight", {6, 1, 5, 5}}, {"conv1.bias", {6}}, {"conv2.weight", {16, 6, 5, 5}}, {"conv2.bias", {16}},
      {"fc1.weight", {120, 400}},     {"fc1.bias", {120}}, {"fc2.weight", {84, 120}},       {"fc2.bias", {84}},
      {"fc3.weight", {10, 84}},       {"fc3.bias", {10}}};
  for (const auto& [name, expected] :
       {std::make_pair(std::string("mlp3"), mlp3), std::make_pair(std::string("lenet"), lenet)}) {
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

TEST(ModelRegistry, ResNet20HasThePythonNamesBatchNormBuffersAndShortcuts) {
  auto model = make_model("resnet20", {3, 32, 32, 10});
  auto params = model.ptr()->named_parameters();
  auto buffers = model.ptr()->named_buffers();
  EXPECT_EQ(params["conv1.weight"].sizes(), (std::vector<int64_t>{16, 3, 3, 3}));
  EXPECT_EQ(params["layer2.0.downsample.0.weight"].sizes(), (std::vector<int64_t>{32, 16, 1, 1}));
  EXPECT_EQ(params["layer3.2.bn2.bias"].sizes(), (std::vector<int64_t>{64}));
  EXPECT_EQ(params["fc.weight"].sizes(), (std::vector<int64_t>{10, 64}));
  EXPECT_EQ(buffers["layer1.0.bn1.running_mean"].sizes(), (std::vector<int64_t>{16}));
  EXPECT_EQ(buffers["layer3.0.downsample.1.running_var"].sizes(), (std::vector<int64_t>{64}));
  EXPECT_TRUE(buffers.contains("bn1.num_batches_tracked"));
  EXPECT_FALSE(params.contains("layer1.0.downsample.0.weight"));  // identity shortcut, as in Python
  // 19 convolutions (3*3 each) + 2 1x1 shortcuts, 21 BatchNorms, fc: He et al.'s 0.27M.
  int64_t count = 0;
  for (const auto& p : model.ptr()->parameters()) count += p.numel();
  const int64_t convs = 3 * 16 * 9 + 6 * 16 * 16 * 9 + (16 * 32 + 5 * 32 * 32) * 9 + (32 * 64 + 5 * 64 * 64) * 9;
  const int64_t shortcuts = 16 * 32 + 32 * 64;
  const int64_t batchnorms = 2 * (7 * 16 + 7 * 32 + 7 * 64);
  EXPECT_EQ(count, convs + shortcuts + batchnorms + 64 * 10 + 10);
  EXPECT_EQ(model.forward(torch::zeros({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 10}));
  EXPECT_EQ(make_model("resnet20", {1, 28, 28, 10}).forward(torch::zeros({2, 1, 28, 28})).sizes(),
            (std::vector<int64_t>{2, 10}));
}

TEST(ModelRegistry, ModelsFollowTheImageShape) {
  EXPECT_EQ(make_model("mlp", {3, 32, 32, 10}).ptr()->named_parameters()["fc.weight"].sizes(),
            (std::vector<int64_t>{10, 3072}));
  auto lenet = make_model("lenet", {3, 32, 32, 10});
  EXPECT_EQ(lenet.ptr()->named_parameters()["fc1.weight"].sizes(), (std::vector<int64_t>{120, 16 * 6 * 6}));
  EXPECT_EQ(lenet.forward(torch::zeros({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 10}));
  try {
    make_model("lenet", {1, 8, 8, 10});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("model lenet cannot take 1x8x8 images"), std::string::npos) << e.what();
  }
}

TEST(ModelRegistry, UnknownNameListsTheKnownOnes) {
  try {
    make_model("resnet9000");
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("known models: lenet, mlp, mlp3, resnet20"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ringtorch
