#include "runtime/comm/shm/host_plan.h"

#include <sys/mman.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <random>

#include <ringtorch/error.h>

#include "rendezvous/store_value.h"

namespace ringtorch {

namespace {

// The running kernel's boot id: the same in every network namespace and container of one
// machine, so two containers with one hostname on different machines still differ.
std::string boot_id() {
  std::string id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> id;
  return id;
}

}  // namespace

std::string host_identity() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return std::string(host) + "|" + boot_id();
}

HostPlan plan_hosts(c10d::Store& store, int rank, int size, const std::string& segment_tag, bool enabled,
                    const std::string& my_identity, size_t area_bytes) {
  HostPlan plan;
  store.set(str_cat("shm/host/", rank), store_value(my_identity));
  std::vector<std::string> identity(size);
  std::map<std::string, std::vector<int>> ranks_by_host;
  std::vector<std::string> host_order;
  for (int r = 0; r < size; ++r) {
    identity[r] = store_text(store.get(str_cat("shm/host/", r)));
    if (!ranks_by_host.count(identity[r])) host_order.push_back(identity[r]);
    ranks_by_host[identity[r]].push_back(r);
  }
  plan.hosts = static_cast<int>(host_order.size());
  plan.host_of_rank.resize(size);
  plan.local_index_of_rank.resize(size);
  for (int h = 0; h < plan.hosts; ++h) {
    const auto& ranks = ranks_by_host[host_order[h]];
    for (size_t i = 0; i < ranks.size(); ++i) {
      plan.host_of_rank[ranks[i]] = h;
      plan.local_index_of_rank[ranks[i]] = static_cast<int>(i);
    }
  }
  const std::vector<int>& local = ranks_by_host[identity[rank]];
  const int local_rank = static_cast<int>(std::find(local.begin(), local.end(), rank) - local.begin());
  const std::string hostname = identity[rank].substr(0, identity[rank].find('|'));
  bool equal_counts = true;
  for (const auto& [host, ranks] : ranks_by_host) equal_counts = equal_counts && ranks.size() == local.size();

  if (!enabled) {
    plan.why = "shared memory is off (RINGTORCH_SHM=0)";
    return plan;
  }
  if (local.size() < 2) {
    plan.why = str_cat("no two ranks share a host (", plan.hosts, " hosts)");
    return plan;
  }
  if (!equal_counts) {
    plan.why = str_cat("the ", plan.hosts, " hosts run different numbers of ranks, which the ",
                       "hierarchical collectives cannot pair");
    return plan;
  }

  // The local group's first rank creates the segment; the others map it and check the nonce.
  const int leader = local.front();
  std::string name;  // "<tag>-<leader>-<random>": concurrent groups with the same tag never collide
  const size_t bytes = LocalCollectives::segment_bytes(static_cast<int>(local.size()), area_bytes);
  std::string status = "ok";
  std::unique_ptr<LocalCollectives> collectives;
  try {
    if (rank == leader) {
      std::random_device random;
      const uint64_t nonce = (uint64_t{random()} << 32) ^ random() ^ static_cast<uint64_t>(::getpid());
      name = shared_segment_name(str_cat(segment_tag, "-", leader, "-", nonce % 1000000007));
      SharedSegment segment = SharedSegment::create(name, bytes);
      LocalCollectives::initialise(segment.data(), static_cast<int>(local.size()), area_bytes, nonce);
      store.set(str_cat("shm/segment/", leader), store_value(str_cat(nonce, " ", name)));
      collectives = std::make_unique<LocalCollectives>(std::move(segment), local_rank, local, area_bytes, nonce);
    } else {
      const std::string published = store_text(store.get(str_cat("shm/segment/", leader)));
      if (published.rfind("failed", 0) == 0) throw IoError(published);
      name = published.substr(published.find(' ') + 1);
      collectives = std::make_unique<LocalCollectives>(SharedSegment::open(name, bytes), local_rank, local, area_bytes,
                                                       std::stoull(published.substr(0, published.find(' '))));
    }
  } catch (const std::exception& e) {
    status = str_cat("failed at rank ", rank, ": ", e.what());
    if (rank == leader) store.set(str_cat("shm/segment/", leader), store_value(status));
  }
  // Every rank reads every rank's outcome, so all decide alike. The leader unlinks the name
  // once everyone has mapped it or given up, and also when waiting fails (a peer died during
  // set-up, the store timed out): nothing is left in /dev/shm either way.
  std::string failure;
  try {
    store.set(str_cat("shm/attached/", rank), store_value(status));
    for (int r = 0; r < size && failure.empty(); ++r) {
      const std::string outcome = store_text(store.get(str_cat("shm/attached/", r)));
      if (outcome != "ok") failure = outcome;
    }
  } catch (...) {
    if (rank == leader && !name.empty()) ::shm_unlink(name.c_str());
    throw;
  }
  if (rank == leader && !name.empty()) ::shm_unlink(name.c_str());
  if (!failure.empty()) {
    plan.why = "shared memory " + failure;
    return plan;
  }
  plan.local = std::move(collectives);
  if (plan.hosts == 1) {
    plan.why = str_cat("all ", size, " ranks on host ", hostname);
  } else {
    for (size_t i = 0; i < local.size(); ++i) {
      std::vector<int> ranks;
      ranks.reserve(host_order.size());
      for (const auto& host : host_order) ranks.push_back(ranks_by_host[host][i]);
      plan.cross_host_groups.push_back(ranks);
    }
    plan.why = str_cat(plan.hosts, " hosts x ", local.size(), " ranks");
  }
  return plan;
}

}  // namespace ringtorch
