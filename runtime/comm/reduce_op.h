// Reduction operations, as torch.distributed.ReduceOp.
#pragma once

namespace ringtorch {

enum class ReduceOp { kSum, kAvg, kMin, kMax, kProduct };

const char* reduce_op_name(ReduceOp op);

}  // namespace ringtorch
