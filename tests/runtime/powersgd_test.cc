// PowerSGD (powersgd.h) on thread ranks over real Gloo: the hook's math called directly on
// buckets built by hand, then under DistributedDataParallel (replicas stay bitwise equal) and
// across a save and restore of its state.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <ringtorch/distributed_data_parallel.h>
#include <ringtorch/error.h>
#include <ringtorch/powersgd.h>

#include "runtime/training/powersgd_kernels.h"
#include "support/replicas.h"
#include "support/stderr_capture.h"
#include "support/thread_ranks.h"

namespace ringtorch {
namespace {

using testing::borrow;
using testing::expect_identical_across_ranks;
using testing::expect_same_on_every_rank;
using testing::flat_parameters;

GradBucket make_bucket(const std::vector<std::vector<int64_t>>& shapes, size_t index = 0, size_t count = 1) {
  GradBucket bucket;
  bucket.index = index;
  bucket.count = count;
  int64_t offset = 0;
  for (size_t k = 0; k < shapes.size(); ++k) {
    int64_t numel = 1;
    for (int64_t d : shapes[k]) numel *= d;
    bucket.members.push_back({str_cat("p", k), shapes[k], offset, numel});
    offset += numel;
  }
  bucket.buffer = at::zeros({offset});
  return bucket;
}

// Starts every bucket's reduction, then completes them, as DistributedDataParallel does.
void reduce_all(const CommHook& hook, ProcessGroup& group, const std::vector<GradBucket>& buckets) {
  std::vector<PendingReduction> pending;
  for (const auto& b : buckets) pending.push_back(hook(group, b));
  complete_reductions(pending);
}

at::Tensor mean_over_ranks(ProcessGroup& group, const at::Tensor& t) {
  at::Tensor sum = t.clone();
  group.allreduce(sum, ReduceOp::kSum);
  return sum / group.size();
}

PowerSgdOptions options_with(int rank, int64_t start_step) {
  PowerSgdOptions o;
  o.matrix_approximation_rank = rank;
  o.start_step = start_step;
  return o;
}

// A gradient of rank <= r (every rank's in the same column space) comes back as the average,
// to float rounding (one power iteration finds its column space exactly); a vector beside it
// travels uncompressed and is the exact average.
TEST(PowerSgd, AGradientOfRankAtMostRIsReproduced) {
  testing::on_thread_ranks(2, [](ProcessGroup& group) {
    auto state = std::make_shared<PowerSgdState>(options_with(2, 0));
    CommHook hook = powersgd_hook(state);
    GradBucket bucket = make_bucket({{32, 24}, {32}});
    auto shared = at::detail::createCPUGenerator(11);
    auto own = at::detail::createCPUGenerator(100 + group.rank());
    const at::Tensor u = at::randn({32, 2}, shared);
    const at::Tensor weight = at::mm(u, at::randn({2, 24}, own));
    const at::Tensor bias = at::randn({32}, own);
    bucket.gradient(0).copy_(weight);
    bucket.gradient(1).copy_(bias);
    reduce_all(hook, group, {bucket});
    const at::Tensor expected_weight = mean_over_ranks(group, weight), expected_bias = mean_over_ranks(group, bias);
    EXPECT_TRUE(at::allclose(bucket.gradient(0), expected_weight, 1e-5, 1e-5))
        << "max difference " << (bucket.gradient(0) - expected_weight).abs().max().item<float>();
    EXPECT_TRUE(at::equal(bucket.gradient(1), expected_bias));
    EXPECT_EQ(state->step(), 1);
    EXPECT_EQ(state->elements_before_compression(), 32 * 24 + 32);
    EXPECT_EQ(state->elements_after_compression(), 32 + (32 + 24) * 2);
  });
}

// Error feedback: over several steps, on every rank, what the hook returned plus what stays in
// the rank's error buffer is the sum of the rank's own gradients (a rank-1 approximation of
// full-rank gradients leaves plenty behind each step); the results are bitwise equal on every
// rank, so the replicas take the same step.
TEST(PowerSgd, WhatWasSentPlusTheErrorIsTheSumOfTheGradients) {
  testing::on_thread_ranks(2, [](ProcessGroup& group) {
    auto state = std::make_shared<PowerSgdState>(options_with(1, 0));
    CommHook hook = powersgd_hook(state);
    std::vector<GradBucket> buckets = {make_bucket({{16, 12}, {12}}, 0, 2), make_bucket({{20, 10}}, 1, 2)};
    std::vector<at::Tensor> gradients_sum, results_sum;
    for (const auto& b : buckets) {
      gradients_sum.push_back(at::zeros_like(b.buffer));
      results_sum.push_back(at::zeros_like(b.buffer));
    }
    auto own = at::detail::createCPUGenerator(200 + group.rank());
    constexpr int kSteps = 6;
    for (int step = 0; step < kSteps; ++step) {
      for (size_t k = 0; k < buckets.size(); ++k) {
        buckets[k].buffer.copy_(at::randn({buckets[k].buffer.numel()}, own));
        gradients_sum[k] += buckets[k].buffer;
      }
      reduce_all(hook, group, buckets);
      for (size_t k = 0; k < buckets.size(); ++k) {
        results_sum[k] += buckets[k].buffer;
        expect_same_on_every_rank(group, buckets[k].buffer, str_cat("step ", step, " bucket ", k));
      }
    }
    EXPECT_EQ(state->step(), kSteps);
    const auto saved = state->state_dict();
    for (size_t k = 0; k < buckets.size(); ++k) {
      const at::Tensor error = saved.at(str_cat("error.", k));
      EXPECT_GT(error.abs().max().item<float>(), 0.1f) << "a rank-1 approximation sends everything?";
      EXPECT_TRUE(at::allclose(results_sum[k] + error, gradients_sum[k], 1e-4, 1e-4))
          << "bucket " << k << ": max difference "
          << (results_sum[k] + error - gradients_sum[k]).abs().max().item<float>();
    }
  });
}

// Before start_step the buckets are all-reduced plainly: the exact average, no error kept.
TEST(PowerSgd, PlainAllReduceBeforeTheStartStep) {
  testing::on_thread_ranks(2, [](ProcessGroup& group) {
    auto state = std::make_shared<PowerSgdState>(options_with(1, 2));
    CommHook hook = powersgd_hook(state);
    GradBucket bucket = make_bucket({{16, 12}});
    auto own = at::detail::createCPUGenerator(300 + group.rank());
    for (int step = 0; step < 2; ++step) {
      const at::Tensor gradient = at::randn({16 * 12}, own);
      bucket.buffer.copy_(gradient);
      reduce_all(hook, group, {bucket});
      EXPECT_TRUE(at::allclose(bucket.buffer, mean_over_ranks(group, gradient), 1e-6, 1e-6));
    }
    EXPECT_EQ(state->step(), 2);
    EXPECT_EQ(state->state_dict().count("error.0"), 0u);
    bucket.buffer.copy_(at::randn({16 * 12}, own));
    reduce_all(hook, group, {bucket});
    EXPECT_EQ(state->state_dict().count("error.0"), 1u);
  });
}

// The one-pass kernels agree with at::mm (to float rounding: their sums run in another order),
// for every rank with a fixed-width path (1, 2, 4, 8) and one without (3); rows not a multiple
// of the rows taken at once (4), columns not a multiple of the vector width (4).
TEST(PowerSgdKernels, AgreeWithTheTensorProducts) {
  auto generator = at::detail::createCPUGenerator(5);
  for (int64_t r : {1, 2, 3, 4, 8}) {
    const int64_t rows = 37, cols = 53;
    const at::Tensor error = at::randn({rows, cols}, generator), gradient = at::randn({rows, cols}, generator);
    const at::Tensor q = at::randn({cols, r}, generator);
    at::Tensor m = error.clone(), p = at::empty({rows, r});
    powersgd_kernels::add_and_multiply(m.data_ptr<float>(), gradient.data_ptr<float>(), q.data_ptr<float>(),
                                       p.data_ptr<float>(), rows, cols, r);
    EXPECT_TRUE(at::equal(m, error + gradient)) << "rank " << r;
    EXPECT_TRUE(at::allclose(p, at::mm(error + gradient, q), 1e-4, 1e-4)) << "rank " << r;
    at::Tensor q_back = at::empty({cols, r});
    powersgd_kernels::multiply_transposed(m.data_ptr<float>(), p.data_ptr<float>(), q_back.data_ptr<float>(), rows,
                                          cols, r);
    EXPECT_TRUE(at::allclose(q_back, at::mm(m.t(), p), 1e-4, 1e-3)) << "rank " << r;
    at::Tensor out = at::empty({rows, cols}), residual = m.clone();
    powersgd_kernels::reconstruct(p.data_ptr<float>(), q_back.data_ptr<float>(), out.data_ptr<float>(),
                                  residual.data_ptr<float>(), rows, cols, r);
    const at::Tensor expected = at::mm(p, q_back.t());
    EXPECT_TRUE(at::allclose(out, expected, 1e-4, 1e-3)) << "rank " << r;
    EXPECT_TRUE(at::allclose(residual, m - expected, 1e-4, 1e-3)) << "rank " << r;
  }
}

// The kernels' sums in the orders powersgd_kernels.h states, as plain loops over vectors (never
// empty, so that every pointer is a real one).
struct Sizes {
  int64_t rows, cols, r;
};
std::vector<float> reference_multiply(const std::vector<float>& m, const std::vector<float>& q, Sizes s) {
  std::vector<float> p(static_cast<size_t>(std::max<int64_t>(1, s.rows * s.r)));
  const bool lanes = s.r == 1 || s.r == 2 || s.r == 4 || s.r == 8;
  const int64_t blocked = s.cols / 4 * 4;
  for (int64_t i = 0; i < s.rows; ++i) {
    for (int64_t c = 0; c < s.r; ++c) {
      float lane[4] = {0, 0, 0, 0};
      for (int64_t j = 0; j < s.cols; ++j) lane[lanes && j < blocked ? j % 4 : 0] += m[i * s.cols + j] * q[j * s.r + c];
      p[i * s.r + c] = lanes ? (lane[0] + lane[1]) + (lane[2] + lane[3]) : lane[0];
    }
  }
  return p;
}
std::vector<float> reference_multiply_transposed(const std::vector<float>& m, const std::vector<float>& p, Sizes s) {
  std::vector<float> q(static_cast<size_t>(std::max<int64_t>(1, s.cols * s.r)));
  for (int64_t j = 0; j < s.cols; ++j) {
    for (int64_t c = 0; c < s.r; ++c) {
      float sum = 0;
      for (int64_t i = 0; i < s.rows; ++i) sum += p[i * s.r + c] * m[i * s.cols + j];
      q[j * s.r + c] = sum;
    }
  }
  return q;
}
std::vector<float> reference_reconstruct(const std::vector<float>& p, const std::vector<float>& q, Sizes s) {
  std::vector<float> out(static_cast<size_t>(std::max<int64_t>(1, s.rows * s.cols)));
  for (int64_t i = 0; i < s.rows; ++i) {
    for (int64_t j = 0; j < s.cols; ++j) {
      float value = 0;
      for (int64_t c = 0; c < s.r; ++c) value += p[i * s.r + c] * q[j * s.r + c];
      out[i * s.cols + j] = value;
    }
  }
  return out;
}

// The kernels compute exactly the bits of those loops (their blocking in rows and vectors
// changes no sum's order), for every rank's path and for empty, narrow and odd shapes.
TEST(PowerSgdKernels, SumInTheirStatedOrderBitForBit) {
  std::mt19937 generator(11);
  std::normal_distribution<float> normal;
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(std::max<int64_t>(1, n)));
    for (float& x : v) x = normal(generator);
    return v;
  };
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{0, 5}, {3, 0}, {1, 3}, {3, 4},
                                                           {4, 8}, {5, 9}, {9, 6}, {37, 53}};
  for (int64_t r : {1, 2, 3, 4, 8}) {
    for (const auto& [rows, cols] : shapes) {
      const Sizes s{rows, cols, r};
      const std::string where = str_cat("rank ", r, ", ", rows, " x ", cols);
      const bool empty = rows * cols == 0;  // the vectors hold one placeholder the kernels leave alone
      const std::vector<float> error = random(rows * cols), gradient = random(rows * cols), q = random(cols * r);
      std::vector<float> m = error, p(static_cast<size_t>(std::max<int64_t>(1, rows * r)));
      powersgd_kernels::add_and_multiply(m.data(), gradient.data(), q.data(), p.data(), rows, cols, r);
      std::vector<float> sum = error;
      for (size_t k = 0; !empty && k < sum.size(); ++k) sum[k] += gradient[k];
      EXPECT_EQ(m, sum) << where;
      EXPECT_EQ(p, reference_multiply(sum, q, s)) << where;
      std::vector<float> q_back(static_cast<size_t>(std::max<int64_t>(1, cols * r)));
      powersgd_kernels::multiply_transposed(m.data(), p.data(), q_back.data(), rows, cols, r);
      EXPECT_EQ(q_back, reference_multiply_transposed(m, p, s)) << where;
      std::vector<float> out(m.size()), residual = m;
      powersgd_kernels::reconstruct(p.data(), q_back.data(), out.data(), residual.data(), rows, cols, r);
      const std::vector<float> expected = reference_reconstruct(p, q_back, s);
      EXPECT_EQ(out, expected) << where;
      std::vector<float> expected_residual = m;
      for (size_t k = 0; !empty && k < expected_residual.size(); ++k) expected_residual[k] -= expected[k];
      EXPECT_EQ(residual, expected_residual) << where;
    }
  }
}

struct SmallNetImpl : torch::nn::Module {
  SmallNetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 32));  // 32 x 8: compressed at rank 2
    fc2 = register_module("fc2", torch::nn::Linear(32, 4));  // 4 x 32: too small to gain
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(SmallNet);

void copy_parameters(torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  auto source = from.parameters(), target = to.parameters();
  for (size_t i = 0; i < source.size(); ++i) target[i].copy_(source[i]);
}

// `steps` SGD steps under DistributedDataParallel with PowerSGD, each rank on its own batches
// (drawn from `data`), small buckets so that there are several.
void train_steps(SmallNet& model, DistributedDataParallel& ddp, int steps, at::Generator& data, ProcessGroup& group) {
  torch::optim::SGD sgd(model->parameters(), 0.05);
  for (int s = 0; s < steps; ++s) {
    sgd.zero_grad();
    const at::Tensor x = at::randn({16, 8}, data), y = at::randn({16, 4}, data);
    torch::mse_loss(ddp.forward(x), y).backward();
    sgd.step();
    expect_same_on_every_rank(group, flat_parameters(*model), str_cat("parameters after step ", s));
  }
}

DdpOptions powersgd_ddp(const std::shared_ptr<PowerSgdState>& state) {
  DdpOptions o;
  o.first_bucket_mb = 64.0 / (1 << 20);
  o.bucket_cap_mb = 1024.0 / (1 << 20);
  o.comm_hook = powersgd_hook(state);
  return o;
}

// Under DistributedDataParallel the replicas stay bitwise equal after every step, and a run whose
// PowerSGD state (and weights) were saved after 4 steps and restored into a new model, wrapper
// and state continues exactly as the uninterrupted run.
TEST(PowerSgd, DdpReplicasStayEqualAndARestoredStateContinuesExactly) {
  testing::on_thread_ranks(2, [](ProcessGroup& group) {
    SmallNet initial;  // each rank's differs (one default generator for all threads): DDP takes rank 0's
    at::Tensor uninterrupted;
    {
      SmallNet model;
      copy_parameters(*initial, *model);
      auto state = std::make_shared<PowerSgdState>(options_with(2, 2));
      DistributedDataParallel ddp(model, borrow(group), powersgd_ddp(state));
      auto data = at::detail::createCPUGenerator(400 + group.rank());
      train_steps(model, ddp, 8, data, group);
      EXPECT_EQ(state->step(), 8);
      EXPECT_GT(state->elements_before_compression(), state->elements_after_compression());
      uninterrupted = flat_parameters(*model);
    }
    SmallNet model;
    copy_parameters(*initial, *model);
    auto data = at::detail::createCPUGenerator(400 + group.rank());
    std::map<std::string, at::Tensor> saved_state;
    std::vector<at::Tensor> saved_weights;
    {
      auto state = std::make_shared<PowerSgdState>(options_with(2, 2));
      DistributedDataParallel ddp(model, borrow(group), powersgd_ddp(state));
      train_steps(model, ddp, 4, data, group);
      saved_state = state->state_dict();
      for (auto& p : model->parameters()) saved_weights.push_back(p.detach().clone());
    }
    SmallNet resumed;
    {
      torch::NoGradGuard no_grad;
      auto params = resumed->parameters();
      for (size_t i = 0; i < params.size(); ++i) params[i].copy_(saved_weights[i]);
    }
    auto state = std::make_shared<PowerSgdState>(options_with(2, 2));
    state->load_state_dict(saved_state);
    EXPECT_EQ(state->step(), 4);
    DistributedDataParallel ddp(resumed, borrow(group), powersgd_ddp(state));
    train_steps(resumed, ddp, 4, data, group);
    EXPECT_TRUE(at::equal(flat_parameters(*resumed), uninterrupted))
        << "max difference " << (flat_parameters(*resumed) - uninterrupted).abs().max().item<float>();
  });
}

TEST(PowerSgd, BadSettingsAndStateAreNamed) {
  PowerSgdOptions zero_rank;
  zero_rank.matrix_approximation_rank = 0;
  EXPECT_THROW(PowerSgdState{zero_rank}, InvalidArgumentError);
  PowerSgdState state(options_with(1, 0));
  try {
    state.load_state_dict({{"qq.0", at::zeros({1})}});
    ADD_FAILURE() << "accepted an unknown entry";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown entry 'qq.0'"), std::string::npos) << e.what();
  }
  // A saved Q or error that does not fit the bucket (another model, bucket size or rank) is
  // replaced when the hook meets it, with a warning naming the rank and the bucket; the step goes on.
  testing::on_thread_ranks(1, [](ProcessGroup& group) {
    auto mismatched = std::make_shared<PowerSgdState>(options_with(1, 0));
    mismatched->load_state_dict(
        {{"step", at::full({1}, 5, at::kLong)}, {"q.0", at::zeros({3})}, {"error.0", at::zeros({7})}});
    GradBucket bucket = make_bucket({{16, 12}});
    bucket.buffer.fill_(1.0f);  // rank 1: one power iteration reproduces it
    testing::StderrCapture warnings;
    reduce_all(powersgd_hook(mismatched), group, {bucket});
    const std::string text = warnings.finish();
    EXPECT_NE(text.find("rank 0: PowerSGD: the saved state of bucket 0 holds a Q of 3 elements, this model's bucket "
                        "needs 12"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("a new one is drawn"), std::string::npos) << text;
    EXPECT_NE(text.find("bucket 0 holds an error of 7 elements, this model's bucket needs 192"), std::string::npos)
        << text;
    EXPECT_TRUE(at::allclose(bucket.buffer, at::ones({16 * 12}), 1e-5, 1e-5));
    EXPECT_EQ(mismatched->state_dict().at("q.0").numel(), 12);
  });
}

}  // namespace
}  // namespace ringtorch
