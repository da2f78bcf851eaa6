// The congestion control of a group's TCP data sockets (runtime/comm/tcp_congestion.h). Two
// levels: apply_congestion_control on plain loopback connections, each socket's algorithm read
// back; and whole groups (ranks as threads, shared memory off) with a named algorithm.
#include "runtime/comm/tcp_congestion.h"

#include <ATen/ATen.h>
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <vector>

#include "base/error.h"
#include "base/str_cat.h"
#include "rendezvous/deadline_store.h"
#include "runtime/comm/process_group.h"
#include "runtime/comm/socket_send_buffer.h"
#include "support/scoped_environment.h"
#include "support/thread_ranks.h"

namespace ringtorch {
namespace {

using std::chrono::milliseconds;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// One TCP connection over loopback; `sender` stands for a pair's socket.
class LoopbackConnection {
 public:
  LoopbackConnection() {
    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    auto* raw = reinterpret_cast<sockaddr*>(&address);
    EXPECT_EQ(::bind(listener, raw, length), 0);
    EXPECT_EQ(::listen(listener, 1), 0);
    EXPECT_EQ(::getsockname(listener, raw, &length), 0);
    sender = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(::connect(sender, raw, length), 0);
    receiver_ = ::accept(listener, nullptr, nullptr);
    ::close(listener);
  }
  ~LoopbackConnection() {
    ::close(sender);
    ::close(receiver_);
  }
  LoopbackConnection(const LoopbackConnection&) = delete;
  LoopbackConnection& operator=(const LoopbackConnection&) = delete;

  // Sets the algorithm by hand, as a kernel default would; false when the kernel refuses it.
  bool use(const std::string& name) const {
    return ::setsockopt(sender, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0;
  }
  std::string algorithm() const { return congestion_control_of(sender); }

  int sender = -1;

 private:
  int receiver_ = -1;
};

TcpCongestion named(const std::string& name) { return {TcpCongestion::Mode::kNamed, name}; }

TEST(TcpCongestion, ParsesAutoKernelAndNames) {
  const std::string what = "environment variable RINGTORCH_TCP_CONGESTION";
  EXPECT_EQ(TcpCongestion{}.mode, TcpCongestion::Mode::kAuto);
  EXPECT_EQ(parse_tcp_congestion("auto", what).mode, TcpCongestion::Mode::kAuto);
  EXPECT_EQ(parse_tcp_congestion("kernel", what).mode, TcpCongestion::Mode::kKernel);
  const TcpCongestion cubic = parse_tcp_congestion("cubic", what);
  EXPECT_EQ(cubic.mode, TcpCongestion::Mode::kNamed);
  EXPECT_EQ(cubic.name, "cubic");
  EXPECT_EQ(parse_tcp_congestion("bbr", what).name, "bbr");
  for (const char* bad : {"", "Cubic", "cu bic", "cubic;", "a-name-far-too-long", "../bbr"}) {
    try {
      parse_tcp_congestion(bad, what);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const InvalidArgumentError& e) {
      EXPECT_TRUE(contains(e.what(), "RINGTORCH_TCP_CONGESTION")) << e.what();
      EXPECT_TRUE(contains(e.what(), "tcp_available_congestion_control")) << e.what();
    }
  }
}

TEST(TcpCongestion, AutoReplacesBbrForPeersOnThisKernelOnly) {
  LoopbackConnection same_kernel, other_kernel;
  if (!same_kernel.use("bbr") || !other_kernel.use("bbr")) {
    GTEST_SKIP() << "this kernel does not offer bbr (net.ipv4.tcp_available_congestion_control)";
  }
  const std::string said = apply_congestion_control({-1, same_kernel.sender, other_kernel.sender}, {false, true, false},
                                                    TcpCongestion{}, "RINGTORCH_TCP_CONGESTION");
  const std::string now = same_kernel.algorithm();
  EXPECT_TRUE(now == "cubic" || now == "reno") << now;
  EXPECT_EQ(other_kernel.algorithm(), "bbr");
  EXPECT_EQ(said, "TCP congestion control " + now +
                      " instead of bbr for 1 peer on this machine (RINGTORCH_TCP_CONGESTION=kernel: the kernel's own)");
}

TEST(TcpCongestion, AutoLeavesOtherAlgorithmsAndKernelLeavesEverything) {
  LoopbackConnection reno, bbr;
  ASSERT_TRUE(reno.use("reno"));  // every kernel has reno and lets every process choose it
  EXPECT_EQ(apply_congestion_control({reno.sender, -1}, {true, false}, TcpCongestion{}, "RINGTORCH_TCP_CONGESTION"),
            "");
  EXPECT_EQ(reno.algorithm(), "reno");
  if (!bbr.use("bbr")) GTEST_SKIP() << "this kernel does not offer bbr";
  EXPECT_EQ(apply_congestion_control({bbr.sender, -1}, {true, false}, {TcpCongestion::Mode::kKernel, ""},
                                     "RINGTORCH_TCP_CONGESTION"),
            "");
  EXPECT_EQ(bbr.algorithm(), "bbr");
}

TEST(TcpCongestion, ANamedAlgorithmIsSetForEveryPeerWhateverItsKernel) {
  LoopbackConnection one, two;
  const std::string said = apply_congestion_control({one.sender, -1, two.sender}, {true, false, false}, named("reno"),
                                                    "RINGTORCH_TCP_CONGESTION");
  EXPECT_EQ(said, "TCP congestion control reno for 2 peers (RINGTORCH_TCP_CONGESTION=kernel: the kernel's own)");
  EXPECT_EQ(one.algorithm(), "reno");
  EXPECT_EQ(two.algorithm(), "reno");
}

TEST(TcpCongestion, AnAlgorithmTheKernelRefusesNamesThePeerAndTheSysctls) {
  LoopbackConnection connection;
  const std::string before = connection.algorithm();
  try {
    apply_congestion_control({-1, connection.sender}, {false, true}, named("nosuchcc"), "RINGTORCH_TCP_CONGESTION");
    ADD_FAILURE() << "nosuchcc was accepted";
  } catch (const InvalidArgumentError& e) {
    for (const char* part :
         {"RINGTORCH_TCP_CONGESTION=nosuchcc", "on the socket to rank 1", "tcp_available_congestion_control",
          "tcp_allowed_congestion_control", "RINGTORCH_TCP_CONGESTION=kernel keeps the kernel's"}) {
      EXPECT_TRUE(contains(e.what(), part)) << part << " in " << e.what();
    }
    EXPECT_EQ(e.site().peer, 1);
  }
  EXPECT_EQ(connection.algorithm(), before);
}

ProcessGroupOptions over_tcp(TcpCongestion congestion) {
  ProcessGroupOptions options;
  options.shared_memory = false;
  options.tcp_congestion = std::move(congestion);
  return options;
}

TEST(TcpCongestion, AGroupSaysWhichAlgorithmItsSocketsRun) {
  testing::on_thread_ranks(
      2,
      [](ProcessGroup& group) {
        // The options chose it, so the way back names the options' field.
        EXPECT_TRUE(contains(group.path(),
                             "; TCP congestion control reno for 1 peer (ProcessGroupOptions::tcp_congestion=kernel"))
            << group.path();
        at::Tensor t = at::full({1 << 20}, group.rank() + 1.0f);
        group.allreduce(t);
        EXPECT_TRUE(t.eq(3.0f).all().item<bool>());
      },
      milliseconds(30000), over_tcp(named("reno")));
  testing::on_thread_ranks(
      2, [](ProcessGroup& group) { EXPECT_FALSE(contains(group.path(), "congestion")) << group.path(); },
      milliseconds(30000), over_tcp({TcpCongestion::Mode::kKernel, ""}));
}

// Each rank applies its own settings to its own sockets: ranks configured differently still form
// one group and agree on every result.
TEST(TcpCongestion, RanksWithDifferentSocketSettingsFormOneGroup) {
  testing::ScopedEnvironment congestion("RINGTORCH_TCP_CONGESTION", std::nullopt);
  testing::ScopedEnvironment send_buffer("RINGTORCH_SOCKET_SNDBUF", std::nullopt);
  testing::on_thread_ranks_with_options(
      3,
      [](int rank) {
        ProcessGroupOptions options;
        options.shared_memory = false;
        if (rank == 0) {
          options.tcp_congestion = named("reno");
          options.socket_send_buffer = SocketSendBuffer{SocketSendBuffer::Mode::kBytes, 64 << 10};
        } else if (rank == 1) {
          options.tcp_congestion = TcpCongestion{TcpCongestion::Mode::kKernel, ""};
        }  // rank 2: the defaults (auto, the kernel's buffers)
        return options;
      },
      [](ProcessGroup& group) {
        if (group.rank() == 0) {
          EXPECT_TRUE(contains(group.path(), "TCP send buffers of ")) << group.path();
          EXPECT_TRUE(contains(group.path(), "TCP congestion control reno for 2 peers (")) << group.path();
        } else if (group.rank() == 1) {
          EXPECT_FALSE(contains(group.path(), "TCP send buffers")) << group.path();
          EXPECT_FALSE(contains(group.path(), "congestion")) << group.path();
        }
        for (int64_t count : {int64_t{1}, int64_t{1} << 20}) {
          at::Tensor t = at::full({count}, group.rank() + 1.0f);
          group.allreduce(t);
          EXPECT_TRUE(t.eq(6.0f).all().item<bool>()) << count;
        }
      });
}

// Every rank refuses the name on its own sockets, but a rank that fails first closes them: its
// peer may then find its socket to it gone (Gloo closes a pair whose peer hung up) and fail at the
// next step of creation instead, naming the lost peer. So: every rank fails, at least one with the
// refused name, and any other with the peer it lost.
TEST(TcpCongestion, EveryRankFailsCreationWhenTheKernelRefusesTheAlgorithm) {
  auto store =
      c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", milliseconds(30000));
  std::vector<std::exception_ptr> errors(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      try {
        ProcessGroupOptions options = over_tcp(named("nosuchcc"));
        options.timeout = milliseconds(30000);
        ProcessGroup::create(store, r, 2, "127.0.0.1", options);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : ranks) t.join();
  int refused = 0;
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(errors[static_cast<size_t>(r)]) << "rank " << r << " created the group with nosuchcc";
    try {
      std::rethrow_exception(errors[static_cast<size_t>(r)]);
    } catch (const InvalidArgumentError& e) {
      ++refused;
      EXPECT_TRUE(contains(e.what(), str_cat("[rank ", r, "/2] creating group"))) << e.what();
      EXPECT_TRUE(contains(e.what(), "ProcessGroupOptions::tcp_congestion=nosuchcc")) << e.what();
      EXPECT_FALSE(contains(e.what(), "RINGTORCH_TCP_CONGESTION")) << e.what();
      EXPECT_EQ(e.site().rank, r);
      EXPECT_EQ(e.site().peer, 1 - r);
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), str_cat("[rank ", r, "/2] creating group"))) << e.what();
      EXPECT_TRUE(contains(e.what(), str_cat("peer rank ", 1 - r))) << e.what();
      EXPECT_EQ(e.site().peer, 1 - r) << e.what();
    }
  }
  EXPECT_GE(refused, 1);
}

TEST(TcpCongestion, AMalformedSettingIsRefusedAtCreation) {
  testing::ScopedEnvironment bad("RINGTORCH_TCP_CONGESTION", "Cubic!");
  ProcessGroupOptions options;
  options.shared_memory = false;
  try {
    ProcessGroup::create(
        c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", milliseconds(30000)), 0, 1,
        "127.0.0.1", options);
    ADD_FAILURE() << "RINGTORCH_TCP_CONGESTION=Cubic! was accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_TRUE(contains(e.what(), "RINGTORCH_TCP_CONGESTION")) << e.what();
  }
}

}  // namespace
}  // namespace ringtorch
