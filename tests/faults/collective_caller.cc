// collective_caller: one collective per rank, each rank's call given on the command line, so that
// the fault matrix (fault_matrix.sh) can make ranks disagree across real processes.
//
//   ringrun --standalone --nproc_per_node 2 --use_env collective_caller allreduce:float32:4 allreduce:float64:4
//
// Rank r makes call r (the last one when there are fewer calls than ranks): OP:DTYPE:COUNT with
// OP allreduce|broadcast|allgather|barrier|send|recv (broadcast's root is 0; send goes to the
// next rank, recv takes from the previous one) and DTYPE float32|float64|
// int32|uint8|int64. Prints "rank R: <op> done" and exits 0, or the error and exits 1.
#include <ATen/ATen.h>

#include <cstdio>
#include <string>
#include <vector>

#include <ringtorch/error.h>
#include <ringtorch/process_group.h>
#include <ringtorch/rendezvous.h>

#include "apps/main_guard.h"
#include "base/parse.h"

namespace {

struct Call {
  std::string op;
  at::ScalarType dtype = at::kFloat;
  int64_t count = 1;
};

Call parse_call(const std::string& text) {
  const size_t a = text.find(':'), b = text.find(':', a == std::string::npos ? a : a + 1);
  if (a == std::string::npos || b == std::string::npos) {
    throw ringtorch::InvalidArgumentError("call '" + text + "': use OP:DTYPE:COUNT, e.g. allreduce:float32:4");
  }
  Call call;
  call.op = text.substr(0, a);
  const std::string dtype = text.substr(a + 1, b - a - 1);
  if (dtype == "float32") {
    call.dtype = at::kFloat;
  } else if (dtype == "float64") {
    call.dtype = at::kDouble;
  } else if (dtype == "int32") {
    call.dtype = at::kInt;
  } else if (dtype == "uint8") {
    call.dtype = at::kByte;
  } else if (dtype == "int64") {
    call.dtype = at::kLong;
  } else {
    throw ringtorch::InvalidArgumentError("call '" + text + "': dtype " + dtype +
                                          " is not one of float32|float64|int32|uint8|int64");
  }
  call.count = ringtorch::parse_int_in_range(text.substr(b + 1), 0, 1 << 26, "call count");
  return call;
}

int run(int argc, char** argv) {
  std::vector<std::string> calls;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--local_rank", 0) == 0) continue;  // ringrun without --use_env
    calls.push_back(arg);
  }
  if (calls.empty())
    throw ringtorch::InvalidArgumentError("usage: collective_caller OP:DTYPE:COUNT [OP:DTYPE:COUNT ...]");
  auto rdzv = ringtorch::rendezvous();
  auto group = ringtorch::ProcessGroup::create(rdzv);
  const int rank = group->rank();
  const Call call = parse_call(calls[std::min<size_t>(rank, calls.size() - 1)]);
  at::Tensor tensor = at::ones({call.count}, at::TensorOptions().dtype(call.dtype));
  if (call.op == "allreduce") {
    group->allreduce_async(tensor)->wait();
  } else if (call.op == "broadcast") {
    group->broadcast_async(tensor, 0)->wait();
  } else if (call.op == "allgather") {
    at::Tensor output = at::empty({call.count * group->size()}, tensor.options());
    group->allgather_async(tensor, output)->wait();
  } else if (call.op == "barrier") {
    group->barrier_async()->wait();
  } else if (call.op == "send") {  // to the next rank
    group->send_async(tensor, (rank + 1) % group->size())->wait();
  } else if (call.op == "recv") {  // from the previous rank
    group->recv_async(tensor, (rank + group->size() - 1) % group->size())->wait();
  } else {
    throw ringtorch::InvalidArgumentError("op " + call.op +
                                          " is not one of allreduce|broadcast|allgather|barrier|send|recv");
  }
  std::printf("rank %d: %s done\n", rank, call.op.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ringtorch::run_reporting_errors("collective_caller", [&] { return run(argc, argv); });
}
