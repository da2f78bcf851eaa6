// Element-wise reduction functions in Gloo's signature (out, a, b, n), for every dtype the
// process group carries. Half and BFloat16 reduce through float (c10's conversions), as
// PyTorch's Gloo backend does. AVG is SUM followed by a division on the caller's side.
#pragma once

#include <c10/core/ScalarType.h>

#include <functional>

#include <ringtorch/reduce_op.h>

namespace ringtorch {

using ReduceFunction = std::function<void(void*, const void*, const void*, size_t)>;

// Throws InvalidArgumentError for a dtype the process group does not carry.
ReduceFunction reduce_function(ReduceOp op, c10::ScalarType dtype);

}  // namespace ringtorch
