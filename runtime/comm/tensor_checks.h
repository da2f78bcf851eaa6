// Helpers shared by the process group's operation files (internal to runtime/comm).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include <ringtorch/error.h>

#include "runtime/comm/op_type.h"

namespace ringtorch {

// "4.0 MiB"
std::string human_bytes(int64_t bytes);
// "float32", "bfloat16", ...
std::string dtype_name(c10::ScalarType type);
std::string dtype_name(const at::Tensor& t);
// "<size> <dtype>" for Work descriptions.
std::string tensor_summary(const at::Tensor& t);

// Refuses undefined tensors, devices other than CPU and CUDA, non-contiguous tensors and dtypes
// the group does not carry, with messages that start with `who` and name the operation and the
// tensor's role.
void check_tensor(const std::string& who, OpType op, const char* role, const at::Tensor& t);
// Both tensors share a dtype, and `big` holds `factor` x small.numel() elements.
void check_blocks(const std::string& who, OpType op, const at::Tensor& small, const char* small_role,
                  const at::Tensor& big, const char* big_role, int64_t factor);

// Gloo only needs the element size: calls fn(T{}) with an unsigned type of the tensor's element
// width; reduction functions interpret the bytes as the real dtype.
template <typename Fn>
void with_element_type(size_t itemsize, Fn&& fn) {
  switch (itemsize) {
    case 1:
      fn(uint8_t{});
      return;
    case 2:
      fn(uint16_t{});
      return;
    case 4:
      fn(uint32_t{});
      return;
    case 8:
      fn(uint64_t{});
      return;
  }
  throw InvalidArgumentError(str_cat("element size ", itemsize, " is not carried"));
}

template <typename T>
T* data_as(const at::Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

}  // namespace ringtorch
