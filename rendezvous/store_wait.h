// The one waiting loop behind every store's get() and wait() (see Note [Store contract] in
// docs/ARCHITECTURE.md): poll check() with a growing back-off until every key exists or the
// deadline passes. Polling, not the stores' native waits, because c10d's TCPStore leaves its
// socket out of step after a timed-out WAIT, and HashStore/FileStore round deadlines differently;
// one loop gives every store the same millisecond deadline and the same error.
#pragma once

#include <chrono>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

namespace ringtorch {

// Returns the keys still missing when the deadline passed (empty: all exist). Never throws on
// timeout; exceptions from the store itself (I/O) pass through.
std::vector<std::string> wait_until_keys_exist(c10d::Store& store, const std::vector<std::string>& keys,
                                               std::chrono::steady_clock::time_point deadline);

// Waits for every key or throws TimeoutError naming the missing keys, the store and the knob.
void wait_for_keys(c10d::Store& store, const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                   const std::string& store_description);

// "'a', 'b' and 3 more" for messages.
std::string quote_keys(const std::vector<std::string>& keys, size_t max_shown = 4);

// The sentence every timeout message ends with.
extern const char kRaiseTimeoutHint[];

}  // namespace ringtorch
