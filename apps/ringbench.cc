// ringbench: collective bandwidth and latency, nccl-tests style. Logic: bench/collective_bench.
//   ringrun --standalone --nproc_per_node 2 --use_env ringbench --op allreduce --check
#include <cstdio>
#include <string>

#include <ringtorch/error.h>
#include <ringtorch/process_group.h>
#include <ringtorch/rendezvous.h>

#include "base/command_line.h"
#include "base/parse.h"
#include "bench/collective_bench.h"
#include "rendezvous/init_method.h"

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
    "--json adds median_us (slowest rank's median), which bench/compare_torch compares.\n"
    "Flags take --flag VALUE or --flag=VALUE, with dashes or underscores. -h, --help: this text.\n";

}  // namespace

int main(int argc, char** argv) {
  ringtorch::BenchOptions bench;
  ringtorch::RendezvousOptions rdzv_options;
  ringtorch::ProcessGroupOptions group_options;
  bool json = false;
  using ringtorch::parse_byte_size;
  using ringtorch::parse_int_in_range;
  ringtorch::CommandLine cli("ringbench", kUsage);
  cli.option("--op", [&](const std::string& v) { bench.op = ringtorch::parse_bench_op(v); })
      .option("--min-bytes", [&](const std::string& v) { bench.min_bytes = parse_byte_size(v, "--min-bytes"); })
      .option("--max-bytes", [&](const std::string& v) { bench.max_bytes = parse_byte_size(v, "--max-bytes"); })
      .option("--factor", [&](const std::string& v) { bench.factor = parse_int_in_range(v, 2, 1 << 20, "--factor"); })
      .option("--iters", [&](const std::string& v) { bench.iters = parse_int_in_range(v, 1, 1 << 24, "--iters"); })
      .option("--warmup", [&](const std::string& v) { bench.warmup = parse_int_in_range(v, 0, 1 << 24, "--warmup"); })
      .option("--dtype", [&](const std::string& v) { bench.dtype = ringtorch::parse_dtype(v); })
      .option("--device", [&](const std::string& v) { bench.device = v; })
      .flag("--check", [&](bool on) { bench.check = on; })
      .flag("--json", [&](bool on) { json = on; })
      .option("--init-method",
              [&](const std::string& v) {
                ringtorch::parse_init_method(v);  // a malformed URL fails here, not in the rendezvous
                rdzv_options.init_method = v;
              })
      .option("--timeout",
              [&](const std::string& v) { rdzv_options.timeout = ringtorch::parse_seconds(v, "--timeout"); })
      .option("--iface", [&](const std::string& v) { group_options.iface = v; })
      .ignored("--local_rank");  // torch.distributed.launch's legacy flag: LOCAL_RANK says the same
  if (const int status = cli.parse_main(argc, argv); status >= 0) return status;
  try {
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
                  group->description().network.c_str());
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
