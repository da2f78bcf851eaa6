// Every operation a process group runs, and its name: the one table that the process group,
// the shared-memory path, the call signature (compared across ranks), messages and the
// benchmark all use (as c10d's OpType).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ringtorch {

enum class OpType : uint8_t {
  kAllreduce,
  kBroadcast,
  kAllgather,
  kAllgatherv,
  kBarrier,
  kReduce,
  kGather,
  kScatter,
  kReduceScatter,
  kAlltoall,
  kSend,
  kRecv,
};

constexpr int kOpTypeCount = static_cast<int>(OpType::kRecv) + 1;

// "allreduce", "reduce_scatter", ... (torch.distributed's function names).
const char* op_type_name(OpType op);
// The inverse of op_type_name; nullopt for any other text.
std::optional<OpType> op_type_from_name(const std::string& name);

// broadcast, reduce, gather and scatter name a root rank.
bool op_has_root(OpType op);
// allreduce, reduce and reduce_scatter combine values with a ReduceOp.
bool op_reduces(OpType op);

}  // namespace ringtorch
