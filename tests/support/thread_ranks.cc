#include "support/thread_ranks.h"

#include <exception>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <vector>

#include "rendezvous/deadline_store.h"

namespace ringtorch::testing {

void on_thread_ranks(int n, const std::function<void(ProcessGroup&)>& body, std::chrono::milliseconds timeout,
                     ProcessGroupOptions options, const std::vector<std::string>& host_identities) {
  on_thread_ranks_with_options(
      n,
      [&](int rank) {
        ProcessGroupOptions mine = options;
        if (!host_identities.empty()) mine.host_identity = host_identities[rank];
        return mine;
      },
      body, timeout);
}

void on_thread_ranks_with_options(int n, const std::function<ProcessGroupOptions(int rank)>& options_of_rank,
                                  const std::function<void(ProcessGroup&)>& body, std::chrono::milliseconds timeout,
                                  c10::intrusive_ptr<c10d::Store> store) {
  if (!store) store = c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", timeout);
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        ProcessGroupOptions mine = options_of_rank(r);
        mine.timeout = timeout;
        auto group = ProcessGroup::create(store, r, n, "127.0.0.1", mine);
        body(*group);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace ringtorch::testing
