#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <map>

#include <ringtorch/error.h>

#include "runtime/cuda/blas.h"
#include "runtime/cuda/cuda_check.h"

namespace ringtorch {
namespace cuda {
namespace {

// One handle per thread and device: cuBLAS handles are not safe to share between threads that
// set different streams on them, and a handle belongs to the device current at its creation.
cublasHandle_t thread_handle() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice", "cuBLAS: finding the current device");
  thread_local struct Handles {
    std::map<int, cublasHandle_t> by_device;
    ~Handles() {
      for (auto& entry : by_device) cublasDestroy(entry.second);
    }
  } handles;
  cublasHandle_t& h = handles.by_device[device];
  if (!h) {
    cublasStatus_t s = cublasCreate(&h);
    if (s != CUBLAS_STATUS_SUCCESS) {
      h = nullptr;
      throw IoError(str_cat("cublasCreate on cuda:", device, " failed with status ", static_cast<int>(s)));
    }
  }
  return h;
}

// The device that owns `data`: cuBLAS runs on the current device, so each call makes the
// buffer's device current instead of trusting the caller's.
int device_of(const void* data) {
  cudaPointerAttributes attributes{};
  check(cudaPointerGetAttributes(&attributes, data), "cudaPointerGetAttributes", "cuBLAS: finding a buffer's device");
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged) {
    throw InvalidArgumentError("cuBLAS helpers take device memory; this buffer is host memory");
  }
  return attributes.device;
}

}  // namespace

bool device_available(std::string* why) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why) *why = str_cat("cudaGetDeviceCount: ", cudaGetErrorString(err));
    cudaGetLastError();  // clear the sticky error
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device present";
    return false;
  }
  return true;
}

// Runs `call(handle, offset, n)` over [0, count) in pieces of at most INT_MAX elements (cuBLAS
// takes int counts) on `stream`, with `device_data`'s device current; `name` names a failure.
template <typename Call>
void in_int_pieces(const void* device_data, int64_t count, void* stream, const char* name, Call call) {
  if (count <= 0) return;
  DeviceScope scope(device_of(device_data));
  cublasHandle_t h = thread_handle();
  cublasSetStream(h, static_cast<cudaStream_t>(stream));
  for (int64_t done = 0; done < count;) {
    const int n = static_cast<int>(std::min<int64_t>(count - done, INT_MAX));
    cublasStatus_t s = call(h, done, n);
    if (s != CUBLAS_STATUS_SUCCESS) {
      throw IoError(str_cat(name, "(", n, " floats) failed with status ", static_cast<int>(s)));
    }
    done += n;
  }
}

void scale_in_place(float* data, int64_t count, float alpha, void* stream) {
  in_int_pieces(data, count, stream, "cublasSscal",
                [&](cublasHandle_t h, int64_t offset, int n) { return cublasSscal(h, n, &alpha, data + offset, 1); });
}

void add_scaled(float* y, const float* x, int64_t count, float alpha, void* stream) {
  in_int_pieces(y, count, stream, "cublasSaxpy", [&](cublasHandle_t h, int64_t offset, int n) {
    return cublasSaxpy(h, n, &alpha, x + offset, 1, y + offset, 1);
  });
}

}  // namespace cuda
}  // namespace ringtorch
