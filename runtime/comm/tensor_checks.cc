#include "runtime/comm/tensor_checks.h"

#include <cmath>

#include <ringtorch/str_cat.h>

#include "runtime/comm/reduce_kernels.h"

namespace ringtorch {

std::string human_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return str_cat(bytes, " B");
  // One decimal, as printf's "%.1f" gives it (without printf's cost on every call's description):
  // below 2^50 bytes (1 PiB) v * 10 is exact enough that rounding to nearest, ties to even,
  // lands where printf's does; above, the last digit may differ by one.
  const auto tenths = static_cast<int64_t>(std::nearbyint(v * 10));
  return str_cat(tenths / 10, ".", tenths % 10, " ", units[u]);
}

std::string dtype_name(const at::Tensor& t) { return dtype_name(t.scalar_type()); }

std::string dtype_name(c10::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return "float32";
    case at::kDouble:
      return "float64";
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    case at::kInt:
      return "int32";
    case at::kLong:
      return "int64";
    case at::kByte:
      return "uint8";
    case at::kChar:
      return "int8";
    case at::kShort:
      return "int16";
    case at::kBool:
      return "bool";
    default:
      return c10::toString(type);
  }
}

std::string tensor_summary(const at::Tensor& t) { return human_bytes(t.nbytes()) + " " + dtype_name(t); }

void check_tensor(const std::string& who, OpType op, const char* role, const at::Tensor& t) {
  const std::string what = *role ? std::string(" ") + role : std::string();
  if (!t.defined()) throw InvalidArgumentError(str_cat(who, op_type_name(op), ": the", what, " tensor is undefined"));
  if (!t.device().is_cpu() && !t.device().is_cuda()) {
    throw InvalidArgumentError(str_cat(who, op_type_name(op), ": the", what, " tensor is on ", t.device().str(),
                                       "; the process group carries CPU and CUDA tensors"));
  }
  if (!t.is_contiguous()) {
    throw InvalidArgumentError(
        str_cat(who, op_type_name(op), ": the", what, " tensor is not contiguous; call .contiguous() first"));
  }
  reduce_function(ReduceOp::kSum, t.scalar_type());  // throws for a dtype that is not carried
}

void check_blocks(const std::string& who, OpType op, const at::Tensor& small, const char* small_role,
                  const at::Tensor& big, const char* big_role, int64_t factor) {
  if (small.scalar_type() != big.scalar_type()) {
    throw InvalidArgumentError(str_cat(who, op_type_name(op), ": ", small_role, " is ", dtype_name(small), " but ",
                                       big_role, " is ", dtype_name(big)));
  }
  if (big.numel() != small.numel() * factor) {
    throw InvalidArgumentError(str_cat(who, op_type_name(op), ": ", big_role, " has ", big.numel(),
                                       " elements; expected world size x ", small_role, " = ", factor, " x ",
                                       small.numel(), " = ", small.numel() * factor));
  }
}

}  // namespace ringtorch
