// runtime/cuda: compiled everywhere the toolkit is; run where a GPU is. Without one, the test
// skips and says why.
#include "runtime/cuda/blas.h"

#include <gtest/gtest.h>

#ifdef RINGTORCH_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace ringtorch {
namespace {

TEST(CudaBlas, ScaleInPlaceOnTheDevice) {
  std::string why;
  if (!cuda::device_available(&why)) GTEST_SKIP() << "no usable GPU: " << why;
#ifdef RINGTORCH_WITH_CUDA
  const int64_t n = 1000;
  std::vector<float> host(n);
  for (int64_t i = 0; i < n; ++i) host[i] = static_cast<float>(i);
  float* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, n * sizeof(float)), cudaSuccess);
  cudaMemcpy(device, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  cuda::scale_in_place(device, n, 0.5f, nullptr);
  cudaMemcpy(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(device);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(host[i], 0.5f * static_cast<float>(i));
#endif
}

TEST(CudaBlas, AvailabilityExplainsItself) {
  std::string why;
  if (!cuda::device_available(&why)) {
    EXPECT_FALSE(why.empty());
  }
}

}  // namespace
}  // namespace ringtorch
