#include "runtime/comm/cuda_tensor_staging.h"

#include <ATen/ATen.h>

#ifdef RINGTORCH_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <ringtorch/error.h>

namespace ringtorch {

void* current_cuda_stream(const at::Device& device) {
#ifdef RINGTORCH_TORCH_CUDA
  return c10::cuda::getCurrentCUDAStream(device.index()).stream();
#else
  throw InvalidArgumentError(
      str_cat("a tensor on ", device.str(), " reached ringtorch, which was built against a LibTorch without CUDA"));
#endif
}

std::unique_ptr<cuda::StagedTransfer> stage_cuda_tensor(const at::Tensor& tensor, const std::vector<PieceSpan>& pieces,
                                                        bool copy_in) {
  std::vector<cuda::ByteRange> ranges;
  ranges.reserve(pieces.size());
  const size_t element_size = tensor.element_size();
  for (const PieceSpan& piece : pieces) ranges.push_back({piece.first * element_size, piece.count * element_size});
  return std::make_unique<cuda::StagedTransfer>(tensor.device().index(), tensor.data_ptr(), std::move(ranges),
                                                current_cuda_stream(tensor.device()), copy_in);
}

at::Tensor host_view(const cuda::StagedTransfer& transfer, const at::Tensor& like) {
  return at::from_blob(transfer.host(), like.sizes(), like.options().device(at::kCPU));
}

}  // namespace ringtorch
