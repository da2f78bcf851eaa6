// store_bench: per-operation latency of ringtorch's stores (what rendezvous and the launcher
// use), for the side-by-side comparison with Python's torch.distributed stores run by
// bench/compare_stores.sh. Prints one JSON object per operation.
//
//   store_bench tcp|file|redis://HOST:PORT [ITERATIONS]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/command_line.h"
#include "base/parse.h"
#include "bench/median.h"
#include "rendezvous/init_method.h"
#include "rendezvous/store_factory.h"

using ringtorch::median;

int main(int argc, char** argv) {
  ringtorch::CommandLine cli("store_bench", "usage: store_bench tcp|file|redis://HOST:PORT [ITERATIONS]\n");
  cli.positionals(2);
  if (const int status = cli.parse_main(argc, argv); status >= 0) return status;
  if (cli.rest().empty()) {
    std::fputs(cli.usage().c_str(), stderr);
    return 2;
  }
  const std::string kind = cli.rest()[0];
  int iterations = 2000;
  try {
    if (cli.rest().size() > 1) iterations = ringtorch::parse_int_in_range(cli.rest()[1], 1, 1 << 30, "ITERATIONS");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "store_bench: %s\n", e.what());
    return 2;
  }
  ringtorch::StoreRequest request;
  request.timeout = std::chrono::seconds(30);
  std::string path;
  if (kind == "tcp") {
    request.method = ringtorch::parse_init_method("tcp://127.0.0.1:1");
    request.method.port = 0;
    request.host_tcp_server = true;
  } else if (kind == "file") {
    char dir[] = "/tmp/store_bench-XXXXXX";
    path = std::string(::mkdtemp(dir)) + "/store";
    request.method = ringtorch::parse_init_method("file://" + path);
  } else {
    request.method = ringtorch::parse_init_method(kind);
  }
  auto store = ringtorch::open_store(request);
  const std::vector<uint8_t> value(64, 'x');
  using Clock = std::chrono::steady_clock;
  auto time_op = [&](const char* op, auto&& fn) {
    std::vector<double> samples;
    for (int rep = 0; rep < 5; ++rep) {
      auto start = Clock::now();
      for (int i = 0; i < iterations; ++i) fn(i);
      samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iterations);
    }
    std::printf("{\"impl\": \"ringtorch\", \"store\": \"%s\", \"op\": \"%s\", \"us_per_op\": %.2f}\n",
                kind.rfind("redis", 0) == 0 ? "redis" : kind.c_str(), op, median(samples));
    std::fflush(stdout);
  };
  time_op("set", [&](int i) { store->set("k" + std::to_string(i % 64), value); });
  time_op("get", [&](int i) { store->get("k" + std::to_string(i % 64)); });
  time_op("add", [&](int) { store->add("counter", 1); });
  time_op("wait", [&](int i) { store->wait({"k" + std::to_string(i % 64)}); });
  if (!path.empty()) ::unlink(path.c_str());
  return 0;
}
