// The measurement behind apps/ringbench: an nccl-tests-style sweep of one collective over
// message sizes, timed on every rank, with an optional closed-form check of every element.
//
// Bus bandwidth follows nccl-tests: algbw = bytes / time; busbw = algbw x factor, factor
// 2(n-1)/n for allreduce, (n-1)/n for allgather, reduce_scatter and alltoall, 1 for broadcast,
// so that busbw is comparable to the link speed whatever the world size. Bytes are per rank:
// the whole tensor for allreduce and broadcast, each rank's contribution for allgather, the
// whole input (size() blocks; rounded down to a multiple of size()) for reduce_scatter and alltoall.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/comm/process_group.h"

namespace ringtorch {

struct BenchOptions {
  std::string op = "allreduce";  // allreduce | broadcast | allgather | reduce_scatter | alltoall
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

// Throws InvalidArgumentError for an unknown op or dtype name, or inconsistent sizes.
void validate(const BenchOptions& options);
c10::ScalarType parse_dtype(const std::string& name);
// A byte count with an optional K, M or G suffix (powers of 1024), at most 1 GiB before the
// suffix; throws InvalidArgumentError naming `flag` otherwise.
int64_t parse_byte_size(const std::string& text, const std::string& flag);

// Runs the sweep; every rank must call it with the same options. Rows are the same on every rank.
std::vector<BenchRow> run_collective_bench(ProcessGroup& group, const BenchOptions& options);

std::string format_header();
std::string format_row(const BenchRow& row);
std::string format_json(const BenchRow& row, int world_size);

}  // namespace ringtorch
