// Where LibTorch's CUDA tensors meet runtime/cuda: a CUDA tensor's pieces staged through pinned
// host memory on ringtorch's side stream, ordered after the caller's current stream (LibTorch's
// per-thread, per-device "current stream", which is what kernels launched by the caller use).
//
// Built only with the CUDA toolkit (RINGTORCH_WITH_CUDA). The current stream comes from
// c10::cuda, which exists only in a LibTorch built with CUDA (RINGTORCH_TORCH_CUDA); against a
// CPU-only LibTorch there are no CUDA tensors, and asking throws.
//
// Thread-safety: call on the thread whose current stream orders the data (the submitter).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "runtime/comm/piece_plan.h"
#include "runtime/cuda/staged_transfer.h"

namespace ringtorch {

// LibTorch's current stream for `device` on this thread (a cudaStream_t).
void* current_cuda_stream(const at::Device& device);

// Starts `tensor`'s trip through host memory in `pieces` (element ranges), copying it in when
// `copy_in`. `tensor` must be a contiguous CUDA tensor.
std::unique_ptr<cuda::StagedTransfer> stage_cuda_tensor(const at::Tensor& tensor, const std::vector<PieceSpan>& pieces,
                                                        bool copy_in);

// A CPU tensor of `like`'s shape and dtype over the transfer's host buffer (no copy; valid while
// the transfer lives).
at::Tensor host_view(const cuda::StagedTransfer& transfer, const at::Tensor& like);

}  // namespace ringtorch
