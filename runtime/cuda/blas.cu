#include "runtime/cuda/blas.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <climits>

#include "rendezvous/error.h"

namespace ringtorch {
namespace cuda {
namespace {

// One handle per thread: cuBLAS handles are not safe to share between threads that set
// different streams on them.
cublasHandle_t thread_handle() {
  thread_local struct Handle {
    cublasHandle_t h = nullptr;
    ~Handle() {
      if (h) cublasDestroy(h);
    }
  } handle;
  if (!handle.h) {
    cublasStatus_t s = cublasCreate(&handle.h);
    if (s != CUBLAS_STATUS_SUCCESS) {
      handle.h = nullptr;
      throw IoError(str_cat("cublasCreate failed with status ", static_cast<int>(s)));
    }
  }
  return handle.h;
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

void scale_in_place(float* data, int64_t count, float alpha, void* stream) {
  cublasHandle_t h = thread_handle();
  cublasSetStream(h, static_cast<cudaStream_t>(stream));
  // cublasSscal takes an int count: large buffers go in INT_MAX-sized pieces.
  for (int64_t done = 0; done < count;) {
    const int n = static_cast<int>(std::min<int64_t>(count - done, INT_MAX));
    cublasStatus_t s = cublasSscal(h, n, &alpha, data + done, 1);
    if (s != CUBLAS_STATUS_SUCCESS) {
      throw IoError(str_cat("cublasSscal(", n, " floats) failed with status ", static_cast<int>(s)));
    }
    done += n;
  }
}

}  // namespace cuda
}  // namespace ringtorch
