#include "rendezvous/store_wait.h"

#include <algorithm>
#include <thread>

#include <ringtorch/error.h>

namespace ringtorch {

const char kRaiseTimeoutHint[] =
    "raise the timeout with RINGTORCH_TIMEOUT=SECONDS, ?timeout=SECONDS in the init method, or --timeout";

std::vector<std::string> wait_until_keys_exist(c10d::Store& store, const std::vector<std::string>& keys,
                                               std::chrono::steady_clock::time_point deadline) {
  using namespace std::chrono;
  auto pause = microseconds(200);
  while (true) {
    if (store.check(keys)) return {};
    auto now = steady_clock::now();
    if (now >= deadline) break;
    // Back off up to 50 ms: fast when peers are close behind, cheap when they are far.
    std::this_thread::sleep_for(std::min<nanoseconds>(pause, deadline - now));
    pause = std::min<microseconds>(pause * 2, milliseconds(50));
  }
  std::vector<std::string> missing;
  for (const auto& key : keys) {
    if (!store.check({key})) missing.push_back(key);
  }
  return missing;
}

void wait_for_keys(c10d::Store& store, const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                   const std::string& store_description) {
  auto missing = wait_until_keys_exist(store, keys, std::chrono::steady_clock::now() + timeout);
  if (missing.empty()) return;
  throw TimeoutError(str_cat("store ", store_description, ": timed out after ", format_duration_ms(timeout.count()),
                             " waiting for key", missing.size() == 1 ? " " : "s ", quote_keys(missing), " (nobody set ",
                             missing.size() == 1 ? "it" : "them", "); ", kRaiseTimeoutHint));
}

std::string quote_keys(const std::vector<std::string>& keys, size_t max_shown) {
  std::string out;
  size_t shown = std::min(keys.size(), max_shown);
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) out += (i + 1 == keys.size()) ? " and " : ", ";
    out += "'" + keys[i] + "'";
  }
  if (keys.size() > shown) out += str_cat(" and ", keys.size() - shown, " more");
  return out;
}

}  // namespace ringtorch
