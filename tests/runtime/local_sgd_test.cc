// Local SGD's outer step (local_sgd.h) on thread ranks over real Gloo: the weighted outer
// gradient and the Nesterov update against their closed forms, one inner step per period against
// DistributedDataParallel, replicas bitwise equal after every outer step, and the states that
// checkpoints carry.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>

#include <ringtorch/distributed_data_parallel.h>
#include <ringtorch/error.h>
#include <ringtorch/local_sgd.h>

#include "support/replicas.h"
#include "support/thread_ranks.h"

namespace ringtorch {
namespace {

using testing::borrow;
using testing::expect_identical_across_ranks;
using testing::expect_same_on_every_rank;
using testing::flat_parameters;

// One parameter of 3 values, a floating buffer and an integer one.
struct TinyImpl : torch::nn::Module {
  TinyImpl() {
    weight = register_parameter("weight", torch::tensor({1.0f, 2.0f, 3.0f}));
    mean = register_buffer("mean", torch::zeros({2}));
    count = register_buffer("count", torch::zeros({1}, torch::kLong));
  }
  torch::Tensor weight, mean, count;
};
TORCH_MODULE(Tiny);

struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(6, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 3));
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Net);

// Outer lr 1 and no momentum: the outer step is the plain (weighted) average.
LocalSgdOptions plain_averages() {
  LocalSgdOptions options;
  options.outer_lr = 1;
  options.outer_momentum = 0;
  return options;
}

// The same initial weights on every thread rank: LibTorch's default generator is one per
// process, so the seeding and the draws after it hold a lock (a local SGD anchor must start
// equal on every rank; DDP would broadcast rank 0's instead).
Net seeded_net() {
  static std::mutex default_generator;
  std::lock_guard<std::mutex> lock(default_generator);
  torch::manual_seed(3);
  return Net();
}

// Rank r's batch at `step`: its own data, as each rank of DDP would read.
std::pair<at::Tensor, at::Tensor> batch_of(int rank, int step) {
  auto generator = at::detail::createCPUGenerator(1000 * step + rank);
  return {at::randn({8, 6}, generator), at::randint(0, 3, {8}, generator)};
}

// Two ranks move the weight [1, 2, 3] by known amounts with known sample counts; the average is
// weighted by the counts, then outer lr and Nesterov momentum apply as torch.optim.SGD's. In
// float32, whose CPU parameters take one fused pass, and in float64, which takes tensor operations.
TEST(LocalSgd, TheOuterGradientIsTheSampleWeightedAverageOfTheChanges) {
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    SCOPED_TRACE(c10::toString(dtype));
    testing::on_thread_ranks(2, [dtype](ProcessGroup& group) {
      Tiny tiny;
      {  // Module::to(dtype) would convert the integer buffer too
        torch::NoGradGuard no_grad;
        tiny->weight.set_data(tiny->weight.to(dtype));
        tiny->mean.set_data(tiny->mean.to(dtype));
      }
      LocalSgdOptions options;
      options.outer_lr = 0.5;
      options.outer_momentum = 0.9;
      LocalSgd local(*tiny, borrow(group), options);
      const int r = group.rank();
      const at::Tensor anchor = torch::tensor({1.0f, 2.0f, 3.0f}).to(dtype);
      // Changes (anchor - parameters) 0.1 x [1, 1, 1] on rank 0 (30 samples) and [1, -1, 2] on
      // rank 1 (10 samples): Δ = (30 x 0.1 [1,1,1] + 10 [1,-1,2]) / 40 = [0.325, -0.175, 0.575].
      const at::Tensor change0 = torch::tensor({0.1f, 0.1f, 0.1f}).to(dtype);
      const at::Tensor change1 = torch::tensor({1.0f, -1.0f, 2.0f}).to(dtype);
      const at::Tensor expected_change = (30 * change0 + 10 * change1) / 40;
      {
        torch::NoGradGuard no_grad;
        tiny->weight.copy_(anchor - (r == 0 ? change0 : change1));
        tiny->mean.copy_(r == 0 ? torch::tensor({1.0f, 2.0f}) : torch::tensor({5.0f, 6.0f}));
        tiny->count.fill_(r == 0 ? 7 : 4);
      }
      local.record_inner_step(r == 0 ? 20 : 10);
      if (r == 0) local.record_inner_step(10);
      EXPECT_EQ(local.stats().inner_steps_in_period, r == 0 ? 2 : 1);
      local.outer_step();
      // First outer step: momentum b = Δ; step Δ + 0.9 b = 1.9 Δ.
      const at::Tensor first = anchor - 0.5 * 1.9 * expected_change;
      EXPECT_TRUE(at::allclose(tiny->weight, first, 1e-6, 1e-6)) << tiny->weight << " vs " << first;
      EXPECT_TRUE(at::allclose(tiny->mean, torch::tensor({2.0f, 3.0f}).to(dtype), 1e-6, 1e-6)) << tiny->mean;
      EXPECT_EQ(tiny->count.item<int64_t>(), 7);
      EXPECT_EQ(local.stats().outer_steps, 1);
      EXPECT_EQ(local.stats().inner_steps_in_period, 0);
      EXPECT_EQ(local.elements_per_outer_step(), 3 + 2 + 1 + 1);
      // Second: both ranks change by c = [0.2, 0, 0] with equal weights: b = 0.9 Δ + c; step c + 0.9 b.
      const at::Tensor c = torch::tensor({0.2f, 0.0f, 0.0f}).to(dtype);
      {
        torch::NoGradGuard no_grad;
        tiny->weight.sub_(c);
      }
      local.record_inner_step(5);
      local.outer_step();
      const at::Tensor momentum = 0.9 * expected_change + c;
      const at::Tensor second = first - 0.5 * (c + 0.9 * momentum);
      EXPECT_TRUE(at::allclose(tiny->weight, second, 1e-6, 1e-6)) << tiny->weight << " vs " << second;
      expect_identical_across_ranks(group, *tiny, "after the second outer step");
    });
  }
}

// A rank that trained no samples adds nothing; when none did, the parameters go back to the anchor.
TEST(LocalSgd, RanksWithoutSamplesCountForNothing) {
  testing::on_thread_ranks(2, [](ProcessGroup& group) {
    Tiny tiny;
    LocalSgd local(*tiny, borrow(group), plain_averages());
    {
      torch::NoGradGuard no_grad;
      tiny->weight.sub_(group.rank() == 0 ? torch::tensor({1.0f, 1.0f, 1.0f}) : torch::tensor({9.0f, 9.0f, 9.0f}));
    }
    if (group.rank() == 0) local.record_inner_step(4);
    local.outer_step();
    EXPECT_TRUE(at::equal(tiny->weight, torch::tensor({0.0f, 1.0f, 2.0f}))) << tiny->weight;
    {
      torch::NoGradGuard no_grad;
      tiny->weight.add_(1.0);
    }
    local.outer_step();  // no samples anywhere
    EXPECT_TRUE(at::equal(tiny->weight, torch::tensor({0.0f, 1.0f, 2.0f}))) << tiny->weight;
  });
}

// The equivalence check: one inner step per period, outer lr 1 and no outer momentum is
// synchronous data parallelism. Inner SGD with momentum 0.9 on each rank's own batches against
// DistributedDataParallel with the same optimizer: the mean of the ranks' momentum buffers
// follows DDP's buffer, so after 12 steps the parameters agree to float32 rounding (the sums are
// taken in another order): within 1e-5 absolute and relative, measured ~1e-7.
TEST(LocalSgd, OneInnerStepPerPeriodIsDistributedDataParallel) {
  const int steps = 12;
  std::vector<at::Tensor> ddp_result(2), local_result(2);
  testing::on_thread_ranks(2, [&](ProcessGroup& group) {
    Net net = seeded_net();
    DistributedDataParallel ddp(net, borrow(group));
    torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    for (int step = 0; step < steps; ++step) {
      auto [x, y] = batch_of(group.rank(), step);
      optimizer.zero_grad();
      torch::cross_entropy_loss(ddp.forward(x), y).backward();
      optimizer.step();
    }
    ddp_result[group.rank()] = flat_parameters(*net).clone();
  });
  testing::on_thread_ranks(2, [&](ProcessGroup& group) {
    Net net = seeded_net();
    LocalSgd local(*net, borrow(group), plain_averages());
    torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    for (int step = 0; step < steps; ++step) {
      auto [x, y] = batch_of(group.rank(), step);
      optimizer.zero_grad();
      torch::cross_entropy_loss(net->forward(x), y).backward();
      optimizer.step();
      local.record_inner_step(x.size(0));
      local.outer_step();
      expect_identical_across_ranks(group, *net, "after outer step " + std::to_string(step + 1));
    }
    local_result[group.rank()] = flat_parameters(*net).clone();
  });
  EXPECT_TRUE(at::allclose(local_result[0], ddp_result[0], 1e-5, 1e-5))
      << "largest difference " << (local_result[0] - ddp_result[0]).abs().max().item<float>();
}

// Several inner steps with DiLoCo's outer settings, in float32 and with a bf16 outer gradient:
// every outer step leaves the replicas bitwise equal, and bf16 stays near float32.
TEST(LocalSgd, ReplicasAreBitwiseEqualAfterEveryOuterStep) {
  std::vector<at::Tensor> results(2);
  for (bool bf16 : {false, true}) {
    testing::on_thread_ranks(2, [&](ProcessGroup& group) {
      Net net = seeded_net();
      LocalSgdOptions options;
      options.bf16_outer_gradient = bf16;
      LocalSgd local(*net, borrow(group), options);
      torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
      for (int step = 0; step < 16; ++step) {
        auto [x, y] = batch_of(group.rank(), step);
        optimizer.zero_grad();
        torch::cross_entropy_loss(net->forward(x), y).backward();
        optimizer.step();
        local.record_inner_step(x.size(0));
        if (step % 4 == 3) {
          local.outer_step();
          expect_identical_across_ranks(group, *net, "after outer step " + std::to_string(step / 4 + 1));
        }
      }
      EXPECT_EQ(local.stats().outer_steps, 4);
      EXPECT_EQ(local.stats().inner_steps, 16);
      if (group.rank() == 0) results[bf16] = flat_parameters(*net).clone();
    });
  }
  EXPECT_TRUE(at::allclose(results[1], results[0], 1e-2, 1e-3))
      << "bf16 strays by " << (results[1] - results[0]).abs().max().item<float>();
}

// With overlap the outer gradient is applied after the next inner step (overlap_steps 1), and
// what a rank trained meanwhile is kept on top of the new anchor (outer lr 1, no momentum: plain
// averages). synchronize() finishes the step in flight: the replicas are then bitwise equal.
TEST(LocalSgd, OverlapAppliesTheOuterStepAfterTheNextInnerStep) {
  testing::on_thread_ranks(2, [](ProcessGroup& group) {
    Tiny tiny;
    LocalSgdOptions options = plain_averages();
    options.overlap_steps = 1;
    LocalSgd local(*tiny, borrow(group), options);
    const int r = group.rank();
    const at::Tensor a0 = torch::tensor({1.0f, 2.0f, 3.0f});
    const at::Tensor c1 = r == 0 ? torch::tensor({0.5f, 0.0f, 0.0f}) : torch::tensor({0.0f, 1.0f, 0.0f});
    const at::Tensor c2 = r == 0 ? torch::tensor({0.0f, 0.0f, 2.0f}) : torch::tensor({0.0f, 0.0f, 4.0f});
    const at::Tensor mean_c1 = torch::tensor({0.25f, 0.5f, 0.0f}), mean_c2 = torch::tensor({0.0f, 0.0f, 3.0f});
    auto train = [&](const at::Tensor& change) {
      torch::NoGradGuard no_grad;
      tiny->weight.sub_(change);
      local.record_inner_step(10);
    };
    train(c1);
    local.outer_step();  // started, not applied: the rank keeps its own weights
    EXPECT_TRUE(at::equal(tiny->weight, a0 - c1)) << tiny->weight;
    train(c2);  // its inner step applies period 1's average under period 2's own change
    EXPECT_TRUE(at::allclose(tiny->weight, a0 - mean_c1 - c2, 1e-6, 1e-6)) << tiny->weight;
    local.outer_step();  // started
    EXPECT_TRUE(at::allclose(tiny->weight, a0 - mean_c1 - c2, 1e-6, 1e-6)) << tiny->weight;
    local.synchronize();  // period 2's average applied; nothing trained since
    EXPECT_TRUE(at::allclose(tiny->weight, a0 - mean_c1 - mean_c2, 1e-6, 1e-6)) << tiny->weight;
    expect_identical_across_ranks(group, *tiny, "after synchronize()");
    EXPECT_EQ(local.stats().outer_steps, 3);
  });
}

// The outer momentum and step count come back through state_dict(); the anchor is the loaded
// parameters. A momentum of another shape is refused, naming it.
TEST(LocalSgd, StateRoundTrips) {
  testing::on_thread_ranks(1, [](ProcessGroup& group) {
    Tiny tiny;
    LocalSgd local(*tiny, borrow(group), LocalSgdOptions{});
    {
      torch::NoGradGuard no_grad;
      tiny->weight.sub_(0.5);
    }
    local.record_inner_step(1);
    local.outer_step();
    const auto saved = local.state_dict();
    ASSERT_EQ(saved.count("momentum.0"), 1u);
    EXPECT_EQ(saved.at("outer_steps").item<int64_t>(), 1);

    Tiny other;
    {
      torch::NoGradGuard no_grad;
      other->weight.copy_(tiny->weight);
    }
    LocalSgd restored(*other, borrow(group), LocalSgdOptions{});
    restored.load_state_dict(saved);
    EXPECT_EQ(restored.stats().outer_steps, 1);
    for (auto* pair : {&tiny, &other}) {
      torch::NoGradGuard no_grad;
      (*pair)->weight.sub_(0.25);
    }
    local.record_inner_step(1);
    restored.record_inner_step(1);
    local.outer_step();
    restored.outer_step();
    EXPECT_TRUE(at::equal(tiny->weight, other->weight));

    auto wrong = saved;
    wrong["momentum.0"] = torch::zeros({4});
    try {
      restored.load_state_dict(wrong);
      FAIL() << "a momentum of another shape was loaded";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("momentum.0"), std::string::npos) << e.what();
    }
    auto two_counts = saved;
    two_counts["outer_steps"] = torch::tensor({int64_t{1}, int64_t{2}});
    try {
      restored.load_state_dict(two_counts);
      FAIL() << "an outer step count of two elements was loaded";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("'outer_steps' is not one integer"), std::string::npos) << e.what();
    }
  });
}

// Each rank's inner optimizer as one vector: SGD's momentum and Adam's moments and steps go out
// and come back exactly, into another optimizer over the same model; a vector of another size is
// refused.
TEST(LocalSgd, OptimizerStateVectorsRoundTrip) {
  for (const std::string kind : {"sgd", "adam"}) {
    Net net = seeded_net();
    auto make = [&](Net& n) -> std::unique_ptr<torch::optim::Optimizer> {
      if (kind == "adam") return std::make_unique<torch::optim::Adam>(n->parameters(), torch::optim::AdamOptions(0.01));
      return std::make_unique<torch::optim::SGD>(n->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    };
    auto optimizer = make(net);
    for (int step = 0; step < 3; ++step) {
      auto [x, y] = batch_of(0, step);
      optimizer->zero_grad();
      torch::cross_entropy_loss(net->forward(x), y).backward();
      optimizer->step();
    }
    const at::Tensor vector = optimizer_state_vector(*optimizer);
    int64_t parameters = 0;
    for (const auto& p : net->parameters()) parameters += p.numel();
    EXPECT_EQ(vector.numel(), kind == "adam" ? 2 * parameters + 4 : parameters) << kind;

    Net twin = seeded_net();
    auto other = make(twin);
    auto [x, y] = batch_of(1, 0);  // any step, so that the optimizer holds state of the same layout
    other->zero_grad();
    torch::cross_entropy_loss(twin->forward(x), y).backward();
    other->step();
    load_optimizer_state_vector(*other, vector);
    EXPECT_TRUE(at::equal(optimizer_state_vector(*other), vector)) << kind;
    EXPECT_THROW(load_optimizer_state_vector(*other, vector.narrow(0, 0, vector.numel() - 1)), InvalidArgumentError);
  }
}

}  // namespace
}  // namespace ringtorch
