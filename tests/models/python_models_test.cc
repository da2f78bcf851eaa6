// Every model's checkpoint, written by ringtorch's Checkpointer, loads into the Python
// definition of models/python/ringtorch_models.py with load_state_dict(strict=True) and gives
// the same eval-mode outputs (Debian's python3-torch; skipped without it).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include <ringtorch/checkpoint.h>
#include <ringtorch/models.h>

#include "support/test_paths.h"

namespace ringtorch {
namespace {

std::string run_and_capture(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return out;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
  EXPECT_EQ(::pclose(pipe), 0) << command << "\n" << out;
  return out;
}

TEST(PythonModels, LoadRingtorchCheckpointsStrictlyAndComputeTheSame) {
  if (!std::filesystem::exists("/usr/bin/python3") ||
      std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0) {
    GTEST_SKIP() << "Debian's python3-torch is not installed";
  }
  const std::vector<std::pair<std::string, ImageShape>> cases = {
      {"mlp", {1, 28, 28, 10}},   {"mlp3", {3, 32, 32, 10}},     {"lenet", {1, 28, 28, 10}},
      {"lenet", {3, 32, 32, 10}}, {"resnet20", {3, 32, 32, 10}}, {"resnet20", {1, 28, 28, 10}}};
  for (const auto& [name, shape] : cases) {
    SCOPED_TRACE(name + " " + std::to_string(shape.channels) + "x" + std::to_string(shape.height));
    torch::manual_seed(7);
    auto model = make_model(name, shape);
    {
      // Training-mode forwards move BatchNorm's running statistics away from 0 and 1.
      torch::NoGradGuard no_grad;
      for (int i = 0; i < 3; ++i) model.forward(torch::randn({8, shape.channels, shape.height, shape.width}) + i);
    }
    testing::TempDir dir;
    const std::string path = Checkpointer(dir.path()).save(*model.ptr(), nullptr, TrainingProgress{});
    model.ptr()->eval();
    const int64_t numel = 2 * shape.channels * shape.height * shape.width;
    const auto expected =
        model.forward(torch::linspace(-1, 1, numel).reshape({2, shape.channels, shape.height, shape.width}));
    const std::string out = run_and_capture(
        "/usr/bin/python3 " + testing::source_path("tests/models/python_models.py") + " " + path + " " + name + " " +
        std::to_string(shape.channels) + " " + std::to_string(shape.height) + " " + std::to_string(shape.width));
    const auto python = nlohmann::json::parse(out).get<std::vector<float>>();
    ASSERT_EQ(static_cast<int64_t>(python.size()), expected.numel());
    EXPECT_TRUE(torch::allclose(torch::tensor(python).view_as(expected), expected, 1e-4, 1e-5))
        << expected << "\npython: " << out;
  }
}

}  // namespace
}  // namespace ringtorch
