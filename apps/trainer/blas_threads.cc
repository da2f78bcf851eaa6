#include "apps/trainer/blas_threads.h"

#include <dlfcn.h>

namespace ringtorch {

bool set_blas_threads(int threads) {
  // Looked up rather than linked: which BLAS libblas.so.3 is (OpenBLAS, the reference BLAS,
  // BLIS) is the machine's choice (update-alternatives), not ours.
  using SetThreads = void (*)(int);
  auto set = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set == nullptr || threads < 1) return false;
  set(threads);
  return true;
}

}  // namespace ringtorch
