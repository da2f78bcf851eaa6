#include "runtime/comm/peer_kernels.h"

#include <fstream>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "base/str_cat.h"
#include "rendezvous/store_value.h"

namespace ringtorch {

std::string kernel_identity() {
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  return boot_id;
}

std::vector<bool> peers_on_this_kernel(int rank, int size, c10d::Store& store, const std::string& identity) {
  std::vector<bool> same(static_cast<size_t>(size), false);
  if (size < 2) return same;
  store.set(str_cat("kernel/", rank), store_value(identity));
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const std::string theirs = store_text(store.get(str_cat("kernel/", peer)));
    same[static_cast<size_t>(peer)] = !identity.empty() && theirs == identity;
  }
  return same;
}

}  // namespace ringtorch
