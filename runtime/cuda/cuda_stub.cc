// The build without the CUDA toolkit (RINGTORCH_CUDA=OFF or no toolkit found): runtime/cuda/blas.h
// answers that there is no device, and a StagedTransfer cannot be made (ProcessGroup makes one only
// for CUDA tensors, and only with RINGTORCH_WITH_CUDA; these definitions keep the calls linkable).
#include <ringtorch/error.h>

#include "runtime/cuda/blas.h"
#include "runtime/cuda/staged_transfer.h"

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

struct StagedTransfer::State {};

StagedTransfer::StagedTransfer(int, void*, std::vector<ByteRange>, void*, bool) {
  throw InvalidArgumentError("staging a CUDA tensor: ringtorch was built without CUDA; rebuild with RINGTORCH_CUDA=ON");
}
StagedTransfer::~StagedTransfer() = default;
size_t StagedTransfer::pieces() const { return 0; }
void* StagedTransfer::host() const { return nullptr; }
void StagedTransfer::wait_in(size_t, std::chrono::steady_clock::time_point) const {}
void StagedTransfer::copy_out(size_t, float) {}
void StagedTransfer::finish(std::chrono::steady_clock::time_point) {}

void* side_stream(int) {
  throw InvalidArgumentError("side_stream: ringtorch was built without CUDA; rebuild with RINGTORCH_CUDA=ON");
}

}  // namespace cuda
}  // namespace ringtorch
