// store_tool: one store operation from a separate process, for the multi-process store tests.
//   store_tool URL add KEY N COUNT   add N to KEY, COUNT times; prints the last value
//   store_tool URL get KEY           prints the value (waits up to the URL's ?timeout=)
//   store_tool URL set KEY VALUE
// URL is tcp://HOST:PORT (client), file:///PATH or redis://...; ?timeout= bounds waits.
// Exit 0 on success, 1 with the error on stderr.
#include <cstdio>
#include <string>

#include <ringtorch/error.h>

#include "rendezvous/init_method.h"
#include "rendezvous/store_factory.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fputs("usage: store_tool URL add KEY N COUNT | get KEY | set KEY VALUE\n", stderr);
    return 2;
  }
  try {
    ringtorch::StoreRequest request;
    request.method = ringtorch::parse_init_method(argv[1]);
    request.timeout = request.method.timeout.value_or(std::chrono::seconds(30));
    auto store = ringtorch::open_store(request);
    std::string op = argv[2], key = argv[3];
    if (op == "add" && argc == 6) {
      int64_t last = 0;
      for (int i = 0, n = std::stoi(argv[5]); i < n; ++i) last = store->add(key, std::stoll(argv[4]));
      std::printf("%lld\n", static_cast<long long>(last));
    } else if (op == "get") {
      auto v = store->get(key);
      std::printf("%s\n", std::string(v.begin(), v.end()).c_str());
    } else if (op == "set" && argc == 5) {
      std::string v = argv[4];
      store->set(key, std::vector<uint8_t>(v.begin(), v.end()));
    } else {
      std::fputs("store_tool: bad arguments\n", stderr);
      return 2;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "store_tool: %s\n", e.what());
    return 1;
  }
}
