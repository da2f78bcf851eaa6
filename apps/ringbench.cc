// ringbench: collective bandwidth and latency, nccl-tests style. Logic: bench/collective_bench.
//   ringrun --standalone --nproc_per_node 2 --use_env ringbench --op allreduce --check
#include <cstdio>
#include <string>

#include "base/error.h"
#include "base/parse.h"
#include "bench/collective_bench.h"
#include "rendezvous/init_method.h"
#include "rendezvous/rendezvous.h"
#include "runtime/comm/process_group.h"

namespace {

const char kUsage[] =
    "usage: ringbench [--op allreduce|broadcast|allgather|reduce_scatter|alltoall|send]\n"
    "                 [--min-bytes N] [--max-bytes N] [--factor F]\n"
    "                 [--iters N] [--warmup N] [--dtype float32|float64|float16|bfloat16|int32|int64|uint8]\n"
    "                 [--device cpu|cuda] [--check] [--json] [--init-method URL] [--timeout SECONDS]\n"
    "                 [--iface NAME]\n"
    "Sizes take K, M, G suffixes (powers of 1024). Launch with ringrun, torchrun, or any env:// launch.\n"
    "One row per size: size (B), count, type, op, time (us, slowest rank's mean), algbw and busbw (GB/s),\n"
    "#wrong (with --check: elements that differ from the closed-form result, summed over ranks).\n"
    "--json adds median_us (slowest rank's median), which bench/compare_torch compares.\n";

}  // namespace

int main(int argc, char** argv) {
  ringtorch::BenchOptions bench;
  ringtorch::RendezvousOptions rdzv_options;
  ringtorch::ProcessGroupOptions group_options;
  bool json = false;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i], value;
      if (auto eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
      } else if (arg != "--check" && arg != "--json" && arg != "--help" && i + 1 < argc) {
        value = argv[++i];
      }
      if (arg == "--help") {
        std::fputs(kUsage, stdout);
        return 0;
      } else if (arg == "--op") {
        bench.op = ringtorch::parse_bench_op(value);
      } else if (arg == "--min-bytes") {
        bench.min_bytes = ringtorch::parse_byte_size(value, arg);
      } else if (arg == "--max-bytes") {
        bench.max_bytes = ringtorch::parse_byte_size(value, arg);
      } else if (arg == "--factor") {
        bench.factor = ringtorch::parse_int_in_range(value, 2, 1 << 20, arg);
      } else if (arg == "--iters") {
        bench.iters = ringtorch::parse_int_in_range(value, 1, 1 << 24, arg);
      } else if (arg == "--warmup") {
        bench.warmup = ringtorch::parse_int_in_range(value, 0, 1 << 24, arg);
      } else if (arg == "--dtype") {
        bench.dtype = ringtorch::parse_dtype(value);
      } else if (arg == "--device") {
        bench.device = value;
      } else if (arg == "--check") {
        bench.check = true;
      } else if (arg == "--json") {
        json = true;
      } else if (arg == "--init-method") {
        rdzv_options.init_method = value;
      } else if (arg == "--timeout") {
        rdzv_options.timeout = ringtorch::parse_seconds(value, arg);
      } else if (arg == "--iface") {
        group_options.iface = value;
      } else if (arg == "--local_rank" || arg == "--local-rank") {
        // torch.distributed.launch's legacy flag: LOCAL_RANK says the same
      } else {
        throw ringtorch::InvalidArgumentError("unknown argument '" + arg + "'; see ringbench --help");
      }
    }
    ringtorch::validate(bench);
  } catch (const ringtorch::Error& e) {
    std::fprintf(stderr, "ringbench: %s\n", e.what());
    return 2;
  }
  try {
    auto rdzv = ringtorch::rendezvous(rdzv_options);
    auto group = ringtorch::ProcessGroup::create(rdzv, group_options);
    if (rdzv.rank == 0 && !json) {
      std::printf("# ringbench %s, world size %d, network %s\n", ringtorch::op_type_name(bench.op), group->size(),
                  group->network().c_str());
      std::fputs(ringtorch::format_header().c_str(), stdout);
      std::fflush(stdout);  // a launcher or a test may be waiting for it
    }
    int64_t wrong = 0;
    for (const auto& row : ringtorch::run_collective_bench(*group, bench)) {
      if (row.wrong > 0) wrong += row.wrong;
      if (rdzv.rank == 0) {
        std::fputs(json ? ringtorch::format_json(row, group->size()).c_str() : ringtorch::format_row(row).c_str(),
                   stdout);
        std::fflush(stdout);
      }
    }
    group->barrier();
    group->shutdown();
    if (wrong > 0) {
      std::fprintf(stderr, "ringbench: %lld wrong elements\n", static_cast<long long>(wrong));
      return 1;
    }
    return 0;
  } catch (const ringtorch::Error& e) {
    std::fprintf(stderr, "ringbench: %s error: %s\n", ringtorch::error_kind_name(e.kind()), e.what());
    return 1;
  }
}
