// DistributedDataParallel at world size 2 (ranks as threads, real Gloo over loopback TCP):
// equivalence with single-process training, overlap, no_sync, unused parameters, models that
// differ across ranks, compression hooks, buffer broadcast; and the bucket plan.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>

#include <ringtorch/distributed_data_parallel.h>
#include <ringtorch/error.h>

#include "runtime/training/bucket_assignment.h"
#include "support/replicas.h"
#include "support/thread_ranks.h"

namespace ringtorch {
namespace {

using testing::borrow;
using testing::expect_identical_across_ranks;
using testing::expect_same_on_every_rank;
using testing::flat_parameters;

struct NetImpl : torch::nn::Module {
  explicit NetImpl(int64_t hidden = 16, bool with_spare = false) {
    fc1 = register_module("fc1", torch::nn::Linear(8, hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, 4));
    if (with_spare) spare = register_module("spare", torch::nn::Linear(4, 4));
    register_buffer("steps", torch::zeros({1}));
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, spare{nullptr};
};
TORCH_MODULE(Net);

// Six 512 x 512 layers (1 MiB of weights each).
struct DeepImpl : torch::nn::Module {
  DeepImpl() {
    for (int i = 0; i < 6; ++i) layers.push_back(register_module("l" + std::to_string(i), torch::nn::Linear(512, 512)));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& l : layers) x = torch::relu(l(x));
    return x;
  }
  std::vector<torch::nn::Linear> layers;
};
TORCH_MODULE(Deep);

void copy_parameters(torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  auto source = from.named_parameters();
  for (auto& item : to.named_parameters()) item.value().copy_(source[item.key()]);
}

struct Batch {
  at::Tensor x, y;
};
std::vector<Batch> make_batches(int steps, int64_t batch) {
  auto generator = at::detail::createCPUGenerator(7);
  std::vector<Batch> batches;
  for (int s = 0; s < steps; ++s)
    batches.push_back({at::randn({batch, 8}, generator), at::randn({batch, 4}, generator)});
  return batches;
}

// One process training `reference` (from `initial`'s weights) with SGD on each whole batch.
void train_reference(Net& initial, Net& reference, const std::vector<Batch>& batches, double momentum) {
  copy_parameters(*initial, *reference);
  torch::optim::SGD sgd(reference->parameters(), torch::optim::SGDOptions(0.1).momentum(momentum));
  for (const auto& b : batches) {
    sgd.zero_grad();
    torch::mse_loss(reference->forward(b.x), b.y).backward();
    sgd.step();
  }
}

DdpOptions small_buckets() {
  DdpOptions o;
  o.first_bucket_mb = 16.0 / (1 << 20);  // 16 and 64 bytes: 4 buckets even for this small net
  o.bucket_cap_mb = 64.0 / (1 << 20);
  return o;
}

TEST(DistributedDataParallel, TwoRanksOnHalfBatchesEqualOneProcessOnTheFullBatch) {
  constexpr int kSteps = 5;
  const auto batches = make_batches(kSteps, 8);
  Net reference;
  Net initial;
  train_reference(initial, reference, batches, /*momentum=*/0.9);
  testing::on_thread_ranks(2, [&](ProcessGroup& group) {
    Net model;  // rank 1 starts from other weights: DDP broadcasts rank 0's
    if (group.rank() == 0) copy_parameters(*initial, *model);
    DistributedDataParallel ddp(model, borrow(group), small_buckets());
    EXPECT_GE(ddp.bucket_parameter_names().size(), 3u);
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    for (int s = 0; s < kSteps; ++s) {
      const auto& b = batches[s];
      sgd.zero_grad();
      auto x = b.x.narrow(0, group.rank() * 4, 4), y = b.y.narrow(0, group.rank() * 4, 4);
      torch::mse_loss(ddp.forward(x), y).backward();
      sgd.step();
      expect_identical_across_ranks(group, *model, str_cat("after step ", s));
    }
    EXPECT_TRUE(at::allclose(flat_parameters(*model), flat_parameters(*reference), 1e-5, 1e-5))
        << "max difference " << (flat_parameters(*model) - flat_parameters(*reference)).abs().max().item<float>();
  });
}

// 2 processes (threads) x 2 CPU devices each: DDP over DataParallel still equals one module on
// the whole batch.
TEST(DistributedDataParallel, OverDataParallelEqualsOneProcessOnTheFullBatch) {
  constexpr int kSteps = 3;
  const auto batches = make_batches(kSteps, 8);
  Net initial;
  Net reference;
  train_reference(initial, reference, batches, /*momentum=*/0);
  testing::on_thread_ranks(2, [&](ProcessGroup& group) {
    DataParallel dp([] { return torch::nn::AnyModule(Net()); }, {torch::kCPU, torch::kCPU});
    if (group.rank() == 0) copy_parameters(*initial, dp.module());
    DistributedDataParallel ddp(dp, borrow(group), small_buckets());
    torch::optim::SGD sgd(dp.module().parameters(), torch::optim::SGDOptions(0.1));
    for (int s = 0; s < kSteps; ++s) {
      sgd.zero_grad();
      auto x = batches[s].x.narrow(0, group.rank() * 4, 4), y = batches[s].y.narrow(0, group.rank() * 4, 4);
      // Each rank's loss is the mean over its 4 samples; DataParallel splits them 2 + 2.
      torch::mse_loss(ddp.forward(x), y).backward();
      sgd.step();
      expect_identical_across_ranks(group, dp.module(), str_cat("after step ", s));
    }
    EXPECT_TRUE(at::allclose(flat_parameters(dp.module()), flat_parameters(*reference), 1e-5, 1e-5));
  });
}

TEST(DistributedDataParallel, FirstBucketIsReducedWhileBackwardStillRuns) {
  // 6 layers of 512 x 512 floats (1 MiB each): the first bucket (the last layer) is launched
  // long before the first layer's gradient exists.
  testing::on_thread_ranks(2, [&](ProcessGroup& group) {
    Deep model;
    DistributedDataParallel ddp(model, borrow(group));
    for (int it = 0; it < 3; ++it) {
      ddp.forward(torch::randn({64, 512})).sum().backward();
    }
    const auto stats = ddp.last_iteration_stats();
    ASSERT_GE(stats.buckets.size(), 2u);
    EXPECT_LT(stats.buckets[0].launched, stats.last_gradient) << "the first bucket waited for all of backward";
    EXPECT_LE(stats.last_gradient, stats.finished);
    EXPECT_EQ(stats.buckets.size(), ddp.bucket_parameter_names().size()) << "a bucket was not reduced";
  });
}

TEST(DistributedDataParallel, NoSyncAccumulationEqualsTheLargeBatch) {
  constexpr int kMicro = 3;
  const auto batches = make_batches(kMicro, 8);
  Net initial;
  Net reference;
  copy_parameters(*initial, *reference);
  for (const auto& b : batches) torch::mse_loss(reference->forward(b.x), b.y).backward();
  testing::on_thread_ranks(2, [&](ProcessGroup& group) {
    Net model;
    copy_parameters(*initial, *model);
    DistributedDataParallel ddp(model, borrow(group), small_buckets());
    auto step = [&](const Batch& b) {
      auto x = b.x.narrow(0, group.rank() * 4, 4), y = b.y.narrow(0, group.rank() * 4, 4);
      torch::mse_loss(ddp.forward(x), y).backward();
    };
    {
      auto guard = ddp.no_sync();
      for (int m = 0; m < kMicro - 1; ++m) step(batches[m]);
    }
    step(batches[kMicro - 1]);
    auto params = model->parameters();
    auto expected = reference->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(at::allclose(params[i].grad(), expected[i].grad(), 1e-5, 1e-6)) << "parameter " << i;
    }
  });
}

TEST(DistributedDataParallel, AnUnusedParameterIsNamedOrHandled) {
  for (bool find_unused : {false, true}) {
    testing::on_thread_ranks(2, [&](ProcessGroup& group) {
      Net model(16, /*with_spare=*/true);
      DdpOptions options;
      options.find_unused_parameters = find_unused;
      DistributedDataParallel ddp(model, borrow(group), options);
      auto loss = ddp.forward(torch::randn({4, 8})).sum();
      if (!find_unused) {
        try {
          loss.backward();
          ADD_FAILURE() << "backward accepted a parameter without gradient";
        } catch (const std::exception& e) {
          EXPECT_NE(std::string(e.what()).find("got no gradient in this backward: spare.weight, spare.bias"),
                    std::string::npos)
              << e.what();
          EXPECT_NE(std::string(e.what()).find("find_unused_parameters"), std::string::npos) << e.what();
        }
        return;
      }
      loss.backward();
      EXPECT_TRUE(at::equal(model->spare->weight.grad(), at::zeros_like(model->spare->weight)));
      // And the next iteration works as usual.
      ddp.forward(torch::randn({4, 8})).sum().backward();
      expect_identical_across_ranks(group, *model, str_cat("after step ", 0));
    });
  }
}

TEST(DistributedDataParallel, ModelsThatDifferAcrossRanksAreRefusedOnEveryRank) {
  std::vector<std::string> messages(2);
  testing::on_thread_ranks(2, [&](ProcessGroup& group) {
    Net model(group.rank() == 0 ? 16 : 12);
    try {
      DistributedDataParallel ddp(model, borrow(group));
      ADD_FAILURE() << "accepted different models";
    } catch (const MismatchError& e) {
      messages[group.rank()] = e.what();
    }
  });
  for (const auto& m : messages) {
    EXPECT_NE(m.find("the model differs across ranks at parameter 0: rank 0 has 'fc1.weight [16, 8] float32', "
                     "rank 1 has 'fc1.weight [12, 8] float32'"),
              std::string::npos)
        << m;
  }
}

// What a hook is given (comm_hooks.h): each bucket once per backward, in launch order, with its
// index and the bucket count; its members' names, shapes and places in the buffer, where each
// parameter's .grad lives; every parameter in exactly one bucket.
TEST(DistributedDataParallel, AHookSeesEachGradientWithItsNameShapeAndPlace) {
  const auto batches = make_batches(1, 8);
  testing::on_thread_ranks(2, [&](ProcessGroup& group) {
    Net model;
    std::vector<GradBucket> seen;
    DdpOptions options = small_buckets();
    const CommHook reduce = allreduce_hook();
    options.comm_hook = [&](ProcessGroup& g, const GradBucket& bucket) {
      seen.push_back(bucket);
      return reduce(g, bucket);
    };
    DistributedDataParallel ddp(model, borrow(group), options);
    auto x = batches[0].x.narrow(0, group.rank() * 4, 4), y = batches[0].y.narrow(0, group.rank() * 4, 4);
    torch::mse_loss(ddp.forward(x), y).backward();

    const auto names = ddp.bucket_parameter_names();
    ASSERT_EQ(seen.size(), names.size());
    EXPECT_GE(seen.size(), 3u);  // small buckets: several, so index and count mean something
    auto parameters = model->named_parameters();
    std::set<std::string> covered;
    for (size_t b = 0; b < seen.size(); ++b) {
      const GradBucket& bucket = seen[b];
      EXPECT_EQ(bucket.index, b);
      EXPECT_EQ(bucket.count, seen.size());
      EXPECT_EQ(bucket.is_last(), b + 1 == seen.size());
      ASSERT_EQ(bucket.members.size(), names[b].size());
      int64_t next = 0;
      for (size_t k = 0; k < bucket.members.size(); ++k) {
        const auto& member = bucket.members[k];
        EXPECT_EQ(member.name, names[b][k]);
        EXPECT_TRUE(covered.insert(member.name).second) << member.name << " in two buckets";
        const at::Tensor& parameter = parameters[member.name];
        EXPECT_EQ(member.shape, parameter.sizes().vec()) << member.name;
        EXPECT_EQ(member.numel, parameter.numel()) << member.name;
        EXPECT_EQ(member.offset, next) << member.name;  // back to back
        next += member.numel;
        // The member's place in the buffer is the parameter's .grad (reduced there in place).
        EXPECT_EQ(bucket.gradient(k).data_ptr(), parameter.grad().data_ptr()) << member.name;
        EXPECT_EQ(bucket.gradient(k).sizes(), parameter.sizes()) << member.name;
      }
      EXPECT_EQ(bucket.buffer.numel(), next);
      EXPECT_EQ(bucket.buffer.dim(), 1);
      EXPECT_TRUE(bucket.buffer.is_contiguous());
    }
    EXPECT_EQ(covered.size(), parameters.size());
  });
}

TEST(DistributedDataParallel, CompressionHooksStayCloseToFullPrecision) {
  const auto batches = make_batches(1, 8);
  for (auto hook : {fp16_compress_hook(), bf16_compress_hook()}) {
    testing::on_thread_ranks(2, [&](ProcessGroup& group) {
      Net exact_model, compressed_model;
      copy_parameters(*exact_model, *compressed_model);
      DistributedDataParallel exact(exact_model, borrow(group));
      DdpOptions options;
      options.comm_hook = hook;
      DistributedDataParallel compressed(compressed_model, borrow(group), options);
      auto x = batches[0].x.narrow(0, group.rank() * 4, 4), y = batches[0].y.narrow(0, group.rank() * 4, 4);
      torch::mse_loss(exact.forward(x), y).backward();
      torch::mse_loss(compressed.forward(x), y).backward();
      auto a = exact_model->parameters(), b = compressed_model->parameters();
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_TRUE(at::allclose(a[i].grad(), b[i].grad(), 1e-2, 1e-2)) << "parameter " << i;
      }
    });
  }
}

// complete_reductions (comm_hooks.h): after a failure it still waits for every reduction it
// started, but completes none of them: the step's result is lost, and a completion would write
// half of it. Here the second bucket's completion throws after the first bucket's second stage
// started; that stage's reduction finishes, its completion does not run, and the failure comes out.
TEST(DistributedDataParallel, AfterAFailureNoReductionIsCompleted) {
  testing::on_thread_ranks(2, [&](ProcessGroup& group) {
    at::Tensor first = at::ones({4}), second = at::ones({4}), late = at::ones({4});
    bool late_completed = false;
    std::vector<PendingReduction> reductions(2);
    reductions[0].work = group.allreduce_async(first, ReduceOp::kSum);
    reductions[0].next = [&](PendingReduction& stage) {
      stage.work = group.allreduce_async(late, ReduceOp::kSum);
      stage.then = [&] { late_completed = true; };
    };
    reductions[1].work = group.allreduce_async(second, ReduceOp::kSum);
    reductions[1].then = [] { throw std::runtime_error("the second bucket's completion failed"); };
    try {
      complete_reductions(reductions);
      ADD_FAILURE() << "the failure was not rethrown";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "the second bucket's completion failed");
    }
    EXPECT_TRUE(at::equal(late, at::full({4}, 2.0f))) << "the started reduction was waited for";
    EXPECT_FALSE(late_completed);
  });
}

// Note [Uneven inputs]: ranks on batches of unequal size (48 and 16; 40, 16 and 8) reduce to
// the gradient of the mean loss over all 64 samples, so several SGD-with-momentum steps equal
// one process on the concatenated batch; on the plain path and on the compressed ones.
TEST(DistributedDataParallel, WeightedBatchesEqualOneProcessOnTheConcatenatedBatch) {
  constexpr int kSteps = 4;
  const auto batches = make_batches(kSteps, 64);
  Net initial;
  Net reference;
  train_reference(initial, reference, batches, /*momentum=*/0.9);
  // Every tolerance is below the 0.02-0.03 by which the mean of per-rank means misses here
  // (measured with the scaling taken out).
  const struct {
    std::vector<int64_t> split;
    CommHook hook;
    double tolerance;
  } cases[] = {
      {{48, 16}, nullptr, 1e-5},
      {{40, 16, 8}, nullptr, 1e-5},
      {{40, 16, 8}, fp16_compress_hook(), 5e-3},
      {{48, 16}, bf16_compress_hook(), 1e-2},
  };
  for (const auto& c : cases) {
    const int world = static_cast<int>(c.split.size());
    testing::on_thread_ranks(world, [&](ProcessGroup& group) {
      Net model;
      if (group.rank() == 0) copy_parameters(*initial, *model);
      DdpOptions options = small_buckets();
      options.uneven_inputs = true;
      options.comm_hook = c.hook;
      DistributedDataParallel ddp(model, borrow(group), options);
      torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
      int64_t offset = 0;
      for (int r = 0; r < group.rank(); ++r) offset += c.split[static_cast<size_t>(r)];
      const int64_t mine = c.split[static_cast<size_t>(group.rank())];
      for (int s = 0; s < kSteps; ++s) {
        sgd.zero_grad();
        auto x = batches[s].x.narrow(0, offset, mine), y = batches[s].y.narrow(0, offset, mine);
        torch::mse_loss(ddp.forward(x), y).backward();
        sgd.step();
        expect_identical_across_ranks(group, *model, str_cat("after step ", s));
      }
      EXPECT_TRUE(at::allclose(flat_parameters(*model), flat_parameters(*reference), c.tolerance, c.tolerance))
          << world << " ranks: max difference "
          << (flat_parameters(*model) - flat_parameters(*reference)).abs().max().item<float>();
    });
  }
}

// PyTorch's Join: ranks with 5, 7 and 9 batches. A rank that runs out joins and answers the
// others' steps with zero gradients and no samples; each step's gradient is the mean over the
// samples of the ranks still training, and after join() every rank holds the same parameters.
TEST(DistributedDataParallel, RanksWithFiveSevenAndNineBatchesJoinAndMatchTheMath) {
  const int counts[] = {5, 7, 9};
  std::vector<std::vector<Batch>> data;
  for (int r = 0; r < 3; ++r) data.push_back(make_batches(counts[r], 8 + 4 * r));  // 8, 12, 16 samples
  Net initial;
  Net reference;
  copy_parameters(*initial, *reference);
  torch::optim::SGD reference_sgd(reference->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int s = 0; s < 9; ++s) {
    std::vector<at::Tensor> xs, ys;
    for (int r = 0; r < 3; ++r) {
      if (s >= counts[r]) continue;
      xs.push_back(data[r][s].x);
      ys.push_back(data[r][s].y);
    }
    reference_sgd.zero_grad();
    torch::mse_loss(reference->forward(torch::cat(xs)), torch::cat(ys)).backward();
    reference_sgd.step();
  }
  testing::on_thread_ranks(3, [&](ProcessGroup& group) {
    const int rank = group.rank();
    Net model;
    if (rank == 0) copy_parameters(*initial, *model);
    DdpOptions options = small_buckets();
    options.uneven_inputs = true;
    DistributedDataParallel ddp(model, borrow(group), options);
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    for (const auto& b : data[rank]) {
      sgd.zero_grad();
      torch::mse_loss(ddp.forward(b.x), b.y).backward();
      sgd.step();
    }
    EXPECT_EQ(ddp.join(), 9 - counts[rank]);
    expect_identical_across_ranks(group, *model, str_cat("after step ", 9));
    EXPECT_TRUE(at::allclose(flat_parameters(*model), flat_parameters(*reference), 1e-5, 1e-5))
        << "max difference " << (flat_parameters(*model) - flat_parameters(*reference)).abs().max().item<float>();
  });
}

// Gradient accumulation with uneven inputs: batches of 6 and 2 per micro step, 2 micro steps
// under no_sync, equal the sum over micro steps of the mean loss over both ranks' samples (the
// convention of plain DDP, which sums micro steps and averages ranks).
TEST(DistributedDataParallel, WeightedBatchesUnderNoSyncSumTheMicroStepsExactly) {
  const auto batches = make_batches(2, 8);  // two micro steps of 8 samples: 6 for rank 0, 2 for rank 1
  Net initial;
  Net reference;
  copy_parameters(*initial, *reference);
  torch::optim::SGD reference_sgd(reference->parameters(), torch::optim::SGDOptions(0.1));
  reference_sgd.zero_grad();
  for (const auto& b : batches) torch::mse_loss(reference->forward(b.x), b.y).backward();
  reference_sgd.step();
  testing::on_thread_ranks(2, [&](ProcessGroup& group) {
    Net model;
    if (group.rank() == 0) copy_parameters(*initial, *model);
    DdpOptions options = small_buckets();
    options.uneven_inputs = true;
    DistributedDataParallel ddp(model, borrow(group), options);
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1));
    const int64_t offset = group.rank() == 0 ? 0 : 6, mine = group.rank() == 0 ? 6 : 2;
    sgd.zero_grad();
    {
      auto no_sync = ddp.no_sync();
      torch::mse_loss(ddp.forward(batches[0].x.narrow(0, offset, mine)), batches[0].y.narrow(0, offset, mine))
          .backward();
    }
    torch::mse_loss(ddp.forward(batches[1].x.narrow(0, offset, mine)), batches[1].y.narrow(0, offset, mine)).backward();
    sgd.step();
    EXPECT_TRUE(at::allclose(flat_parameters(*model), flat_parameters(*reference), 1e-5, 1e-5))
        << "max difference " << (flat_parameters(*model) - flat_parameters(*reference)).abs().max().item<float>();
  });
}

// A module that counts its forwards in a buffer.
struct CountingImpl : torch::nn::Module {
  CountingImpl() {
    fc = register_module("fc", torch::nn::Linear(8, 4));
    register_buffer("forwards", torch::zeros({1}));
  }
  torch::Tensor forward(torch::Tensor x) {
    {
      torch::NoGradGuard no_grad;
      named_buffers()["forwards"].add_(1);
    }
    return fc(x);
  }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Counting);

// Once rank 0 has joined, the buffers come from rank 1 (rank 0's are stale), an evaluation
// forward without autograd does not make the joined rank wait for buckets, and after join()
// both ranks hold rank 1's buffers.
TEST(DistributedDataParallel, AJoinedRankTakesBuffersFromTheActiveAndSkipsEvaluationForwards) {
  const auto batches = make_batches(3, 4);
  testing::on_thread_ranks(2, [&](ProcessGroup& group) {
    Counting model;
    DdpOptions options;
    options.uneven_inputs = true;
    DistributedDataParallel ddp(model, borrow(group), options);
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1));
    const int steps = group.rank() == 0 ? 1 : 3;
    for (int s = 0; s < steps; ++s) {
      sgd.zero_grad();
      torch::mse_loss(ddp.forward(batches[s].x), batches[s].y).backward();
      sgd.step();
      torch::NoGradGuard evaluating;
      ddp.forward(batches[s].x);
    }
    EXPECT_EQ(ddp.join(), 6 - 2 * steps);
    // Six forwards on rank 1, each after a broadcast of the lowest active rank's count.
    EXPECT_EQ(model->named_buffers()["forwards"].item<float>(), 6.0f);
  });
}

TEST(DistributedDataParallel, BuffersFollowRankZeroBeforeEveryForward) {
  testing::on_thread_ranks(2, [&](ProcessGroup& group) {
    Net model;
    DistributedDataParallel ddp(model, borrow(group));
    {
      torch::NoGradGuard no_grad;
      model->named_buffers()["steps"].fill_(10 + group.rank());
    }
    ddp.forward(torch::randn({2, 8}));
    EXPECT_EQ(model->named_buffers()["steps"].item<float>(), 10.0f);
  });
}

TEST(BucketAssignment, ReverseOrderFirstBucketSmallGroupedByDtype) {
  // Five float32 tensors of 400 B and one float64 tensor; first cap 500 B, then 1000 B.
  std::vector<BucketCandidate> c = {{400, "float32"}, {400, "float32"}, {400, "float64"},
                                    {400, "float32"}, {400, "float32"}, {400, "float32"}};
  auto buckets = assign_buckets(c, 500, 1000);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0], (std::vector<size_t>{5, 4}));     // 800 B >= 500: the small first bucket
  EXPECT_EQ(buckets[1], (std::vector<size_t>{3, 1, 0}));  // 1200 B >= 1000
  EXPECT_EQ(buckets[2], (std::vector<size_t>{2}));        // the float64 one, never full, last
}

}  // namespace
}  // namespace ringtorch
