// BLAS threads follow --threads. torch::set_num_threads sets LibTorch's own (OpenMP) threads, but
// the OpenBLAS that Debian's LibTorch calls for its matrix products keeps a thread pool of its
// own, sized at load time from OMP_NUM_THREADS / OPENBLAS_NUM_THREADS or the core count. A
// `--threads 1` run without those variables (ringrun sets OMP_NUM_THREADS=1 only when it starts
// several workers per node) then multiplied matrices on every core, so a `--threads 1` rank was
// not one thread (docs/training.md, "ringtrain").
//
// Example:
//   ringtorch::set_blas_threads(1);
//
// Thread-safety: call before training (OpenBLAS resizes its pool; not while a product runs).
#pragma once

namespace ringtorch {

// Sets OpenBLAS's thread count when OpenBLAS is the loaded BLAS (found at run time: the
// reference BLAS and others have no threads to set). Returns whether it did.
bool set_blas_threads(int threads);

}  // namespace ringtorch
