// cuBLAS helpers for the CUDA path (ARCHITECTURE decision 4): averaging an all-reduced buffer in
// place (scal) and summing the gradients of several local GPUs onto one (axpy, DataParallel).
// Plain pointers and an opaque stream, so that this header compiles without the CUDA toolkit;
// the implementation is built only with RINGTORCH_CUDA (see CMakeLists.txt).
//
// Thread-safety: each call uses a cuBLAS handle owned by the calling thread, one per device.
#pragma once

#include <cstdint>
#include <string>

namespace ringtorch {
namespace cuda {

// True when this build has the CUDA parts and a usable device is present. `why` (optional)
// receives the reason when it is false ("built without CUDA", "no CUDA driver", ...).
bool device_available(std::string* why = nullptr);

// data[i] *= alpha for i in [0, count), on `stream` (a cudaStream_t; nullptr: the default
// stream). `data` is device memory. Throws IoError with the cuBLAS status on failure.
void scale_in_place(float* data, int64_t count, float alpha, void* stream);

// y[i] += alpha * x[i] for i in [0, count), on `stream`, with y's device made current; x must be
// memory that device can read (its own, or a peer's with peer access enabled; else copy it first).
void add_scaled(float* y, const float* x, int64_t count, float alpha, void* stream);

}  // namespace cuda
}  // namespace ringtorch
