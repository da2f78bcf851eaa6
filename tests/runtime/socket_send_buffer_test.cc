// The send buffers of a group's TCP data sockets (runtime/comm/socket_send_buffer.h), and which
// peers share this kernel (runtime/comm/peer_kernels.h). Two levels: apply_send_buffers on bare
// Gloo contexts over loopback, with the kernel identities given per rank and every socket's
// SO_SNDBUF read back; and whole groups (ranks as threads, shared memory off), whose path line
// reports what the kernel granted. Also which Gloo devices count as TCP (socket_device.h).
#include "runtime/comm/socket_send_buffer.h"

#include <ATen/ATen.h>
#include <gloo/rendezvous/context.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <vector>

#include "base/error.h"
#include "rendezvous/deadline_store.h"
#include "rendezvous/gloo_store.h"
#include "runtime/comm/failure_report.h"
#include "runtime/comm/pair_sockets.h"
#include "runtime/comm/peer_kernels.h"
#include "runtime/comm/process_group.h"
#include "runtime/comm/socket_device.h"
#include "runtime/comm/tensor_checks.h"
#include "support/scoped_environment.h"
#include "support/thread_ranks.h"

namespace ringtorch {
namespace {

using std::chrono::milliseconds;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

c10::intrusive_ptr<c10d::Store> memory_store() {
  return c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", milliseconds(30000));
}

// What the kernel grants a request of `bytes`: twice the request, capped at net.core.wmem_max.
int granted_for(int bytes) {
  long wmem_max = 0;
  std::ifstream("/proc/sys/net/core/wmem_max") >> wmem_max;
  return 2 * static_cast<int>(wmem_max > 0 ? std::min<long>(bytes, wmem_max) : bytes);
}

int send_buffer_of(int fd) {
  int bytes = -1;
  socklen_t length = sizeof(bytes);
  return ::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, &length) == 0 ? bytes : -1;
}

// Two ranks as threads, each with its own Gloo context over loopback whose pair addresses are
// published as a group publishes them; `body(rank, context, store)` runs on each once both are
// connected. The contexts (and their sockets) live until both bodies have returned.
void on_two_gloo_ranks(const std::function<void(int, gloo::Context&, c10d::Store&)>& body) {
  auto store = memory_store();
  std::shared_ptr<gloo::rendezvous::Context> contexts[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      try {
        contexts[r] = std::make_shared<gloo::rendezvous::Context>(r, 2);
        contexts[r]->setTimeout(milliseconds(30000));
        GlooStore gloo_store(store);
        std::shared_ptr<gloo::transport::Device> device = make_tcp_device("", "").device;
        contexts[r]->connectFullMesh(gloo_store, device);
        publish_peer_addresses(*store, *contexts[r]);
        body(r, *contexts[r], *store);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
}

int peer_socket(gloo::Context& context, c10d::Store& store) {
  return find_pair_sockets(context, store)[static_cast<size_t>(1 - context.rank)];
}

// What a group does while it connects, with this rank's kernel called `identity`.
std::string apply(gloo::Context& context, c10d::Store& store, SocketSendBuffer::Mode mode, const std::string& identity,
                  int bytes = 0) {
  return apply_send_buffers(find_pair_sockets(context, store),
                            peers_on_this_kernel(context.rank, context.size, store, identity), {mode, bytes},
                            "RINGTORCH_SOCKET_SNDBUF");
}

// A transport without sockets (as ibverbs is): the group must neither tune nor read its pairs.
class SocketlessDevice : public gloo::transport::Device {
 public:
  std::string str() const override { return "socketless"; }
  const std::string& getPCIBusID() const override { return bus_id_; }
  std::shared_ptr<gloo::transport::Context> createContext(int, int) override { return nullptr; }

 private:
  std::string bus_id_;
};

TEST(SocketDevice, OnlyGloosTcpTransportCountsAsTcp) {
  EXPECT_TRUE(is_tcp_device(*make_tcp_device("", "").device));
  EXPECT_FALSE(is_tcp_device(SocketlessDevice()));
}

TEST(SocketSendBuffer, ParsesAutoKernelAndByteCounts) {
  const std::string what = "environment variable RINGTORCH_SOCKET_SNDBUF";
  EXPECT_EQ(SocketSendBuffer{}.mode, SocketSendBuffer::Mode::kKernel);
  EXPECT_EQ(parse_socket_send_buffer("auto", what).mode, SocketSendBuffer::Mode::kAuto);
  EXPECT_EQ(parse_socket_send_buffer("kernel", what).mode, SocketSendBuffer::Mode::kKernel);
  const SocketSendBuffer sized = parse_socket_send_buffer("256K", what);
  EXPECT_EQ(sized.mode, SocketSendBuffer::Mode::kBytes);
  EXPECT_EQ(sized.bytes, 256 << 10);
  EXPECT_EQ(parse_socket_send_buffer("4096", what).bytes, 4096);
  EXPECT_EQ(parse_socket_send_buffer("1G", what).bytes, 1 << 30);
  for (const char* bad : {"", "0", "4095", "2G", "x", "-1", "Auto", "1.5M"}) {
    try {
      parse_socket_send_buffer(bad, what);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const InvalidArgumentError& e) {
      EXPECT_TRUE(contains(e.what(), "RINGTORCH_SOCKET_SNDBUF")) << e.what();
    }
  }
}

TEST(PeerKernels, TheKernelIdentityIsTheBootId) {
  const std::string id = kernel_identity();
  if (id.empty()) GTEST_SKIP() << "/proc/sys/kernel/random/boot_id is not readable here";
  EXPECT_EQ(id.size(), 36u) << id;  // a UUID, the same for every process of this machine
  EXPECT_EQ(kernel_identity(), id);
}

TEST(PeerKernels, EveryRankLearnsWhichPeersShareItsKernel) {
  auto store = memory_store();
  const std::vector<std::string> identities = {"kernel-a", "kernel-a", "kernel-b", ""};
  std::vector<std::vector<bool>> seen(identities.size());
  std::vector<std::thread> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.emplace_back([&, r] { seen[r] = peers_on_this_kernel(r, 4, *store, identities[r]); });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(seen[0], (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ(seen[1], (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(seen[2], (std::vector<bool>{false, false, false, false}));
  EXPECT_EQ(seen[3], (std::vector<bool>{false, false, false, false}));  // no identity: no peer shares it
  EXPECT_EQ(peers_on_this_kernel(0, 1, *store, "kernel-a"), std::vector<bool>{false});
}

TEST(SocketSendBuffer, AutoCapsPeersOnTheSameKernelOnly) {
  on_two_gloo_ranks([](int rank, gloo::Context& context, c10d::Store& store) {
    const std::string said = apply(context, store, SocketSendBuffer::Mode::kAuto, rank == 0 ? "kernel-a" : "kernel-b");
    EXPECT_EQ(said, "") << "rank " << rank;
    EXPECT_NE(send_buffer_of(peer_socket(context, store)), granted_for(kSameMachineSendBuffer)) << "rank " << rank;
  });
  on_two_gloo_ranks([](int rank, gloo::Context& context, c10d::Store& store) {
    const std::string said = apply(context, store, SocketSendBuffer::Mode::kAuto, "kernel-a");
    EXPECT_TRUE(contains(said, "for 1 peer on this machine")) << "rank " << rank << ": " << said;
    EXPECT_EQ(send_buffer_of(peer_socket(context, store)), granted_for(kSameMachineSendBuffer)) << "rank " << rank;
  });
}

TEST(SocketSendBuffer, KernelLeavesTheSocketsAloneAndARankMayChooseDifferently) {
  // Rank 1 leaves its sockets to the kernel, rank 0 (auto) caps its own: the setting is per rank.
  on_two_gloo_ranks([](int rank, gloo::Context& context, c10d::Store& store) {
    const std::string said =
        apply(context, store, rank == 0 ? SocketSendBuffer::Mode::kAuto : SocketSendBuffer::Mode::kKernel, "kernel-a");
    const int now = send_buffer_of(peer_socket(context, store));
    if (rank == 0) {
      EXPECT_TRUE(contains(said, "for 1 peer on this machine")) << said;
      EXPECT_EQ(now, granted_for(kSameMachineSendBuffer));
    } else {
      EXPECT_EQ(said, "");
      EXPECT_NE(now, granted_for(kSameMachineSendBuffer));
    }
  });
}

TEST(SocketSendBuffer, AnExplicitSizeIsSetForEveryPeerWhateverItsKernel) {
  on_two_gloo_ranks([](int rank, gloo::Context& context, c10d::Store& store) {
    const std::string said =
        apply(context, store, SocketSendBuffer::Mode::kBytes, rank == 0 ? "kernel-a" : "kernel-b", 64 << 10);
    EXPECT_TRUE(contains(said, "for 1 peer (")) << said;
    EXPECT_EQ(send_buffer_of(peer_socket(context, store)), granted_for(64 << 10)) << "rank " << rank;
  });
}

ProcessGroupOptions over_tcp(SocketSendBuffer::Mode mode, int bytes = 0) {
  ProcessGroupOptions options;
  options.shared_memory = false;
  options.socket_send_buffer = SocketSendBuffer{mode, bytes};
  return options;
}

TEST(SocketSendBuffer, AGroupSaysWhatTheKernelGrantedEveryPeerOnThisMachine) {
  if (kernel_identity().empty()) GTEST_SKIP() << "no boot id: no peer counts as on this machine";
  for (int world : {2, 3}) {
    testing::on_thread_ranks(
        world,
        [&](ProcessGroup& group) {
          const std::string peers = world == 2 ? "1 peer" : "2 peers";
          const std::string size = human_bytes(granted_for(kSameMachineSendBuffer));
          EXPECT_TRUE(contains(group.path(), "TCP send buffers of " + size + " for " + peers + " on this machine"))
              << group.path();
          at::Tensor t = at::full({1 << 20}, group.rank() + 1.0f);
          group.allreduce(t);
          EXPECT_TRUE(t.eq(world * (world + 1) / 2.0f).all().item<bool>());
        },
        milliseconds(30000), over_tcp(SocketSendBuffer::Mode::kAuto));
  }
  testing::on_thread_ranks(
      2, [](ProcessGroup& group) { EXPECT_FALSE(contains(group.path(), "TCP send buffers")) << group.path(); },
      milliseconds(30000), over_tcp(SocketSendBuffer::Mode::kKernel));
  testing::ScopedEnvironment unset("RINGTORCH_SOCKET_SNDBUF", std::nullopt);
  ProcessGroupOptions by_default;  // the kernel's tuning
  by_default.shared_memory = false;
  testing::on_thread_ranks(
      2, [](ProcessGroup& group) { EXPECT_FALSE(contains(group.path(), "TCP send buffers")) << group.path(); },
      milliseconds(30000), by_default);
}

// A tiny buffer makes every large message cross in many small writes; the collectives must
// still finish and be right.
TEST(SocketSendBuffer, LargeCollectivesFinishThroughATinyBuffer) {
  testing::on_thread_ranks(
      2,
      [](ProcessGroup& group) {
        EXPECT_TRUE(contains(group.path(), "TCP send buffers of " + human_bytes(granted_for(4096)) +
                                               " for 1 peer (ProcessGroupOptions::socket_send_buffer=kernel"))
            << group.path();
        for (int64_t count : {int64_t{1}, int64_t{100000}, int64_t{1} << 20}) {
          at::Tensor t = at::full({count}, group.rank() + 1.0f);
          group.allreduce(t);
          ASSERT_TRUE(t.eq(3.0f).all().item<bool>()) << count;
          at::Tensor b = at::full({count}, group.rank() == 1 ? 5.0f : 0.0f);
          group.broadcast(b, 1);
          ASSERT_TRUE(b.eq(5.0f).all().item<bool>()) << count;
        }
      },
      milliseconds(60000), over_tcp(SocketSendBuffer::Mode::kBytes, 4096));
}

TEST(SocketSendBuffer, AMalformedSettingIsRefusedAtCreation) {
  testing::ScopedEnvironment lots("RINGTORCH_SOCKET_SNDBUF", "lots");
  ProcessGroupOptions options;
  options.shared_memory = false;
  try {
    ProcessGroup::create(memory_store(), 0, 1, "127.0.0.1", options);
    ADD_FAILURE() << "RINGTORCH_SOCKET_SNDBUF=lots was accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_TRUE(contains(e.what(), "RINGTORCH_SOCKET_SNDBUF")) << e.what();
  }
}

}  // namespace
}  // namespace ringtorch
