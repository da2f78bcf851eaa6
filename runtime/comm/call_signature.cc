#include "runtime/comm/call_signature.h"

#include <ringtorch/str_cat.h>

#include "runtime/comm/tensor_checks.h"

namespace ringtorch {

std::string CallSignature::describe() const {
  // A code from another rank may be out of range: say so instead of indexing past the table.
  const bool known = static_cast<int>(op) < kOpTypeCount;
  std::string text = known ? op_type_name(op) : str_cat("operation #", static_cast<int>(op));
  if (known && op == OpType::kBarrier) return text;
  text += str_cat(" of ", count, " ", dtype_name(dtype));
  if (root >= 0) text += str_cat(" (root ", root, ")");
  if (known && op_reduces(op)) text += str_cat(" ", reduce_op_name(reduce));
  if (layout != 0) text += str_cat(" (per-rank counts #", layout % 1000000, ")");
  return text;
}

CallSignature::Words CallSignature::encode() const {
  return {static_cast<int64_t>(op), count, static_cast<int64_t>(dtype), root, static_cast<int64_t>(reduce), layout};
}

CallSignature CallSignature::decode(const int64_t* words) {
  CallSignature call;
  call.op = static_cast<OpType>(words[0]);
  call.count = words[1];
  call.dtype = static_cast<c10::ScalarType>(words[2]);
  call.root = static_cast<int>(words[3]);
  call.reduce = static_cast<ReduceOp>(words[4]);
  call.layout = words[5];
  return call;
}

int64_t CallSignature::layout_of(const std::vector<int64_t>& counts) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a over the counts' bytes
  for (int64_t count : counts) {
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= (static_cast<uint64_t>(count) >> (8 * byte)) & 0xFF;
      hash *= 1099511628211ull;
    }
  }
  return static_cast<int64_t>(hash >> 1) | 1;
}

}  // namespace ringtorch
