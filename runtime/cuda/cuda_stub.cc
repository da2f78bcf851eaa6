// The build without the CUDA toolkit (RINGTORCH_CUDA=OFF or no toolkit found): runtime/cuda/blas.h
// answers that there is no device. pinned_pool.h and staged_transfer.h are not built; their users
// are compiled only with RINGTORCH_WITH_CUDA.
#include "runtime/cuda/blas.h"

#include "rendezvous/error.h"

namespace ringtorch {
namespace cuda {

bool device_available(std::string* why) {
  if (why) *why = "ringtorch was built without CUDA (RINGTORCH_CUDA=OFF or no toolkit found)";
  return false;
}

void scale_in_place(float*, int64_t, float, void*) {
  throw InvalidArgumentError("cuda::scale_in_place: ringtorch was built without CUDA; rebuild with RINGTORCH_CUDA=ON");
}

void add_scaled(float*, const float*, int64_t, float, void*) {
  throw InvalidArgumentError("cuda::add_scaled: ringtorch was built without CUDA; rebuild with RINGTORCH_CUDA=ON");
}

}  // namespace cuda
}  // namespace ringtorch
