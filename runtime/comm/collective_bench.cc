#include "runtime/comm/collective_bench.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "rendezvous/error.h"
#include "rendezvous/init_method.h"
#include "runtime/comm/tensor_checks.h"

namespace ringtorch {
namespace {

const std::vector<std::pair<std::string, c10::ScalarType>> kDtypeNames = {
    {"float32", c10::ScalarType::Float},     {"float64", c10::ScalarType::Double}, {"float16", c10::ScalarType::Half},
    {"bfloat16", c10::ScalarType::BFloat16}, {"int32", c10::ScalarType::Int},      {"int64", c10::ScalarType::Long},
    {"uint8", c10::ScalarType::Byte}};

double bus_factor(const std::string& op, int n) {
  if (op == "allreduce") return n > 1 ? 2.0 * (n - 1) / n : 0.0;
  if (op == "allgather" || op == "reduce_scatter" || op == "alltoall") {
    return n > 1 ? static_cast<double>(n - 1) / n : 0.0;
  }
  return 1.0;  // broadcast
}

// Closed-form data: rank r holds (r + i) % 3 at element i, small enough to be exact in every
// dtype once summed over up to 64 ranks... for uint8 the sum is taken modulo 256 on both sides.
at::Tensor pattern(int rank, int64_t count, c10::ScalarType dtype) {
  return at::arange(count, at::kLong).add(rank).remainder(3).to(dtype);
}

at::Device bench_device(const BenchOptions& o) {
  if (o.device == "cpu") return at::Device(at::kCPU);
  const char* local_rank = std::getenv("LOCAL_RANK");
  const int gpus = static_cast<int>(at::getNumGPUs());
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>((local_rank ? std::atoi(local_rank) : 0) % gpus));
}

int64_t count_wrong(const BenchOptions& o, ProcessGroup& g, int64_t count) {
  const int n = g.size(), r = g.rank();
  at::Tensor got, want;
  const at::Device device = bench_device(o);
  auto on_device = [&](const at::Tensor& t) { return t.to(device); };
  if (o.op == "allreduce") {
    got = on_device(pattern(r, count, o.dtype));
    g.allreduce(got);
    want = at::zeros({count}, at::kLong);
    for (int k = 0; k < n; ++k) want += pattern(k, count, at::kLong);
    want = want.to(o.dtype);
  } else if (o.op == "broadcast") {
    got = on_device(r == 0 ? pattern(0, count, o.dtype) : at::zeros({count}, o.dtype));
    g.broadcast(got, 0);
    want = pattern(0, count, o.dtype);
  } else if (o.op == "allgather") {
    got = on_device(at::empty({count * n}, o.dtype));
    g.allgather(on_device(pattern(r, count, o.dtype)), got);
    std::vector<at::Tensor> parts;
    for (int k = 0; k < n; ++k) parts.push_back(pattern(k, count, o.dtype));
    want = at::cat(parts);
  } else if (o.op == "reduce_scatter") {
    // `count` is the whole input; rank r keeps the sum of everyone's block r.
    const int64_t block = count / n;
    got = on_device(at::empty({block}, o.dtype));
    g.reduce_scatter(on_device(pattern(r, count, o.dtype)), got);
    want = at::zeros({block}, at::kLong);
    for (int k = 0; k < n; ++k) want += pattern(k, count, at::kLong).narrow(0, r * block, block);
    want = want.to(o.dtype);
  } else {
    // alltoall: block j of rank k's input lands in block k of rank j's output.
    const int64_t block = count / n;
    got = on_device(at::empty({count}, o.dtype));
    g.alltoall(on_device(pattern(r, count, o.dtype)), got);
    std::vector<at::Tensor> parts;
    for (int k = 0; k < n; ++k) parts.push_back(pattern(k, count, o.dtype).narrow(0, r * block, block));
    want = at::cat(parts);
  }
  at::Tensor wrong = got.cpu().ne(want).sum().to(at::kLong).reshape({1});
  g.allreduce(wrong);
  return wrong.item<int64_t>();
}

}  // namespace

int64_t parse_byte_size(const std::string& text, const std::string& flag) {
  if (text.empty()) throw InvalidArgumentError(flag + ": empty");
  int64_t scale = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'K':
    case 'k':
      scale = 1 << 10;
      digits.pop_back();
      break;
    case 'M':
    case 'm':
      scale = 1 << 20;
      digits.pop_back();
      break;
    case 'G':
    case 'g':
      scale = 1 << 30;
      digits.pop_back();
      break;
  }
  return static_cast<int64_t>(parse_int_in_range(digits, 0, 1 << 30, flag)) * scale;
}

c10::ScalarType parse_dtype(const std::string& name) {
  for (const auto& [n, type] : kDtypeNames) {
    if (n == name) return type;
  }
  throw InvalidArgumentError("--dtype " + name + ": use float32, float64, float16, bfloat16, int32, int64 or uint8");
}

void validate(const BenchOptions& o) {
  if (o.op != "allreduce" && o.op != "broadcast" && o.op != "allgather" && o.op != "reduce_scatter" &&
      o.op != "alltoall") {
    throw InvalidArgumentError("--op " + o.op +
                               ": ringbench measures allreduce, broadcast, allgather, reduce_scatter and alltoall");
  }
  if (o.min_bytes < 0 || o.max_bytes < o.min_bytes) {
    throw InvalidArgumentError(
        str_cat("--min-bytes ", o.min_bytes, " / --max-bytes ", o.max_bytes, ": need 0 <= min <= max"));
  }
  if (o.factor < 2) throw InvalidArgumentError(str_cat("--factor ", o.factor, " must be >= 2"));
  if (o.iters < 1 || o.warmup < 0) throw InvalidArgumentError("--iters must be >= 1 and --warmup >= 0");
  if (o.device != "cpu" && o.device != "cuda") throw InvalidArgumentError("--device " + o.device + ": use cpu or cuda");
  if (o.device == "cuda" && !at::hasCUDA()) {
    throw InvalidArgumentError("--device cuda: no CUDA device is visible (no GPU, or a LibTorch built without CUDA)");
  }
}

std::vector<BenchRow> run_collective_bench(ProcessGroup& g, const BenchOptions& o) {
  validate(o);
  const int64_t item = c10::elementSize(o.dtype);
  std::vector<BenchRow> rows;
  const bool blocked = o.op == "reduce_scatter" || o.op == "alltoall";  // input split in size() blocks
  for (int64_t bytes = std::max<int64_t>(o.min_bytes, item); bytes <= o.max_bytes; bytes *= o.factor) {
    int64_t count = bytes / item;
    if (blocked) count = std::max<int64_t>(count / g.size(), 1) * g.size();
    const auto options = at::TensorOptions().dtype(o.dtype).device(bench_device(o));
    at::Tensor input = at::ones({count}, options);
    at::Tensor output = input;
    if (o.op == "allgather") output = at::empty({count * g.size()}, options);
    if (o.op == "reduce_scatter") output = at::empty({count / g.size()}, options);
    if (o.op == "alltoall") output = at::empty({count}, options);
    // One timed operation; all-reduce inputs are reset afterwards (untimed) so values stay bounded.
    auto timed_once = [&] {
      const auto start = std::chrono::steady_clock::now();
      if (o.op == "allreduce") {
        g.allreduce(input);
      } else if (o.op == "broadcast") {
        g.broadcast(input, 0);
      } else if (o.op == "allgather") {
        g.allgather(input, output);
      } else if (o.op == "reduce_scatter") {
        g.reduce_scatter(input, output);
      } else {
        g.alltoall(input, output);
      }
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      if (o.op == "allreduce") input.fill_(1);
      return us;
    };
    for (int i = 0; i < o.warmup; ++i) timed_once();
    g.barrier();
    std::vector<double> times(o.iters);
    for (double& us : times) us = timed_once();
    double total_us = 0;
    for (double us : times) total_us += us;
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    // The slowest rank's mean (nccl-tests) and median (robust to scheduler hiccups) are the collective's.
    at::Tensor t = at::tensor({total_us / o.iters, times[times.size() / 2]}, at::kDouble);
    g.allreduce(t, ReduceOp::kMax);
    BenchRow row;
    row.bytes = count * item;
    row.count = count;
    row.type = dtype_name(o.dtype);
    row.op = o.op;
    row.time_us = t[0].item<double>();
    row.median_us = t[1].item<double>();
    row.algbw_gbs = row.bytes / (row.time_us * 1e3);
    row.busbw_gbs = row.algbw_gbs * bus_factor(o.op, g.size());
    row.wrong = o.check ? count_wrong(o, g, count) : -1;
    rows.push_back(row);
    if (bytes > o.max_bytes / o.factor) break;
  }
  return rows;
}

std::string format_header() {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%12s %12s %9s %10s %12s %8s %8s %8s\n", "size(B)", "count", "type", "op", "time(us)",
                "algbw", "busbw", "#wrong");
  return std::string(buf) + std::string(86, '-') + "\n";
}

std::string format_row(const BenchRow& r) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%12lld %12lld %9s %10s %12.1f %8.3f %8.3f %8s\n", static_cast<long long>(r.bytes),
                static_cast<long long>(r.count), r.type.c_str(), r.op.c_str(), r.time_us, r.algbw_gbs, r.busbw_gbs,
                r.wrong < 0 ? "N/A" : std::to_string(r.wrong).c_str());
  return buf;
}

std::string format_json(const BenchRow& r, int world_size) {
  nlohmann::json j = {{"impl", "ringtorch"},      {"op", r.op},
                      {"type", r.type},           {"bytes", r.bytes},
                      {"count", r.count},         {"world_size", world_size},
                      {"time_us", r.time_us},     {"median_us", r.median_us},
                      {"algbw_gbs", r.algbw_gbs}, {"busbw_gbs", r.busbw_gbs}};
  if (r.wrong >= 0) j["wrong"] = r.wrong;
  return j.dump() + "\n";
}

}  // namespace ringtorch
