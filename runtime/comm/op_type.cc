#include "runtime/comm/op_type.h"

namespace ringtorch {

const char* op_type_name(OpType op) {
  switch (op) {
    case OpType::kAllreduce:
      return "allreduce";
    case OpType::kBroadcast:
      return "broadcast";
    case OpType::kAllgather:
      return "allgather";
    case OpType::kAllgatherv:
      return "allgatherv";
    case OpType::kBarrier:
      return "barrier";
    case OpType::kReduce:
      return "reduce";
    case OpType::kGather:
      return "gather";
    case OpType::kScatter:
      return "scatter";
    case OpType::kReduceScatter:
      return "reduce_scatter";
    case OpType::kAlltoall:
      return "alltoall";
    case OpType::kSend:
      return "send";
    case OpType::kRecv:
      return "recv";
  }
  return "?";
}

std::optional<OpType> op_type_from_name(const std::string& name) {
  for (int i = 0; i < kOpTypeCount; ++i) {
    const auto op = static_cast<OpType>(i);
    if (name == op_type_name(op)) return op;
  }
  return std::nullopt;
}

bool op_has_root(OpType op) {
  return op == OpType::kBroadcast || op == OpType::kReduce || op == OpType::kGather || op == OpType::kScatter;
}

bool op_reduces(OpType op) { return op == OpType::kAllreduce || op == OpType::kReduce || op == OpType::kReduceScatter; }

}  // namespace ringtorch
