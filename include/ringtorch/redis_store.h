// RedisStore: a c10d::Store on a Redis server, through hiredis.
//
// Example:
//   ringtorch::RedisOptions redis;
//   redis.host = "10.0.0.2";
//   auto store = c10::make_intrusive<ringtorch::RedisStore>(redis, 30s);
//
// Contract (Note [Store contract], docs/ARCHITECTURE.md): get() and wait() block until the key
// exists or the timeout passes; counters written by add() are decimal strings, as in TCPStore;
// compareSet() follows TCPStore's rules (a missing key with an empty expected value is created).
// getNumKeys() counts the whole database: give each cluster its own db number in the URL.
//
// Connection: AUTH (Redis 6 ACL user or plain password) and SELECT on every (re)connect. A lost
// connection is re-established with exponential back-off until the store's timeout passes;
// idempotent commands (GET, SET, EXISTS, DEL, DBSIZE) are then re-sent, counters (INCRBY) and
// compareSet are not, because Redis may already have applied them: they fail with IoError.
//
// Thread-safety: every method may be called from any thread; one connection, guarded by mutex_.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

struct redisContext;
struct redisReply;

namespace ringtorch {

struct RedisOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 6379;
  std::string user;      // empty: the default user
  std::string password;  // empty: no AUTH
  int db = 0;
  // Bound on one connection attempt and on one command's round trip; reconnecting goes on,
  // with back-off, until the store's timeout passes.
  std::chrono::milliseconds attempt_timeout{2000};
};

class RedisStore : public c10d::Store {
 public:
  // Connects (retrying until `timeout`); throws IoError when the server stays unreachable and
  // InvalidArgumentError when it refuses the password.
  RedisStore(RedisOptions options, std::chrono::milliseconds timeout);
  ~RedisStore() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  // A second connection to the same server (LibTorch >= 2.5 declares clone() pure virtual;
  // no `override`, so this also compiles against 1.13, which has none).
  c10::intrusive_ptr<c10d::Store> clone();

  // "redis://host:port/db" (never the password).
  const std::string& description() const { return description_; }

 private:
  struct ContextDeleter {
    void operator()(redisContext* c) const;
  };
  struct ReplyDeleter {
    void operator()(redisReply* r) const;
  };
  using Reply = std::unique_ptr<redisReply, ReplyDeleter>;
  enum class Retry { kIdempotent, kNever };

  // Sends one command (binary-safe arguments); reconnects on I/O errors as described above.
  // Throws IoError on a server error reply or when the server stays unreachable.
  Reply command(const std::vector<std::string>& args, Retry retry);
  void connect_locked(std::chrono::steady_clock::time_point deadline);  // requires mutex_
  void authenticate_and_select_locked();                                // requires mutex_

  const RedisOptions options_;     // constant after construction
  const std::string description_;  // constant after construction
  std::mutex mutex_;
  std::unique_ptr<redisContext, ContextDeleter> context_;  // guarded by mutex_; null when disconnected
};

}  // namespace ringtorch
