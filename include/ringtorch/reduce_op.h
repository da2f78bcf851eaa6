// Reduction operations, as torch.distributed.ReduceOp. kMin and kMax give NaN wherever any rank
// holds one (as at::minimum / at::maximum), whatever the ranks' order.
#pragma once

namespace ringtorch {

enum class ReduceOp { kSum, kAvg, kMin, kMax, kProduct };

const char* reduce_op_name(ReduceOp op);

}  // namespace ringtorch
