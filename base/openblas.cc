#include "base/openblas.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>

#include <ringtorch/str_cat.h>

namespace ringtorch {
namespace {

// OpenBLAS's kernel sets for x86 CPUs without AVX2 (its corename[] names, as a DYNAMIC_ARCH build
// reports them; a build for one CPU says "PRESCOTT" and ignores OPENBLAS_CORETYPE, so the
// match is exact). An AVX2 set, or a name not listed (a newer OpenBLAS's), is never replaced.
constexpr const char* kOlderThanAvx2[] = {
    "Unknown",   "Katmai", "Coppermine",  "Northwood", "Prescott",  "Banias",     "Atom",
    "Core2",     "Penryn", "Dunnington",  "Nehalem",   "Athlon",    "Opteron",    "Opteron_SSE3",
    "Barcelona", "Nano",   "Sandybridge", "Bobcat",    "Bulldozer", "Piledriver", "Steamroller",
};

// Looked up rather than linked: which BLAS libblas.so.3 is (OpenBLAS, the reference BLAS, BLIS)
// is the machine's choice (update-alternatives), not ours.
template <typename Function>
Function openblas_function(const char* name) {
  return reinterpret_cast<Function>(::dlsym(RTLD_DEFAULT, name));
}

}  // namespace

bool set_blas_threads(int threads) {
  auto set = openblas_function<void (*)(int)>("openblas_set_num_threads");
  if (set == nullptr || threads < 1) return false;
  set(threads);
  return true;
}

CpuVectorUnits this_cpu_vector_units() {
  CpuVectorUnits units;
#if defined(__x86_64__) || defined(__i386__)
  // libgcc's checks include the OS's (XGETBV): a unit whose registers the kernel does not save
  // counts as absent.
  __builtin_cpu_init();
  units.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  units.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512vl");
#endif
  return units;
}

std::string better_openblas_core(const std::string& loaded, CpuVectorUnits units) {
  const bool older =
      std::find(std::begin(kOlderThanAvx2), std::end(kOlderThanAvx2), loaded) != std::end(kOlderThanAvx2);
  if (!older) return "";
  if (units.avx512) return "SkylakeX";
  if (units.avx2_fma) return "Haswell";
  return "";
}

OpenBlasKernels openblas_kernels() {
  OpenBlasKernels kernels;
  auto corename = openblas_function<char* (*)()>("openblas_get_corename");
  if (corename == nullptr || corename() == nullptr) return kernels;
  kernels.loaded = corename();
  // Set at all, even empty, OPENBLAS_CORETYPE is what OpenBLAS loaded by (a name it does not know
  // gets a set by the CPU's units, not the model's fallback).
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    kernels.better = better_openblas_core(kernels.loaded, this_cpu_vector_units());
  }
  return kernels;
}

std::string openblas_kernels_advice() {
  const OpenBlasKernels kernels = openblas_kernels();
  if (kernels.better.empty()) return "";
  return str_cat("OpenBLAS runs its ", kernels.loaded, " kernels, but this CPU has ",
                 kernels.better == "SkylakeX" ? "AVX-512" : "AVX2", " (a model this OpenBLAS does not know): ",
                 "matrix products run several times slower than with OPENBLAS_CORETYPE=", kernels.better,
                 "; set it before the program starts (ringrun and spawn() set it for their workers)");
}

}  // namespace ringtorch
