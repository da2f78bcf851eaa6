// The send buffers of a group's TCP data sockets (runtime/comm/socket_send_buffer.h): ranks as
// threads over one in-memory store, Gloo over loopback TCP, shared memory off. Every rank here
// shares one kernel, so "auto" caps every peer; the group's path line reports the size the
// kernel granted (getsockopt), so these tests read what the sockets really got.
#include "runtime/comm/socket_send_buffer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "base/error.h"
#include "rendezvous/deadline_store.h"
#include "runtime/comm/process_group.h"
#include "support/thread_ranks.h"

namespace ringtorch {
namespace {

using std::chrono::milliseconds;

ProcessGroupOptions over_tcp(SocketSendBuffer::Mode mode, int bytes = 0) {
  ProcessGroupOptions options;
  options.shared_memory = false;
  options.socket_send_buffer = SocketSendBuffer{mode, bytes};
  return options;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(SocketSendBuffer, ParsesAutoKernelAndByteCounts) {
  const std::string what = "environment variable RINGTORCH_SOCKET_SNDBUF";
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

TEST(SocketSendBuffer, TheKernelIdentityIsTheBootId) {
  const std::string id = kernel_identity();
  EXPECT_EQ(id.size(), 36u) << id;  // a UUID, the same for every process of this machine
  EXPECT_EQ(kernel_identity(), id);
}

TEST(SocketSendBuffer, AutoCapsEveryPeerOnThisMachine) {
  for (int world : {2, 3}) {
    testing::on_thread_ranks(
        world,
        [&](ProcessGroup& group) {
          // Linux doubles the request; 212992 is at most net.core.wmem_max by default.
          const std::string peers = world == 2 ? "1 peer" : "2 peers";
          EXPECT_TRUE(contains(group.path(), "TCP send buffers of 416.0 KiB for " + peers + " on this machine"))
              << group.path();
          at::Tensor t = at::full({1 << 20}, group.rank() + 1.0f);
          group.allreduce(t);
          EXPECT_TRUE(t.eq(world * (world + 1) / 2.0f).all().item<bool>());
        },
        milliseconds(30000), over_tcp(SocketSendBuffer::Mode::kAuto));
  }
}

TEST(SocketSendBuffer, KernelLeavesTheSocketsAlone) {
  testing::on_thread_ranks(
      2, [](ProcessGroup& group) { EXPECT_FALSE(contains(group.path(), "TCP send buffers")) << group.path(); },
      milliseconds(30000), over_tcp(SocketSendBuffer::Mode::kKernel));
}

// A tiny buffer makes every large message cross in many small writes; the collectives must
// still finish and be right.
TEST(SocketSendBuffer, AnExplicitSizeIsUsedForEveryPeerAndLargeCollectivesStillFinish) {
  testing::on_thread_ranks(
      2,
      [](ProcessGroup& group) {
        EXPECT_TRUE(contains(group.path(), "TCP send buffers of 8.0 KiB for 1 peer (")) << group.path();
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
  ::setenv("RINGTORCH_SOCKET_SNDBUF", "lots", 1);
  try {
    ProcessGroupOptions options;
    options.shared_memory = false;
    auto store =
        c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", milliseconds(30000));
    ProcessGroup::create(store, 0, 1, "127.0.0.1", options);
    ADD_FAILURE() << "RINGTORCH_SOCKET_SNDBUF=lots was accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_TRUE(contains(e.what(), "RINGTORCH_SOCKET_SNDBUF")) << e.what();
  }
  ::unsetenv("RINGTORCH_SOCKET_SNDBUF");
}

}  // namespace
}  // namespace ringtorch
