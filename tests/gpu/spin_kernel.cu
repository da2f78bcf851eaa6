#include <cuda_runtime.h>

#include "gpu/spin_kernel.h"

namespace ringtorch::testing {
namespace {

__device__ unsigned long long global_nanoseconds() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Wall-clock spinning (the global timer counts nanoseconds; it ticks coarsely, which does not
// matter at this scale), so the duration does not depend on the GPU's clock.
__global__ void spin(unsigned long long nanoseconds) {
  const unsigned long long start = global_nanoseconds();
  while (global_nanoseconds() - start < nanoseconds) {
  }
}

}  // namespace

bool launch_spin_kernel(void* stream, int milliseconds) {
  spin<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<unsigned long long>(milliseconds) * 1000000ull);
  return cudaGetLastError() == cudaSuccess;
}

}  // namespace ringtorch::testing
