#include "bench/collective_bench.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include <ringtorch/error.h>

#include "runtime/comm/tensor_checks.h"

namespace ringtorch {
namespace {

const std::vector<std::pair<std::string, c10::ScalarType>> kDtypeNames = {
    {"float32", c10::ScalarType::Float},     {"float64", c10::ScalarType::Double}, {"float16", c10::ScalarType::Half},
    {"bfloat16", c10::ScalarType::BFloat16}, {"int32", c10::ScalarType::Int},      {"int64", c10::ScalarType::Long},
    {"uint8", c10::ScalarType::Byte}};

// Rank r's input: element i holds (r + i) % 3 (see BenchCollective).
at::Tensor pattern(int rank, int64_t count) { return at::arange(count, at::kLong).add(rank).remainder(3); }

at::Tensor sum_of_patterns(int world_size, int64_t count) {
  at::Tensor sum = at::zeros({count}, at::kLong);
  for (int k = 0; k < world_size; ++k) sum += pattern(k, count);
  return sum;
}

double ring_factor(int n) { return n > 1 ? 2.0 * (n - 1) / n : 0.0; }
double gather_factor(int n) { return n > 1 ? static_cast<double>(n - 1) / n : 0.0; }
double one(int) { return 1.0; }

const std::vector<BenchCollective> kCollectives = {
    {OpType::kAllreduce, ring_factor, false, [](int64_t, int) -> int64_t { return 0; },
     [](ProcessGroup& g, const at::Tensor& in, const at::Tensor&) { g.allreduce(in); },
     [](int, int n, int64_t count) { return sum_of_patterns(n, count); }},
    {OpType::kBroadcast, one, false, [](int64_t, int) -> int64_t { return 0; },
     [](ProcessGroup& g, const at::Tensor& in, const at::Tensor&) { g.broadcast(in, 0); },
     [](int, int, int64_t count) { return pattern(0, count); }},
    {OpType::kAllgather, gather_factor, false, [](int64_t count, int n) { return count * n; },
     [](ProcessGroup& g, const at::Tensor& in, const at::Tensor& out) { g.allgather(in, out); },
     [](int, int n, int64_t count) {
       std::vector<at::Tensor> parts;
       for (int k = 0; k < n; ++k) parts.push_back(pattern(k, count));
       return at::cat(parts);
     }},
    {OpType::kReduceScatter, gather_factor, true, [](int64_t count, int n) { return count / n; },
     [](ProcessGroup& g, const at::Tensor& in, const at::Tensor& out) { g.reduce_scatter(in, out); },
     [](int r, int n, int64_t count) {
       const int64_t block = count / n;  // rank r keeps the sum of everyone's block r
       return sum_of_patterns(n, count).narrow(0, r * block, block).clone();
     }},
    {OpType::kAlltoall, gather_factor, true, [](int64_t count, int) { return count; },
     [](ProcessGroup& g, const at::Tensor& in, const at::Tensor& out) { g.alltoall(in, out); },
     [](int r, int n, int64_t count) {
       // Block j of rank k's input lands in block k of rank j's output.
       const int64_t block = count / n;
       std::vector<at::Tensor> parts;
       for (int k = 0; k < n; ++k) parts.push_back(pattern(k, count).narrow(0, r * block, block));
       return at::cat(parts);
     }},
    // Pairs of ranks (0-1, 2-3, ...) exchange their inputs with send and recv at once; a rank
    // without a partner (the last of an odd world) keeps its own.
    {OpType::kSend, one, false, [](int64_t count, int) { return count; },
     [](ProcessGroup& g, const at::Tensor& in, const at::Tensor& out) {
       const int partner = g.rank() ^ 1;
       if (partner >= g.size()) {
         out.copy_(in);
         return;
       }
       auto sent = g.send_async(in, partner);
       auto received = g.recv_async(out, partner);
       sent->wait();
       received->wait();
     },
     [](int r, int n, int64_t count) { return pattern((r ^ 1) < n ? r ^ 1 : r, count); }},
};

at::Device bench_device(const BenchOptions& o) {
  if (o.device == "cpu") return at::Device(at::kCPU);
  const char* local_rank = std::getenv("LOCAL_RANK");
  const int gpus = static_cast<int>(at::getNumGPUs());
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>((local_rank ? std::atoi(local_rank) : 0) % gpus));
}

// The output buffer for `input`, or `input` itself for in-place collectives.
at::Tensor output_for(const BenchCollective& c, const at::Tensor& input, int world_size) {
  const int64_t elements = c.output_count(input.numel(), world_size);
  return elements == 0 ? input : at::empty({elements}, input.options());
}

int64_t count_wrong(const BenchCollective& c, const BenchOptions& o, ProcessGroup& g, int64_t count) {
  const int n = g.size(), r = g.rank();
  // Non-root broadcast ranks start from zeros, so that a broadcast that moved nothing shows.
  at::Tensor input = (c.op == OpType::kBroadcast && r != 0 ? at::zeros({count}, at::kLong) : pattern(r, count))
                         .to(o.dtype)
                         .to(bench_device(o));
  at::Tensor output = output_for(c, input, n);
  c.run(g, input, output);
  const at::Tensor want = c.expected(r, n, count).to(o.dtype);
  at::Tensor wrong = output.cpu().ne(want).sum().to(at::kLong).reshape({1});
  g.allreduce(wrong);
  return wrong.item<int64_t>();
}

}  // namespace

const std::vector<BenchCollective>& bench_collectives() { return kCollectives; }

const BenchCollective* find_bench_collective(OpType op) {
  for (const auto& c : kCollectives) {
    if (c.op == op) return &c;
  }
  return nullptr;
}

std::string bench_op_names(const char* separator) {
  std::string names;
  for (const auto& c : kCollectives) names += (names.empty() ? "" : separator) + std::string(op_type_name(c.op));
  return names;
}

OpType parse_bench_op(const std::string& name) {
  const std::optional<OpType> op = op_type_from_name(name);
  if (!op || !find_bench_collective(*op)) {
    throw InvalidArgumentError("--op " + name + ": ringbench measures " + bench_op_names(", "));
  }
  return *op;
}

c10::ScalarType parse_dtype(const std::string& name) {
  for (const auto& [n, type] : kDtypeNames) {
    if (n == name) return type;
  }
  throw InvalidArgumentError("--dtype " + name + ": use float32, float64, float16, bfloat16, int32, int64 or uint8");
}

void validate(const BenchOptions& o) {
  if (!find_bench_collective(o.op)) {
    throw InvalidArgumentError(str_cat("--op ", op_type_name(o.op), ": ringbench measures ", bench_op_names(", ")));
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
  const BenchCollective& c = *find_bench_collective(o.op);
  const int64_t item = c10::elementSize(o.dtype);
  std::vector<BenchRow> rows;
  for (int64_t bytes = std::max<int64_t>(o.min_bytes, item); bytes <= o.max_bytes; bytes *= o.factor) {
    int64_t count = bytes / item;
    if (c.blocked_input) count = std::max<int64_t>(count / g.size(), 1) * g.size();
    at::Tensor input = at::ones({count}, at::TensorOptions().dtype(o.dtype).device(bench_device(o)));
    at::Tensor output = output_for(c, input, g.size());
    // One timed operation; all-reduce inputs are reset afterwards (untimed) so values stay bounded.
    auto timed_once = [&] {
      const auto start = std::chrono::steady_clock::now();
      c.run(g, input, output);
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      if (c.op == OpType::kAllreduce) input.fill_(1);
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
    row.op = op_type_name(o.op);
    row.time_us = t[0].item<double>();
    row.median_us = t[1].item<double>();
    row.algbw_gbs = row.bytes / (row.time_us * 1e3);
    row.busbw_gbs = row.algbw_gbs * c.bus_factor(g.size());
    row.wrong = o.check ? count_wrong(c, o, g, count) : -1;
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
