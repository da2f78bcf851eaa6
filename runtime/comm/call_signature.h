// What every rank must agree on for one collective: the operation, the element count, the
// dtype, the root, the reduce op and (allgatherv) the per-rank counts. Compared across ranks
// before every collective (Gloo: call_fingerprint.h; shared memory: shm/local_collectives.h),
// and printed when they differ.
//
// Thread-safety: a value type.
#pragma once

#include <c10/core/ScalarType.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <ringtorch/reduce_op.h>

#include "runtime/comm/op_type.h"

namespace ringtorch {

struct CallSignature {
  OpType op = OpType::kBarrier;
  int64_t count = 0;  // elements (allgather: each rank's; reduce_scatter: each rank's output)
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  int root = -1;                     // op_has_root(op) only; else -1
  ReduceOp reduce = ReduceOp::kSum;  // op_reduces(op) only; else kSum
  int64_t layout = 0;                // allgatherv: layout_of(counts); else 0

  // "allreduce of 10 float32 sum", "broadcast of 4 float32 (root 0)", "barrier".
  std::string describe() const;

  // The fixed-width form ranks exchange (through Gloo or a shared-memory segment).
  static constexpr int kWords = 6;
  using Words = std::array<int64_t, kWords>;
  Words encode() const;
  static CallSignature decode(const int64_t* words);  // reads kWords words

  bool operator==(const CallSignature& other) const { return encode() == other.encode(); }
  bool operator!=(const CallSignature& other) const { return !(*this == other); }

  // A 63-bit digest of per-rank element counts (allgatherv), never 0.
  static int64_t layout_of(const std::vector<int64_t>& counts);
};

}  // namespace ringtorch
