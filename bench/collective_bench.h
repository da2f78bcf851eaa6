// The measurement behind apps/ringbench: an nccl-tests-style sweep of one collective over
// message sizes, timed on every rank, with an optional closed-form check of every element.
//
// Each benchmarked collective is one entry of a table (bench_collectives()), as nccl-tests has
// one file per collective: how its buffers are sized, how it runs, its bus-bandwidth factor,
// and what every element of its result must be. Adding a collective to ringbench is adding an
// entry.
//
// Bus bandwidth follows nccl-tests: algbw = bytes / time; busbw = algbw x factor, factor
// 2(n-1)/n for allreduce, (n-1)/n for allgather, reduce_scatter and alltoall, 1 for broadcast,
// so that busbw is comparable to the link speed whatever the world size. Bytes are per rank:
// the whole tensor for allreduce and broadcast, each rank's contribution for allgather, the
// whole input (size() blocks; rounded down to a multiple of size()) for reduce_scatter and alltoall.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include <ringtorch/process_group.h>

#include "runtime/comm/op_type.h"

namespace ringtorch {

// One collective as ringbench measures and checks it. Rank r's input is pattern(r): element i
// holds (r + i) % 3, small enough to stay exact in every dtype once summed over 64 ranks (uint8
// sums are compared modulo 256 on both sides).
struct BenchCollective {
  OpType op;
  double (*bus_factor)(int world_size);
  // The input is `count` elements cut into world-size blocks (count is rounded to a multiple).
  bool blocked_input;
  // Elements of the output buffer for an input of `count`; 0: the input is also the output.
  int64_t (*output_count)(int64_t count, int world_size);
  void (*run)(ProcessGroup& group, const at::Tensor& input, const at::Tensor& output);
  // What rank `rank` must hold in its output (or input, when in place) after run() on the
  // patterns, as int64 (compared after conversion to the benchmark's dtype).
  at::Tensor (*expected)(int rank, int world_size, int64_t count);
};

// The table, in the order ringbench --help lists it.
const std::vector<BenchCollective>& bench_collectives();
// The entry for `op`, or nullptr when ringbench does not measure it.
const BenchCollective* find_bench_collective(OpType op);

struct BenchOptions {
  OpType op = OpType::kAllreduce;
  int64_t min_bytes = 4;
  int64_t max_bytes = 64 << 20;
  int64_t factor = 2;
  int iters = 20;
  int warmup = 5;
  c10::ScalarType dtype = c10::ScalarType::Float;
  bool check = false;
  // "cpu", or "cuda" (cuda:LOCAL_RANK modulo the visible devices; CUDA tensors are staged
  // through pinned host memory: docs/process_group.md).
  std::string device = "cpu";
};

struct BenchRow {
  int64_t bytes = 0;  // per rank (allgather: each rank's contribution)
  int64_t count = 0;  // elements
  std::string type, op;
  double time_us = 0;    // mean per operation, the slowest rank's
  double median_us = 0;  // median per operation, the slowest rank's (JSON only)
  double algbw_gbs = 0, busbw_gbs = 0;
  int64_t wrong = -1;  // elements that differ from the closed form, summed over ranks; -1: not checked
};

// Throws InvalidArgumentError for an operation ringbench does not measure, an unknown dtype
// name, or inconsistent sizes.
void validate(const BenchOptions& options);
OpType parse_bench_op(const std::string& name);
c10::ScalarType parse_dtype(const std::string& name);
// "allreduce|broadcast|..." for usage texts.
std::string bench_op_names(const char* separator);

// Runs the sweep; every rank must call it with the same options. Rows are the same on every rank.
std::vector<BenchRow> run_collective_bench(ProcessGroup& group, const BenchOptions& options);

std::string format_header();
std::string format_row(const BenchRow& row);
std::string format_json(const BenchRow& row, int world_size);

}  // namespace ringtorch
