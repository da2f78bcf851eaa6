// ringhello: the smallest ringtorch program. Every rank rendezvouses (any init method), publishes
// a greeting through the store, reads everyone else's, checks a store counter against the
// closed form 0 + 1 + ... + (N-1), and leaves through a barrier so the store outlives its users.
//
//   ringrun --standalone --nproc_per_node 2 build/apps/ringhello
//   RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 build/apps/ringhello
//   build/apps/ringhello --init-method file:///tmp/job --rank 0 --world-size 1
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include <ringtorch/error.h>
#include <ringtorch/join.h>
#include <ringtorch/rendezvous.h>

#include "base/command_line.h"
#include "base/parse.h"
#include "rendezvous/init_method.h"

namespace {

const char kUsage[] =
    "usage: ringhello [--init-method URL] [--rank R] [--world-size N] [--timeout SECONDS] [--local_rank=N]\n"
    "Rendezvous through URL (default env://), exchange one greeting per rank through the store,\n"
    "print what every rank said. Exit 0 on success; 1 with a message on any failure; 2 for bad flags.\n"
    "Flags take --flag VALUE or --flag=VALUE, with dashes or underscores. -h, --help: this text.\n";

}  // namespace

int main(int argc, char** argv) {
  ringtorch::RendezvousOptions options;
  ringtorch::CommandLine cli("ringhello", kUsage);
  cli.option("--init-method",
             [&](const std::string& v) {
               ringtorch::parse_init_method(v);  // a malformed URL fails here, before any rendezvous
               options.init_method = v;
             })
      .option("--rank",
              [&](const std::string& v) { options.rank = ringtorch::parse_int_in_range(v, 0, 1 << 24, "--rank"); })
      .option("--world-size",
              [&](const std::string& v) {
                options.world_size = ringtorch::parse_int_in_range(v, 1, 1 << 24, "--world-size");
              })
      .option("--timeout", [&](const std::string& v) { options.timeout = ringtorch::parse_seconds(v, "--timeout"); })
      .ignored("--local_rank");  // LOCAL_RANK says the same
  if (const int status = cli.parse_main(argc, argv); status >= 0) return status;

  try {
    auto rdzv = ringtorch::rendezvous(options);
    const std::string me = rdzv.describe();
    char host[256] = {0};
    ::gethostname(host, sizeof(host) - 1);
    std::string greeting = ringtorch::str_cat("hello from rank ", rdzv.rank, " (local ", rdzv.local_rank, "/",
                                              rdzv.local_world_size, ", host ", host, ", pid ", ::getpid(), ")");
    rdzv.store->set("hello/" + std::to_string(rdzv.rank), std::vector<uint8_t>(greeting.begin(), greeting.end()));
    const int64_t sum = rdzv.store->add("rank_sum", rdzv.rank);
    (void)sum;
    ringtorch::MemberContext who{rdzv.rank, rdzv.world_size, "rank", "ringhello"};
    ringtorch::store_barrier(*rdzv.store, "greeted", who, rdzv.timeout);

    std::printf("%srendezvous via %s: run %s, key prefix %s\n", me.c_str(), rdzv.init_method.c_str(),
                rdzv.run_id.c_str(), rdzv.key_prefix().c_str());
    for (int r = 0; r < rdzv.world_size; ++r) {
      auto v = rdzv.store->get("hello/" + std::to_string(r));
      std::printf("%sgot: %s\n", me.c_str(), std::string(v.begin(), v.end()).c_str());
    }
    const int64_t total = rdzv.store->add("rank_sum", 0);
    const int64_t expected = static_cast<int64_t>(rdzv.world_size) * (rdzv.world_size - 1) / 2;
    std::printf("%ssum of ranks through the store: %lld (expected %lld) %s\n", me.c_str(),
                static_cast<long long>(total), static_cast<long long>(expected), total == expected ? "OK" : "WRONG");
    std::fflush(stdout);
    // Nobody leaves while others may still read: the store may live in this very process.
    ringtorch::leave_barrier(*rdzv.store, "done", who, rdzv.timeout);
    return total == expected ? 0 : 1;
  } catch (const ringtorch::Error& e) {
    std::fprintf(stderr, "ringhello: %s error: %s\n", ringtorch::error_kind_name(e.kind()), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringhello: %s\n", e.what());
    return 1;
  }
}
