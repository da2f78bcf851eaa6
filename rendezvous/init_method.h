// Parsing of init-method URLs, as accepted by torch.distributed.init_process_group:
//
//   env://                                   variables RANK, WORLD_SIZE, MASTER_ADDR, ...
//   tcp://HOST:PORT                          a c10d::TCPStore, hosted by rank 0
//   file:///ABSOLUTE/PATH                    a c10d::FileStore on a shared filesystem
//   redis://[USER:PASSWORD@]HOST[:PORT][/DB] a RedisStore (port 6379, db 0 by default)
//
// Every scheme takes the query parameters ?rank=R&world_size=N&timeout=SECONDS.
// Parsing is pure (no I/O); errors are InvalidArgumentError naming the value and the fix.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace ringtorch {

enum class InitScheme { kEnv, kTcp, kFile, kRedis };

struct InitMethod {
  InitScheme scheme = InitScheme::kEnv;
  std::string text;  // the URL as given, with any password masked (safe to print)

  std::string host;      // tcp, redis
  uint16_t port = 0;     // tcp, redis
  std::string path;      // file
  std::string user;      // redis (ACL user; empty for the default user)
  std::string password;  // redis
  int db = 0;            // redis

  std::optional<int> rank;                           // ?rank=
  std::optional<int> world_size;                     // ?world_size=
  std::optional<std::chrono::milliseconds> timeout;  // ?timeout= (seconds)
};

InitMethod parse_init_method(const std::string& url);

const char* init_scheme_name(InitScheme scheme);

}  // namespace ringtorch
