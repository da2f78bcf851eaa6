// DataParallel on CPU "devices": training through 2 and 3 replicas equals one module on the
// whole batch; replicas follow the primary; a batch smaller than the replica count works.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ringtorch/data_parallel.h>
#include <ringtorch/error.h>

namespace ringtorch {
namespace {

struct SmallImpl : torch::nn::Module {
  SmallImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 4));
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Small);

at::Tensor flat(torch::nn::Module& m) {
  std::vector<at::Tensor> parts;
  for (auto& p : m.parameters()) parts.push_back(p.detach().reshape({-1}));
  return torch::cat(parts);
}

TEST(DataParallel, ReplicasOnCpuDevicesTrainLikeOneModule) {
  for (int devices : {2, 3}) {
    Small reference;
    DataParallel dp([] { return torch::nn::AnyModule(Small()); }, std::vector<torch::Device>(devices, torch::kCPU));
    {
      torch::NoGradGuard no_grad;
      auto from = reference->parameters();
      auto to = dp.module().parameters();
      for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
    }
    torch::optim::SGD ref_sgd(reference->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    torch::optim::SGD dp_sgd(dp.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    auto generator = at::detail::createCPUGenerator(3);
    for (int step = 0; step < 4; ++step) {
      at::Tensor x = at::randn({12, 8}, generator), y = at::randn({12, 4}, generator);
      ref_sgd.zero_grad();
      torch::mse_loss(reference->forward(x), y).backward();
      ref_sgd.step();
      dp_sgd.zero_grad();
      torch::mse_loss(dp.forward(x), y).backward();
      dp_sgd.step();
      EXPECT_TRUE(at::allclose(flat(dp.module()), flat(*reference), 1e-5, 1e-6))
          << devices << " devices, step " << step;
    }
    dp.sync_replicas();
    for (size_t r = 1; r < dp.replica_count(); ++r) {
      EXPECT_TRUE(at::equal(flat(dp.replica(r)), flat(dp.module()))) << "replica " << r;
    }
  }
}

TEST(DataParallel, ABatchSmallerThanTheReplicaCountAndNoGradWork) {
  DataParallel dp([] { return torch::nn::AnyModule(Small()); }, {torch::kCPU, torch::kCPU, torch::kCPU});
  EXPECT_EQ(dp.forward(torch::randn({1, 8})).sizes(), (std::vector<int64_t>{1, 4}));
  torch::NoGradGuard no_grad;
  at::Tensor out = dp.forward(torch::randn({7, 8}));
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{7, 4}));
  EXPECT_FALSE(out.requires_grad());
}

TEST(DataParallel, NoDevicesIsAClearError) {
  EXPECT_THROW(DataParallel([] { return torch::nn::AnyModule(Small()); }, {}), InvalidArgumentError);
}

}  // namespace
}  // namespace ringtorch
