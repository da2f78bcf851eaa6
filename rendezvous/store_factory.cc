#include "rendezvous/store_factory.h"

#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <ringtorch/error.h>
#include <ringtorch/redis_store.h>

#include "rendezvous/deadline_store.h"
#include "rendezvous/exception_text.h"
#include "rendezvous/store_wait.h"

namespace ringtorch {
namespace {

// Why the process that hosts a TCP store could not reach it through `host` (it connects to its
// own server by that name): the name does not resolve, or none of its addresses is this
// machine's (bind(2) to it fails), or else the port.
std::string why_hosting_failed(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int error = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); error != 0) {
    return str_cat("MASTER_ADDR ", host, " does not resolve (", ::gai_strerror(error),
                   "): set --master_addr / MASTER_ADDR to node 0's address");
  }
  bool local = false;
  for (addrinfo* a = found; a != nullptr && !local; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, 0);
    if (fd < 0) continue;
    local = ::bind(fd, a->ai_addr, a->ai_addrlen) == 0;  // port 0 in the address: any free port
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (!local) {
    return str_cat("MASTER_ADDR ", host,
                   " is not an address of this machine, yet this process hosts the store (node 0 / rank 0): "
                   "run node 0 where MASTER_ADDR points, or set --master_addr / MASTER_ADDR to this machine's address");
  }
  return str_cat("another job may hold port ", port, ": choose another MASTER_PORT / --master_port");
}

c10::intrusive_ptr<c10d::Store> open_tcp(const StoreRequest& r) {
  c10d::TCPStoreOptions options;
  options.port = r.method.port;
  options.isServer = r.host_tcp_server;
  options.waitWorkers = false;  // join_round() waits, with messages that name the missing ranks
  // LibTorch 1.13 truncates this timeout to whole seconds when connecting (below 1 s it gives
  // up at once): round up. Waits keep millisecond deadlines in DeadlineStore.
  options.timeout = std::chrono::ceil<std::chrono::seconds>(r.timeout);
  try {
    auto tcp = c10::make_intrusive<c10d::TCPStore>(r.method.host, options);
    std::string description = str_cat("tcp://", r.method.host, ":", tcp->getPort());
    return c10::make_intrusive<DeadlineStore>(tcp, description, r.timeout);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    if (r.host_tcp_server) {
      throw IoError(str_cat(r.context, "cannot host the TCP store at ", r.method.host, ":", r.method.port, ": ",
                            exception_text(e), "; ", why_hosting_failed(r.method.host, r.method.port)));
    }
    throw IoError(str_cat(r.context, "cannot reach the TCP store at ", r.method.host, ":", r.method.port, " within ",
                          format_duration_ms(r.timeout.count()), ": ", exception_text(e),
                          "; check MASTER_ADDR/MASTER_PORT and that rank 0 (or the launcher on node 0) is running, or ",
                          kRaiseTimeoutHint));
  }
}

c10::intrusive_ptr<c10d::Store> open_file(const StoreRequest& r) {
  const std::string dir = r.method.path.substr(0, r.method.path.rfind('/'));
  struct stat st {};
  if (!dir.empty() && (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
    throw IoError(str_cat(r.context, "file store '", r.method.path, "': directory '", dir,
                          "' does not exist; create it (on a filesystem every node shares)"));
  }
  // c10d's FileStore waits (holding its lock, up to its own timeout) for the file to appear when
  // check() or get() runs before the first write: create it now, and bound that wait.
  int fd = ::open(r.method.path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw IoError(str_cat(r.context, "cannot create file store '", r.method.path, "': ", errno_text(errno)));
  }
  ::close(fd);
  try {
    // Note [File store lifetime]: c10d's FileStore deletes its file when as many instances as
    // `numWorkers` have closed it, counting in the file itself. A file left by a crashed job
    // carries that count over, so the next job's file vanished under ranks still using it.
    // ringtorch never deletes the file: join rounds make a reused file safe, and the user
    // removes it (or picks a fresh path) when the job is over.
    auto file = c10::make_intrusive<c10d::FileStore>(r.method.path, std::numeric_limits<int>::max());
    file->setTimeout(r.timeout);
    // Never destroyed: c10d's FileStore destructor opens the file to count itself out, and
    // throws from the destructor when it cannot (a filesystem turned read-only, a deleted
    // directory), which is std::terminate. With the count never reaching numWorkers the
    // destructor does nothing else, so one reference is kept for the process's life.
    c10::raw::intrusive_ptr::incref(file.get());
    return c10::make_intrusive<DeadlineStore>(file, "file://" + r.method.path, r.timeout);
  } catch (const std::exception& e) {
    throw IoError(str_cat(r.context, "cannot open file store '", r.method.path, "': ", exception_text(e)));
  }
}

c10::intrusive_ptr<c10d::Store> open_redis(const StoreRequest& r) {
  RedisOptions options;
  options.host = r.method.host;
  options.port = r.method.port;
  options.user = r.method.user;
  options.password = r.method.password;
  // The safe ways to give it (docs/rendezvous.md): a URL on a command line is readable by every
  // local user; the environment only by this user.
  if (const char* from_environment = std::getenv("RINGTORCH_REDIS_PASSWORD");
      options.password.empty() && from_environment != nullptr) {
    options.password = from_environment;
  }
  options.db = r.method.db;
  options.attempt_timeout = std::min(options.attempt_timeout, r.timeout);
  try {
    return c10::make_intrusive<RedisStore>(options, r.timeout);
  } catch (const InvalidArgumentError& e) {
    throw InvalidArgumentError(r.context + e.what());
  } catch (const IoError& e) {
    throw IoError(r.context + e.what());
  }
}

}  // namespace

c10::intrusive_ptr<c10d::Store> open_store(const StoreRequest& request) {
  switch (request.method.scheme) {
    case InitScheme::kTcp:
      return open_tcp(request);
    case InitScheme::kFile:
      return open_file(request);
    case InitScheme::kRedis:
      return open_redis(request);
    case InitScheme::kEnv:
      break;
  }
  throw InvalidArgumentError("open_store: env:// names no store by itself; call rendezvous() instead");
}

uint16_t hosted_tcp_port(const c10d::Store& store) {
  if (auto* deadline = dynamic_cast<const DeadlineStore*>(&store)) {
    if (auto* tcp = dynamic_cast<const c10d::TCPStore*>(deadline->inner().get())) return tcp->getPort();
  }
  return 0;
}

}  // namespace ringtorch
