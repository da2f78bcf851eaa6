// CUDA tensors in the process group and DDP on the GPU (runtime/comm/cuda_tensor_staging.h,
// runtime/cuda/staged_transfer.h). Needs a CUDA build of LibTorch and a GPU: elsewhere (Debian's
// CPU LibTorch, CI) every case skips and says why. Ranks are threads sharing the GPU, over real Gloo.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ringtorch/distributed_data_parallel.h>

#include "runtime/comm/piece_plan.h"
#include "support/thread_ranks.h"

#ifdef RINGTORCH_WITH_CUDA
#include <cuda_runtime.h>

#include "gpu/spin_kernel.h"
#endif

namespace ringtorch {
namespace {

#define SKIP_WITHOUT_CUDA()                                                             \
  if (!at::hasCUDA())                                                                   \
  GTEST_SKIP() << "no CUDA device (or a LibTorch built without CUDA): nothing to test " \
                  "here; tests/gpu/device_check.sh runs this on a GPU machine"

// Every collective on CUDA tensors gives what it gives on CPU tensors.
TEST(CudaProcessGroup, EveryCollectiveOnCudaTensorsEqualsTheCpuResult) {
  SKIP_WITHOUT_CUDA();
  std::vector<std::vector<at::Tensor>> cpu_result;
  for (bool cuda : {false, true}) {
    std::vector<std::vector<at::Tensor>> seen(2);
    testing::on_thread_ranks(2, [&](ProcessGroup& g) {
      const auto device = cuda ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
      const int r = g.rank();
      auto on = [&](at::Tensor t) { return t.to(device); };
      at::Tensor sum = on(at::arange(1 << 20, at::kFloat) * (r + 1));
      g.allreduce(sum);
      at::Tensor b = on(at::full({1000}, static_cast<float>(r)));
      g.broadcast(b, 1);
      at::Tensor gathered = on(at::empty({2 * 333}));
      g.allgather(on(at::full({333}, static_cast<float>(r))), gathered);
      at::Tensor scattered = on(at::empty({100}));
      g.reduce_scatter(on(at::arange(200, at::kFloat) + r), scattered);
      at::Tensor reduced = on(at::full({10}, r + 1.0));
      g.reduce(reduced, 0);
      at::Tensor all = on(at::empty({2 * 7}, at::kLong));
      g.alltoall(on(at::arange(14, at::kLong) + 100 * r), all);
      g.barrier();
      seen[r] = {sum.cpu(), b.cpu(), gathered.cpu(), scattered.cpu(), reduced.cpu(), all.cpu()};
      if (cuda) {
        EXPECT_TRUE(sum.is_cuda());
      }
    });
    if (!cuda) {
      cpu_result = seen;
      continue;
    }
    for (int r = 0; r < 2; ++r) {
      for (size_t i = 0; i < seen[r].size(); ++i) {
        if (i == 4 && r != 0) continue;  // reduce: only the root's result is defined
        EXPECT_TRUE(at::equal(seen[r][i], cpu_result[r][i])) << "rank " << r << " collective " << i;
      }
    }
  }
}

// One group, rank 0's tensors on the GPU and rank 1's on the CPU: both see the same results.
TEST(CudaProcessGroup, AMixedCpuAndGpuGroupAgrees) {
  SKIP_WITHOUT_CUDA();
  std::vector<at::Tensor> seen(2);
  testing::on_thread_ranks(2, [&](ProcessGroup& g) {
    const auto device = g.rank() == 0 ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
    at::Tensor t = at::randn({1 << 18}, at::detail::createCPUGenerator(g.rank())).to(device);
    g.allreduce(t);
    seen[g.rank()] = t.cpu();
  });
  EXPECT_TRUE(at::equal(seen[0], seen[1]));
}

// send/recv carry CUDA tensors both ways, also between a CUDA tensor and a CPU one.
TEST(CudaProcessGroup, SendAndRecvCarryCudaTensors) {
  SKIP_WITHOUT_CUDA();
  testing::on_thread_ranks(2, [&](ProcessGroup& g) {
    const at::Tensor values = at::arange(1 << 20, at::kFloat);
    if (g.rank() == 0) {
      g.send(values.to(at::kCUDA), 1, 7);
      at::Tensor back = at::zeros({1 << 20});  // a CPU tensor receives rank 1's CUDA tensor
      g.recv(back, 1, 8);
      EXPECT_TRUE(at::equal(back, values * 2));
    } else {
      at::Tensor got = at::zeros({1 << 20}, at::kCUDA);
      g.recv(got, 0, 7);
      EXPECT_TRUE(at::equal(got.cpu(), values));
      g.send(got * 2, 0, 8);
    }
  });
}

// The same with a buffer of several pieces (the GPU rank overlaps its copies with the reduction;
// the CPU rank reduces the same pieces in place), summed and averaged.
TEST(CudaProcessGroup, AMixedGroupAgreesOnBuffersOfSeveralPieces) {
  SKIP_WITHOUT_CUDA();
  const int64_t n = static_cast<int64_t>(kAllreducePieceBytes / 4) * 5 / 2;
  std::vector<at::Tensor> sums(2), averages(2);
  testing::on_thread_ranks(2, [&](ProcessGroup& g) {
    const auto device = g.rank() == 0 ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
    const at::Tensor base = at::arange(n, at::kLong).remainder(1000).to(at::kFloat);
    at::Tensor sum = (base + g.rank()).to(device);
    g.allreduce(sum, ReduceOp::kSum);
    sums[g.rank()] = sum.cpu();
    at::Tensor avg = (base * 2 + g.rank() * 2).to(device);
    g.allreduce(avg, ReduceOp::kAvg);
    averages[g.rank()] = avg.cpu();
  });
  const at::Tensor expected = at::arange(n, at::kLong).remainder(1000).to(at::kFloat) * 2 + 1;
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(at::equal(sums[r], expected)) << "rank " << r;
    EXPECT_TRUE(at::equal(averages[r], expected)) << "rank " << r;
  }
}

#ifdef RINGTORCH_WITH_CUDA
// A kernel keeps another stream busy for 4 s while two GPU ranks all-reduce 64 MiB: the
// all-reduce completes long before the kernel ends, so nothing in its path synchronised the
// whole device.
TEST(CudaProcessGroup, AllreduceDoesNotSynchroniseTheDevice) {
  SKIP_WITHOUT_CUDA();
  cudaStream_t busy = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking), cudaSuccess);
  std::vector<at::Tensor> results(2);
  bool spun = false;
  testing::on_thread_ranks(2, [&](ProcessGroup& g) {
    at::Tensor t = at::full({16 << 20}, g.rank() + 1.0f, at::kCUDA);
    // A first all-reduce of this size warms what may synchronise once: cudaHostAlloc for the
    // pinned pool, the side stream's creation, LibTorch's allocator.
    at::Tensor warm = t.clone();
    g.allreduce(warm);
    g.barrier();
    if (g.rank() == 0) spun = testing::launch_spin_kernel(busy, 4000);
    g.barrier();
    g.allreduce(t);
    results[g.rank()] = t;
  });
  ASSERT_TRUE(spun);
  EXPECT_EQ(cudaStreamQuery(busy), cudaErrorNotReady) << "the all-reduce waited for an unrelated stream";
  for (const at::Tensor& t : results) EXPECT_TRUE(at::equal(t.cpu(), at::full({16 << 20}, 3.0f)));
  cudaStreamSynchronize(busy);
  cudaStreamDestroy(busy);
}
#endif

// DDP of a model on the GPU trains like the same model on the CPU, within float tolerance.
TEST(CudaProcessGroup, DdpOnTheGpuMatchesTheCpuRun) {
  SKIP_WITHOUT_CUDA();
  auto train = [](bool cuda) {
    std::vector<at::Tensor> weights(2);
    testing::on_thread_ranks(2, [&](ProcessGroup& g) {
      const auto device = cuda ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
      torch::manual_seed(0);
      auto model = std::make_shared<torch::nn::LinearImpl>(32, 4);
      model->to(device);
      DistributedDataParallel ddp(model, std::shared_ptr<ProcessGroup>(&g, [](ProcessGroup*) {}));
      torch::optim::SGD sgd(model->parameters(), 0.1);
      auto gen = at::detail::createCPUGenerator(10 + g.rank());
      for (int step = 0; step < 5; ++step) {
        at::Tensor x = at::randn({16, 32}, gen).to(device);
        sgd.zero_grad();
        ddp.forward(x).pow(2).mean().backward();
        sgd.step();
      }
      weights[g.rank()] = model->weight.detach().cpu();
    });
    return weights;
  };
  const auto cpu = train(false), gpu = train(true);
  EXPECT_TRUE(at::equal(gpu[0], gpu[1]));
  EXPECT_TRUE(at::allclose(gpu[0], cpu[0], 1e-4, 1e-5));
}

}  // namespace
}  // namespace ringtorch
