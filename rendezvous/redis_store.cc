#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <thread>

#include <ringtorch/error.h>
#include <ringtorch/redis_store.h>

#include "rendezvous/store_value.h"
#include "rendezvous/store_wait.h"

namespace ringtorch {
namespace {

using Clock = std::chrono::steady_clock;

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// Compare-and-set with TCPStore's semantics, atomically on the server.
constexpr char kCompareSetScript[] =
    "local v = redis.call('GET', KEYS[1])\n"
    "if v == false then\n"
    "  if ARGV[1] == '' then redis.call('SET', KEYS[1], ARGV[2]); return ARGV[2] end\n"
    "  return ARGV[1]\n"
    "end\n"
    "if v == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]); return ARGV[2] end\n"
    "return v\n";

// Sends one command with binary-safe arguments; null on a broken connection (see ctx->errstr).
redisReply* send_command(redisContext* ctx, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return static_cast<redisReply*>(redisCommandArgv(ctx, static_cast<int>(argv.size()), argv.data(), lens.data()));
}

bool is_auth_error(const std::string& text) {
  return text.rfind("WRONGPASS", 0) == 0 || text.rfind("NOAUTH", 0) == 0 ||
         text.find("invalid password") != std::string::npos || text.find("invalid username") != std::string::npos;
}

}  // namespace

void RedisStore::ContextDeleter::operator()(redisContext* c) const { redisFree(c); }
void RedisStore::ReplyDeleter::operator()(redisReply* r) const { freeReplyObject(r); }

RedisStore::RedisStore(RedisOptions options, std::chrono::milliseconds timeout)
    : c10d::Store(timeout),
      options_(std::move(options)),
      description_(str_cat("redis://", options_.host, ":", options_.port, "/", options_.db)) {
  std::lock_guard<std::mutex> lock(mutex_);
  connect_locked(Clock::now() + timeout);
}

RedisStore::~RedisStore() = default;

void RedisStore::connect_locked(Clock::time_point deadline) {
  auto pause = std::chrono::milliseconds(50);
  std::string last_error;
  while (true) {
    auto now = Clock::now();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    auto attempt = std::max(std::chrono::milliseconds(1), std::min(options_.attempt_timeout, left));
    context_.reset(redisConnectWithTimeout(options_.host.c_str(), options_.port, to_timeval(attempt)));
    if (context_ && context_->err == 0) {
      redisSetTimeout(context_.get(), to_timeval(options_.attempt_timeout));
      redisEnableKeepAlive(context_.get());
      authenticate_and_select_locked();  // throws on a refused password: retrying cannot help
      return;
    }
    last_error = context_ ? context_->errstr : "out of memory";
    context_.reset();
    now = Clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
  throw IoError(str_cat("store ", description_, ": cannot connect to the Redis server: ", last_error,
                        "; check the host and port (is redis-server running and reachable?), or ", kRaiseTimeoutHint));
}

void RedisStore::authenticate_and_select_locked() {
  auto run = [&](const std::vector<std::string>& args, const char* what) {
    Reply reply(send_command(context_.get(), args));
    if (!reply) {
      std::string err = context_->errstr;
      context_.reset();
      throw IoError(str_cat("store ", description_, ": ", what, " failed: ", err));
    }
    if (reply->type == REDIS_REPLY_ERROR) {
      std::string text(reply->str, reply->len);
      context_.reset();
      if (is_auth_error(text)) {
        throw InvalidArgumentError(
            str_cat("store ", description_, ": the Redis server refused the credentials (", text,
                    "); check the password (RINGTORCH_REDIS_PASSWORD, ringrun's --rdzv_conf password_file, or "
                    "redis://USER:PASSWORD@HOST:PORT)"));
      }
      throw IoError(str_cat("store ", description_, ": ", what, " failed: ", text));
    }
  };
  if (!options_.password.empty()) {
    if (options_.user.empty()) {
      run({"AUTH", options_.password}, "AUTH");
    } else {
      run({"AUTH", options_.user, options_.password}, "AUTH");
    }
  }
  if (options_.db != 0) run({"SELECT", std::to_string(options_.db)}, "SELECT");
  // Without a password, a protected server answers the first real command with NOAUTH: probe now
  // so the error says "password" instead of failing later inside a rendezvous.
  run({"PING"}, "PING");
}

RedisStore::Reply RedisStore::command(const std::vector<std::string>& args, Retry retry) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto deadline = Clock::now() + timeout_;
  while (true) {
    if (!context_) connect_locked(deadline);
    Reply reply(send_command(context_.get(), args));
    if (reply) {
      if (reply->type == REDIS_REPLY_ERROR) {
        throw IoError(str_cat("store ", description_, ": ", args[0], " '", args.size() > 1 ? args[1] : "",
                              "' failed: ", std::string(reply->str, reply->len)));
      }
      return reply;
    }
    // The connection broke (or a reply took longer than attempt_timeout): drop it.
    std::string err = context_->errstr;
    context_.reset();
    if (retry == Retry::kNever) {
      throw IoError(str_cat("store ", description_, ": connection lost during ", args[0], " '",
                            args.size() > 1 ? args[1] : "", "' (", err,
                            "); not retried because the server may have applied it"));
    }
    if (Clock::now() >= deadline) {
      throw IoError(str_cat("store ", description_, ": ", args[0], " failed: ", err, "; ", kRaiseTimeoutHint));
    }
  }
}

void RedisStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  command({"SET", key, store_text(value)}, Retry::kIdempotent);
}

std::vector<uint8_t> RedisStore::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                            const std::vector<uint8_t>& desired) {
  auto reply = command({"EVAL", kCompareSetScript, "1", key, store_text(expected), store_text(desired)}, Retry::kNever);
  return std::vector<uint8_t>(reply->str, reply->str + reply->len);
}

std::vector<uint8_t> RedisStore::get(const std::string& key) {
  wait({key}, timeout_);
  auto reply = command({"GET", key}, Retry::kIdempotent);
  if (reply->type != REDIS_REPLY_STRING) {
    throw IoError(str_cat("store ", description_, ": key '", key,
                          "' vanished between wait and get (deleted by another client?)"));
  }
  return std::vector<uint8_t>(reply->str, reply->str + reply->len);
}

int64_t RedisStore::add(const std::string& key, int64_t value) {
  auto reply = command({"INCRBY", key, std::to_string(value)}, Retry::kNever);
  return reply->integer;
}

bool RedisStore::deleteKey(const std::string& key) { return command({"DEL", key}, Retry::kIdempotent)->integer == 1; }

bool RedisStore::check(const std::vector<std::string>& keys) {
  if (keys.empty()) return true;
  std::vector<std::string> args{"EXISTS"};
  args.insert(args.end(), keys.begin(), keys.end());
  // EXISTS counts a key once per mention: compare against the number of mentions.
  return command(args, Retry::kIdempotent)->integer == static_cast<long long>(keys.size());
}

int64_t RedisStore::getNumKeys() { return command({"DBSIZE"}, Retry::kIdempotent)->integer; }

void RedisStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void RedisStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  wait_for_keys(*this, keys, timeout, description_);
}

c10::intrusive_ptr<c10d::Store> RedisStore::clone() { return c10::make_intrusive<RedisStore>(options_, timeout_); }

}  // namespace ringtorch
