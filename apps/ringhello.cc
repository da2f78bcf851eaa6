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

#include "base/error.h"
#include "base/parse.h"
#include "rendezvous/init_method.h"
#include "rendezvous/join.h"
#include "rendezvous/rendezvous.h"

namespace {

void usage() {
  std::puts(
      "usage: ringhello [--init-method URL] [--rank R] [--world-size N] [--timeout SECONDS] [--local_rank=N]\n"
      "Rendezvous through URL (default env://), exchange one greeting per rank through the store,\n"
      "print what every rank said. Exit 0 on success; 1 with a message on any failure; 2 for bad flags.");
}

}  // namespace

int main(int argc, char** argv) {
  ringtorch::RendezvousOptions options;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      auto value = [&](const char* flag) -> std::string {
        std::string f = flag;
        if (arg.rfind(f + "=", 0) == 0) return arg.substr(f.size() + 1);
        if (i + 1 >= argc) throw ringtorch::InvalidArgumentError(f + " needs a value");
        return argv[++i];
      };
      if (arg == "--help" || arg == "-h") {
        usage();
        return 0;
      } else if (arg.rfind("--init-method", 0) == 0) {
        options.init_method = value("--init-method");
      } else if (arg.rfind("--rank", 0) == 0) {
        options.rank = ringtorch::parse_int_in_range(value("--rank"), 0, 1 << 24, "--rank");
      } else if (arg.rfind("--world-size", 0) == 0) {
        options.world_size = ringtorch::parse_int_in_range(value("--world-size"), 1, 1 << 24, "--world-size");
      } else if (arg.rfind("--timeout", 0) == 0) {
        options.timeout = ringtorch::parse_seconds(value("--timeout"), "--timeout");
      } else if (arg.rfind("--local_rank", 0) == 0 || arg.rfind("--local-rank", 0) == 0) {
        value(arg.rfind("--local_rank", 0) == 0 ? "--local_rank" : "--local-rank");  // LOCAL_RANK says the same
      } else {
        throw ringtorch::InvalidArgumentError("unknown argument '" + arg + "'; see ringhello --help");
      }
    }
  } catch (const ringtorch::Error& e) {
    std::fprintf(stderr, "ringhello: %s\n", e.what());
    return 2;
  }

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
