// Bandwidth of copies between a GPU and pinned host memory from ringtorch's pinned pool, the
// bound's first input in bench/cuda_allreduce_bound (the other is the CPU all-reduce time).
//
//   pinned_copy_bench [--bytes 64M] [--iters 20] [--device N]
// Prints one JSON line: {"bytes", "d2h_gbps", "h2d_gbps"} (median of the iterations, GB = 1e9 B).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <ringtorch/error.h>

#include "base/command_line.h"
#include "base/parse.h"
#include "runtime/cuda/pinned_pool.h"

namespace {

int fail(const char* what, cudaError_t status) {
  std::fprintf(stderr, "pinned_copy_bench: %s failed: %s\n", what, cudaGetErrorString(status));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = size_t{64} << 20;
  int iters = 20, device = 0;
  ringtorch::CommandLine cli("pinned_copy_bench", "usage: pinned_copy_bench [--bytes 64M] [--iters 20] [--device N]\n");
  cli.option("--bytes",
             [&](const std::string& v) { bytes = static_cast<size_t>(ringtorch::parse_byte_size(v, "--bytes")); })
      .option("--iters", [&](const std::string& v) { iters = ringtorch::parse_int_in_range(v, 1, 1000000, "--iters"); })
      .option("--device",
              [&](const std::string& v) { device = ringtorch::parse_int_in_range(v, 0, 1023, "--device"); });
  if (const int status = cli.parse_main(argc, argv); status >= 0) return status;
  cudaError_t status;
  if ((status = cudaSetDevice(device)) != cudaSuccess) return fail("cudaSetDevice", status);
  void* gpu = nullptr;
  if ((status = cudaMalloc(&gpu, bytes)) != cudaSuccess) return fail("cudaMalloc", status);
  ringtorch::cuda::PinnedPool::Block host = ringtorch::cuda::PinnedPool::process_pool().acquire(bytes);
  std::memset(host.data(), 1, bytes);
  cudaStream_t stream;
  cudaEvent_t start, stop;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  auto median_gbps = [&](cudaMemcpyKind kind) {
    std::vector<double> gbps;
    for (int i = 0; i < iters + 2; ++i) {  // two warm-ups
      void* dst = kind == cudaMemcpyDeviceToHost ? host.data() : gpu;
      const void* src = kind == cudaMemcpyDeviceToHost ? gpu : host.data();
      cudaEventRecord(start, stream);
      cudaMemcpyAsync(dst, src, bytes, kind, stream);
      cudaEventRecord(stop, stream);
      cudaEventSynchronize(stop);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      if (i >= 2) gbps.push_back(bytes / (ms * 1e-3) / 1e9);
    }
    std::sort(gbps.begin(), gbps.end());
    return gbps[gbps.size() / 2];
  };
  const double d2h = median_gbps(cudaMemcpyDeviceToHost);
  const double h2d = median_gbps(cudaMemcpyHostToDevice);
  if ((status = cudaGetLastError()) != cudaSuccess) return fail("a copy", status);
  std::printf("{\"bytes\": %zu, \"d2h_gbps\": %.2f, \"h2d_gbps\": %.2f}\n", bytes, d2h, h2d);
  cudaFree(gpu);
  return 0;
}
