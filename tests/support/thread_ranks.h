// N ranks as threads of this process, each with its own ProcessGroup over one shared in-memory
// store: fast multi-rank tests of everything above the store (real Gloo over loopback TCP).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <ringtorch/process_group.h>

namespace ringtorch::testing {

// Runs body(group) on `n` threads; rethrows the first rank's failure (by rank order) after all
// have finished.
void on_thread_ranks(int n, const std::function<void(ProcessGroup&)>& body,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(30000),
                     ProcessGroupOptions options = {},
                     const std::vector<std::string>& host_identities = {});  // per rank, when given

// The same with each rank's own options (a group whose ranks were configured differently);
// `timeout` replaces each one's timeout. Over `store` where given (a store that misbehaves),
// else over a new in-memory one.
void on_thread_ranks_with_options(int n, const std::function<ProcessGroupOptions(int rank)>& options_of_rank,
                                  const std::function<void(ProcessGroup&)>& body,
                                  std::chrono::milliseconds timeout = std::chrono::milliseconds(30000),
                                  c10::intrusive_ptr<c10d::Store> store = {});

}  // namespace ringtorch::testing
