// The CPU-only build of runtime/cuda/blas.h (RINGTORCH_CUDA=OFF or no toolkit).
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

}  // namespace cuda
}  // namespace ringtorch
