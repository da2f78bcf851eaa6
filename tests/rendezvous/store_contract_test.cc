// One contract, one suite, every store (Note [Store contract], docs/ARCHITECTURE.md): LibTorch's
// HashStore, FileStore and TCPStore behind DeadlineStore, and our RedisStore against a real
// redis-server, with and without a password. Processes, not only threads, hammer each store.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <ringtorch/error.h>

#include "rendezvous/deadline_store.h"
#include "rendezvous/init_method.h"
#include "rendezvous/store_factory.h"
#include "runtime/launch/subprocess.h"
#include "support/capture.h"
#include "support/redis_server.h"
#include "support/test_paths.h"

namespace ringtorch {
namespace {

using std::chrono::milliseconds;
using testing::RedisServer;
using testing::TempDir;

constexpr milliseconds kTimeout{400};

std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }
std::string text(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

// Each backend: make a fresh store for this process, and a URL other processes can open.
struct HashBackend {
  static constexpr bool kMultiProcess = false;
  c10::intrusive_ptr<c10d::Store> make(milliseconds timeout) {
    return c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", timeout);
  }
  std::string url() { return ""; }
};

struct FileBackend {
  static constexpr bool kMultiProcess = true;
  TempDir dir;
  c10::intrusive_ptr<c10d::Store> make(milliseconds timeout) {
    StoreRequest r;
    r.method = parse_init_method("file://" + dir.file("store"));
    r.timeout = timeout;
    return open_store(r);
  }
  std::string url() { return "file://" + dir.file("store") + ""; }
};

struct TcpBackend {
  static constexpr bool kMultiProcess = true;
  uint16_t port = 0;
  c10::intrusive_ptr<c10d::Store> make(milliseconds timeout) {
    StoreRequest r;
    r.method = parse_init_method("tcp://127.0.0.1:1");
    r.method.port = 0;
    r.host_tcp_server = true;
    r.timeout = timeout;
    auto store = open_store(r);
    port = hosted_tcp_port(*store);
    return store;
  }
  std::string url() { return "tcp://127.0.0.1:" + std::to_string(port); }
};

template <bool kPassword>
struct RedisBackend {
  static constexpr bool kMultiProcess = true;
  std::optional<RedisServer> server;
  std::string why;
  c10::intrusive_ptr<c10d::Store> make(milliseconds timeout) {
    server = RedisServer::start(kPassword ? "p4ss:word" : "", &why);
    if (!server) return {};
    StoreRequest r;
    r.method = parse_init_method(server->url(kPassword ? "/2" : ""));
    r.timeout = timeout;
    return open_store(r);
  }
  std::string url() { return server->url(kPassword ? "/2" : ""); }
};

template <typename Backend>
class StoreContract : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = backend_.make(kTimeout);
    if (!store_) GTEST_SKIP() << "no store: " << skip_reason();
  }
  std::string skip_reason() {
    if constexpr (std::is_same_v<Backend, RedisBackend<true>> || std::is_same_v<Backend, RedisBackend<false>>) {
      return backend_.why;
    }
    return "";
  }
  Backend backend_;
  c10::intrusive_ptr<c10d::Store> store_;
};

using Backends = ::testing::Types<HashBackend, FileBackend, TcpBackend, RedisBackend<false>, RedisBackend<true>>;
class BackendNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, HashBackend>) return "HashStore";
    if (std::is_same_v<T, FileBackend>) return "FileStore";
    if (std::is_same_v<T, TcpBackend>) return "TCPStore";
    if (std::is_same_v<T, RedisBackend<false>>) return "RedisStore";
    return "RedisStoreWithPassword";
  }
};
TYPED_TEST_SUITE(StoreContract, Backends, BackendNames);

TYPED_TEST(StoreContract, SetThenGet) {
  this->store_->set("a", bytes("alpha"));
  EXPECT_EQ(text(this->store_->get("a")), "alpha");
  this->store_->set("a", bytes("again"));
  EXPECT_EQ(text(this->store_->get("a")), "again");
}

TYPED_TEST(StoreContract, BinaryValuesSurvive) {
  std::vector<uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
  this->store_->set("binary", all);
  EXPECT_EQ(this->store_->get("binary"), all);
  this->store_->set("empty", {});
  EXPECT_TRUE(this->store_->get("empty").empty());
}

TYPED_TEST(StoreContract, GetBlocksUntilAnotherThreadSets) {
  this->store_->setTimeout(milliseconds(5000));
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    this->store_->set("late", bytes("here"));
  });
  EXPECT_EQ(text(this->store_->get("late")), "here");
  setter.join();
}

TYPED_TEST(StoreContract, AddCountsAndReadsBackAsDecimal) {
  EXPECT_EQ(this->store_->add("n", 5), 5);
  EXPECT_EQ(this->store_->add("n", -2), 3);
  EXPECT_EQ(this->store_->add("n", 0), 3);
  EXPECT_EQ(text(this->store_->get("n")), "3");
}

TYPED_TEST(StoreContract, CompareSetFollowsTcpStoreRules) {
  // Missing key, empty expectation: created.
  EXPECT_EQ(text(this->store_->compareSet("cas", {}, bytes("one"))), "one");
  // Wrong expectation: unchanged, the current value comes back.
  EXPECT_EQ(text(this->store_->compareSet("cas", bytes("zero"), bytes("two"))), "one");
  // Right expectation: swapped.
  EXPECT_EQ(text(this->store_->compareSet("cas", bytes("one"), bytes("two"))), "two");
  EXPECT_EQ(text(this->store_->get("cas")), "two");
  // Missing key, non-empty expectation: not created; the expectation comes back.
  EXPECT_EQ(text(this->store_->compareSet("nothing", bytes("x"), bytes("y"))), "x");
  EXPECT_FALSE(this->store_->check({"nothing"}));
}

TYPED_TEST(StoreContract, CheckDeleteAndCount) {
  const int64_t before = this->store_->getNumKeys();
  EXPECT_FALSE(this->store_->check({"k1"}));
  this->store_->set("k1", bytes("1"));
  this->store_->set("k2", bytes("2"));
  this->store_->set("k3", bytes("3"));
  EXPECT_TRUE(this->store_->check({"k1", "k2", "k3"}));
  EXPECT_FALSE(this->store_->check({"k1", "k4"}));
  EXPECT_EQ(this->store_->getNumKeys(), before + 3);
  EXPECT_TRUE(this->store_->deleteKey("k2"));
  EXPECT_FALSE(this->store_->deleteKey("k2"));
  EXPECT_FALSE(this->store_->check({"k2"}));
  EXPECT_EQ(this->store_->getNumKeys(), before + 2);
}

TYPED_TEST(StoreContract, WaitReturnsOnceAllKeysExist) {
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(50));
    this->store_->set("w1", bytes("1"));
    this->store_->set("w2", bytes("2"));
  });
  this->store_->wait({"w1", "w2"}, milliseconds(5000));
  setter.join();
  EXPECT_TRUE(this->store_->check({"w1", "w2"}));
}

// A missing key errors within the timeout plus a small slack, naming the key and the knob.
void expect_timeout(const std::function<void()>& call, milliseconds timeout, const std::string& key) {
  auto start = std::chrono::steady_clock::now();
  try {
    call();
    FAIL() << "no timeout";
  } catch (const TimeoutError& e) {
    auto elapsed = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
    EXPECT_GE(elapsed.count(), timeout.count() - 5);
    EXPECT_LT(elapsed.count(), timeout.count() + 2000) << "hang guard";
    std::string what = e.what();
    EXPECT_NE(what.find("'" + key + "'"), std::string::npos) << what;
    EXPECT_NE(what.find("RINGTORCH_TIMEOUT"), std::string::npos) << what;
    EXPECT_NE(what.find("timed out after"), std::string::npos) << what;
  }
}

TYPED_TEST(StoreContract, MissingKeyTimesOutNamingKeyAndKnob) {
  expect_timeout([&] { this->store_->get("absent"); }, kTimeout, "absent");
  expect_timeout([&] { this->store_->wait({"absent2"}); }, kTimeout, "absent2");
  this->store_->set("present", bytes("1"));
  expect_timeout([&] { this->store_->wait({"present", "absent3"}, milliseconds(150)); }, milliseconds(150), "absent3");
}

TYPED_TEST(StoreContract, ConcurrentThreadsAdd) {
  constexpr int kThreads = 4, kAdds = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kAdds; ++i) this->store_->add("shared", 1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(this->store_->add("shared", 0), kThreads * kAdds);
}

TYPED_TEST(StoreContract, ConcurrentProcessesAdd) {
  if constexpr (!TypeParam::kMultiProcess) {
    GTEST_SKIP() << "an in-memory store cannot be shared between processes";
  } else {
    constexpr int kProcesses = 4, kAdds = 25;
    std::vector<Subprocess> clients;
    for (int p = 0; p < kProcesses; ++p) {
      SubprocessOptions spawn;
      spawn.argv = {
          testing::build_path("tests/store_tool"), this->backend_.url(), "add", "counter", "2", std::to_string(kAdds)};
      clients.push_back(Subprocess::spawn(spawn));
    }
    for (auto& c : clients) {
      auto result = testing::finish(c);
      EXPECT_TRUE(result.status.success()) << result.status.describe() << ": " << result.err;
    }
    EXPECT_EQ(this->store_->add("counter", 0), 2 * kProcesses * kAdds);
    // And a value set here is read there.
    this->store_->set("from_test", bytes("hi"));
    SubprocessOptions get;
    get.argv = {testing::build_path("tests/store_tool"), this->backend_.url(), "get", "from_test"};
    auto reader = Subprocess::spawn(get);
    auto result = testing::finish(reader);
    EXPECT_TRUE(result.status.success()) << result.err;
    EXPECT_EQ(result.out, "hi\n");
  }
}

// Redis-specific failures: a wrong password, and an unreachable server (after the timeout).
TEST(RedisStore, WrongPasswordIsAClearError) {
  std::string why;
  auto server = RedisServer::start("right", &why);
  if (!server) GTEST_SKIP() << why;
  StoreRequest r;
  r.method = parse_init_method("redis://:wrong@127.0.0.1:" + std::to_string(server->port()));
  r.timeout = milliseconds(2000);
  try {
    open_store(r);
    FAIL() << "wrong password accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("refused the credentials"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("wrong"), std::string::npos) << "password printed: " << e.what();
  }
  r.method = parse_init_method("redis://127.0.0.1:" + std::to_string(server->port()));
  EXPECT_THROW(open_store(r), InvalidArgumentError) << "no password for a protected server";
}

TEST(RedisStore, UnreachableServerFailsAfterTheTimeout) {
  StoreRequest r;
  r.method = parse_init_method("redis://127.0.0.1:" + std::to_string(testing::free_port()));
  r.timeout = milliseconds(500);
  auto start = std::chrono::steady_clock::now();
  try {
    open_store(r);
    FAIL();
  } catch (const IoError& e) {
    auto elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_GE(elapsed, milliseconds(400));
    EXPECT_LT(elapsed, milliseconds(5000));
    EXPECT_NE(std::string(e.what()).find("cannot connect"), std::string::npos) << e.what();
  }
}

TEST(RedisStore, ReconnectsAfterTheServerRestarts) {
  std::string why;
  auto server = RedisServer::start("", &why);
  if (!server) GTEST_SKIP() << why;
  const uint16_t port = server->port();
  StoreRequest r;
  r.method = parse_init_method(server->url());
  r.timeout = milliseconds(10000);
  auto store = open_store(r);
  store->set("before", bytes("1"));
  server->stop();
  // A new server on the same port: the store reconnects (the data is gone: persistence is off).
  std::optional<Subprocess> replacement;  // killed at the end of the test
  std::atomic<bool> done{false};
  std::thread restart([&] {
    std::this_thread::sleep_for(milliseconds(300));
    SubprocessOptions spawn;
    spawn.argv = {"redis-server", "--port", std::to_string(port), "--bind",   "127.0.0.1",
                  "--save",       "",       "--logfile",          "/dev/null"};
    spawn.capture_output = false;
    replacement.emplace(Subprocess::spawn(spawn));
    // The child dies with the thread that forked it (PR_SET_PDEATHSIG): stay until the end.
    while (!done) std::this_thread::sleep_for(milliseconds(10));
  });
  std::string error;
  try {
    store->set("after", bytes("2"));
    EXPECT_EQ(text(store->get("after")), "2");
  } catch (const std::exception& e) {
    error = e.what();
  }
  done = true;
  restart.join();
  EXPECT_EQ(error, "");
}

}  // namespace
}  // namespace ringtorch
