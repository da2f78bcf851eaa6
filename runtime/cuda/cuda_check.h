// Internal to runtime/cuda (compiled only with the CUDA toolkit): turns a CUDA runtime status
// into an IoError that names the call and what it was doing, and keeps a device current for a
// scope.
#pragma once

#include <cuda_runtime.h>

#include <ringtorch/error.h>

namespace ringtorch {
namespace cuda {

// Throws IoError("<what>: <call> failed: <CUDA's message>") unless `status` is cudaSuccess.
inline void check(cudaError_t status, const char* call, const std::string& what) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so the next call does not report it again
  throw IoError(str_cat(what, ": ", call, " failed: ", cudaGetErrorString(status), " (CUDA error ",
                        static_cast<int>(status), ")"));
}

// Makes `device` current on this thread for the scope and restores the previous one.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice", "selecting a CUDA device");
    if (previous_ != device) check(cudaSetDevice(device), "cudaSetDevice", str_cat("selecting cuda:", device));
  }
  ~DeviceScope() {
    int now = previous_;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace cuda
}  // namespace ringtorch
