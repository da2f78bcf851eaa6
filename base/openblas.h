// OpenBLAS, the BLAS under Debian's LibTorch, seen from the running process: its thread pool,
// and which of its kernels it runs.
//
// Kernels: OpenBLAS (Debian's is built DYNAMIC_ARCH) picks a kernel set by the CPU's family and
// model when it loads. The OpenBLAS 0.3.21 of Debian 12 gives an Intel model its detection does
// not know its oldest set, "Prescott" (SSE3): Intel's family 6 model 207 (a cloud VM's "Intel
// Xeon Processor" with AVX-512), for one, where dense layers then run about 3x slower than with
// OPENBLAS_CORETYPE=SkylakeX (docs/training.md, "OpenBLAS's kernels", has the figures).
// The choice is made at load time, before main(), so a process cannot change its own: a
// launcher sets OPENBLAS_CORETYPE to its own openblas_kernels().better for the workers it
// starts on its machine (ringrun and spawn() do), and a program started otherwise can say so
// (openblas_kernels_advice()).
//
// Example:
//   const std::string advice = ringtorch::openblas_kernels_advice();
//   if (!advice.empty()) std::fprintf(stderr, "%s\n", advice.c_str());  // before training
//
// Thread-safety: every function may be called from any thread while none calls setenv() (they
// read OPENBLAS_CORETYPE); set_blas_threads() not while a product runs (OpenBLAS resizes its
// pool).
#pragma once

#include <string>

namespace ringtorch {

// Sets OpenBLAS's thread count when OpenBLAS is the loaded BLAS (found at run time: the
// reference BLAS and others have no threads to set). Returns whether it did. torch's
// set_num_threads does not reach OpenBLAS's own pool, which is sized at load time from
// OMP_NUM_THREADS / OPENBLAS_NUM_THREADS or the core count (docs/training.md, "ringtrain").
bool set_blas_threads(int threads);

// The vector units OpenBLAS's kernel sets need, as this CPU (and its OS) offers them.
struct CpuVectorUnits {
  bool avx2_fma = false;  // AVX2 and FMA: OpenBLAS's "Haswell" kernels
  bool avx512 = false;    // AVX-512 F, CD, BW, DQ and VL: its "SkylakeX" kernels
};
CpuVectorUnits this_cpu_vector_units();

// The kernel set to ask OpenBLAS for (an OPENBLAS_CORETYPE value) when it loaded `loaded` (its
// openblas_get_corename()) on a CPU with `units`: "SkylakeX" or "Haswell" when `loaded` is a set
// older than AVX2 (Prescott, Nehalem, Sandybridge, ...) and the CPU has better; else empty (its
// own choice stands, as it does for every AVX2 set it picked itself).
std::string better_openblas_core(const std::string& loaded, CpuVectorUnits units);

// The kernels this process runs (openblas_get_corename(); empty when the loaded BLAS is not
// OpenBLAS) and what it should run instead (better_openblas_core(); empty when it is fine or
// when OPENBLAS_CORETYPE was set, which is the user's choice). Probed on each call.
struct OpenBlasKernels {
  std::string loaded;
  std::string better;
};
OpenBlasKernels openblas_kernels();

// One line for a program that runs slow kernels because it was started without
// OPENBLAS_CORETYPE (naming the kernels, the CPU's units and the setting); empty when it is fine.
std::string openblas_kernels_advice();

}  // namespace ringtorch
