// runtime/cuda without LibTorch: the pinned pool, a staged transfer's round trip, cuBLAS scal and
// axpy, and that staging never waits for the whole device. Compiled wherever the toolkit is;
// without a GPU every case skips and says why.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <vector>

#include "gpu/spin_kernel.h"
#include "runtime/cuda/blas.h"
#include "runtime/cuda/pinned_pool.h"
#include "runtime/cuda/staged_transfer.h"

namespace ringtorch {
namespace {

#define SKIP_WITHOUT_GPU()                                  \
  do {                                                      \
    std::string why;                                        \
    if (!cuda::device_available(&why)) GTEST_SKIP() << why; \
  } while (0)

struct DeviceFloats {
  explicit DeviceFloats(const std::vector<float>& values) : n(values.size()) {
    EXPECT_EQ(cudaMalloc(&data, n * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data, values.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceFloats() { cudaFree(data); }
  std::vector<float> read() const {
    std::vector<float> out(n);
    EXPECT_EQ(cudaMemcpy(out.data(), data, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  float* data = nullptr;
  size_t n = 0;
};

std::vector<float> iota_floats(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 1000);
  return v;
}

auto soon(int seconds = 30) { return std::chrono::steady_clock::now() + std::chrono::seconds(seconds); }

TEST(CudaRuntime, AvailabilityExplainsItself) {
  std::string why;
  if (!cuda::device_available(&why)) {
    EXPECT_FALSE(why.empty());
  }
}

TEST(CudaRuntime, PinnedBlocksAreReusedBySizeClass) {
  SKIP_WITHOUT_GPU();
  cuda::PinnedPool pool;
  void* first = nullptr;
  {
    cuda::PinnedPool::Block block = pool.acquire(3 << 20);
    EXPECT_EQ(block.capacity(), size_t{4} << 20);
    first = block.data();
  }
  EXPECT_EQ(pool.cached_bytes(), size_t{4} << 20);
  cuda::PinnedPool::Block again = pool.acquire(4 << 20);
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(pool.cached_bytes(), 0u);
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, again.data()), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);  // page-locked host memory
}

TEST(CudaRuntime, ScaleAndAddScaledOnTheDevice) {
  SKIP_WITHOUT_GPU();
  const std::vector<float> x = iota_floats(1 << 20);
  DeviceFloats a(x), b(x);
  cuda::scale_in_place(a.data, static_cast<int64_t>(a.n), 0.5f, nullptr);
  cuda::add_scaled(b.data, a.data, static_cast<int64_t>(b.n), 2.0f, nullptr);  // b = x + 2 * x/2
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto half = a.read(), doubled = b.read();
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(half[i], 0.5f * x[i]) << i;
    ASSERT_EQ(doubled[i], 2.0f * x[i]) << i;
  }
}

// Every piece in, changed on the host, back out scaled: the device ends with the host's values.
TEST(CudaRuntime, AStagedTransferRoundTripsEveryPiece) {
  SKIP_WITHOUT_GPU();
  const size_t n = (size_t{3} << 20) + 17;  // pieces of 1 MiB, the last one short
  DeviceFloats d(iota_floats(n));
  std::vector<cuda::ByteRange> pieces;
  for (size_t off = 0; off < n * 4; off += size_t{1} << 20) {
    pieces.push_back({off, std::min(size_t{1} << 20, n * 4 - off)});
  }
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cuda::StagedTransfer transfer(0, d.data, pieces, stream, /*copy_in=*/true);
  float* host = static_cast<float*>(transfer.host());
  for (size_t k = 0; k < transfer.pieces(); ++k) {
    transfer.wait_in(k, soon());
    for (size_t i = pieces[k].offset / 4; i < (pieces[k].offset + pieces[k].bytes) / 4; ++i) {
      ASSERT_EQ(host[i], static_cast<float>(i % 1000)) << i;
      host[i] *= 4.0f;
    }
    transfer.copy_out(k, 0.25f);
  }
  transfer.finish(soon());
  const auto back = d.read();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], static_cast<float>(i % 1000)) << i;
  cudaStreamDestroy(stream);
}

// A kernel keeps another stream busy for 3 s; a staged transfer on the caller's stream finishes
// long before it: staging waits on its own events, never on the whole device.
TEST(CudaRuntime, StagingDoesNotWaitForOtherStreams) {
  SKIP_WITHOUT_GPU();
  cudaStream_t busy = nullptr, caller = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&caller, cudaStreamNonBlocking), cudaSuccess);
  DeviceFloats d(iota_floats(1 << 22));
  // Warm the pool and the side stream first: cudaHostAlloc may synchronise, and a first call
  // allocates (as the first all-reduce of a size does in training).
  { cuda::PinnedPool::Block warm = cuda::PinnedPool::process_pool().acquire(d.n * 4); }
  cuda::side_stream(0);
  ASSERT_TRUE(testing::launch_spin_kernel(busy, 3000));
  {
    cuda::StagedTransfer transfer(0, d.data, {{0, d.n * 4}}, caller, /*copy_in=*/true);
    transfer.wait_in(0, soon());
    transfer.copy_out(0);
    transfer.finish(soon());
  }
  EXPECT_EQ(cudaStreamQuery(busy), cudaErrorNotReady) << "the transfer waited for the busy stream";
  EXPECT_EQ(cudaStreamSynchronize(busy), cudaSuccess);
  cudaStreamDestroy(busy);
  cudaStreamDestroy(caller);
}

// A transfer ordered after a kernel that outlives the deadline reports a timeout naming the piece.
TEST(CudaRuntime, AStuckCopyIsReportedAtTheDeadline) {
  SKIP_WITHOUT_GPU();
  cudaStream_t caller = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&caller, cudaStreamNonBlocking), cudaSuccess);
  DeviceFloats d(iota_floats(1024));
  ASSERT_TRUE(testing::launch_spin_kernel(caller, 2000));  // the copy waits for this
  cuda::StagedTransfer transfer(0, d.data, {{0, 4096}}, caller, /*copy_in=*/true);
  try {
    transfer.wait_in(0, std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
    ADD_FAILURE() << "no timeout";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("piece 1 of 1"), std::string::npos) << e.what();
  }
  cudaStreamSynchronize(caller);
  cudaStreamDestroy(caller);
}

}  // namespace
}  // namespace ringtorch
