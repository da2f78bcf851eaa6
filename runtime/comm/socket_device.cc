#include "runtime/comm/socket_device.h"

#include <arpa/inet.h>
#include <gloo/config.h>
#include <gloo/transport/tcp/device.h>
#if GLOO_HAVE_TRANSPORT_IBVERBS
#include <gloo/transport/ibverbs/device.h>
#endif
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <sstream>

#include <ringtorch/error.h>

namespace ringtorch {
namespace {

bool interface_exists(const std::string& name) { return ::if_nametoindex(name.c_str()) != 0; }

// The local address the kernel would use to reach `host`: connect() a UDP socket (sends nothing)
// and read back its local address.
std::string local_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), "9", &hints, &found); rc != 0) {
    throw IoError(str_cat("cannot resolve the store host '", host, "' to choose a network interface: ",
                          gai_strerror(rc), "; set RINGTORCH_SOCKET_IFNAME (or --iface) to the interface to use"));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, ::freeaddrinfo);
  int fd = ::socket(found->ai_family, SOCK_DGRAM, 0);
  if (fd < 0 || ::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    if (fd >= 0) ::close(fd);
    throw IoError(str_cat("no route from this machine to the store host '", host,
                          "'; set RINGTORCH_SOCKET_IFNAME (or --iface) to the interface to use"));
  }
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
  ::close(fd);
  char text[INET6_ADDRSTRLEN] = {0};
  if (local.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&local)->sin_addr, text, sizeof(text));
  } else {
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr, text, sizeof(text));
  }
  return text;
}

}  // namespace

DeviceChoice make_tcp_device(const std::string& iface_list, const std::string& store_host) {
  gloo::transport::tcp::attr attr;
  DeviceChoice choice;
  std::string list = iface_list;
  const char* env = std::getenv("RINGTORCH_SOCKET_IFNAME");
  std::string source = "--iface";
  if (list.empty() && env && *env) {
    list = env;
    source = "RINGTORCH_SOCKET_IFNAME";
  }
  if (!list.empty()) {
    std::stringstream names(list);
    std::string name;
    while (std::getline(names, name, ',')) {
      if (interface_exists(name)) {
        attr.iface = name;
        break;
      }
    }
    if (attr.iface.empty()) {
      throw InvalidArgumentError(str_cat(source, "=", list, ": no such network interface on this machine; ",
                                         "list them with `ip -brief address`"));
    }
    choice.why = str_cat("interface ", attr.iface, " (", source, ")");
  } else if (!store_host.empty()) {
    attr.hostname = local_address_towards(store_host);
    choice.why = str_cat(attr.hostname, " (the route to the store host ", store_host, ")");
  } else {
    attr.hostname = "127.0.0.1";
    choice.why = "127.0.0.1 (the store has no host; set RINGTORCH_SOCKET_IFNAME for several machines)";
  }
  choice.device = gloo::transport::tcp::CreateDevice(attr);
  return choice;
}

DeviceChoice make_device(const std::string& transport, const std::string& iface, const std::string& store_host) {
  std::string kind = transport;
  if (kind.empty()) {
    const char* env = std::getenv("RINGTORCH_TRANSPORT");
    kind = env && *env ? env : "tcp";
  }
  if (kind == "tcp") return make_tcp_device(iface, store_host);
  if (kind != "ibverbs") {
    throw InvalidArgumentError("transport '" + kind + "': use tcp or ibverbs (RINGTORCH_TRANSPORT)");
  }
#if GLOO_HAVE_TRANSPORT_IBVERBS
  const auto names = gloo::transport::ibverbs::getDeviceNames();
  if (names.empty()) {
    throw InvalidArgumentError(
        "transport ibverbs: this machine has no InfiniBand/RoCE device (ibv_get_device_list found none); use "
        "RINGTORCH_TRANSPORT=tcp");
  }
  gloo::transport::ibverbs::attr attr;
  attr.name = iface.empty() ? names.front() : iface;
  attr.port = 1;
  attr.index = 0;
  DeviceChoice choice;
  choice.device = gloo::transport::ibverbs::CreateDevice(attr);
  choice.why = "ibverbs device " + attr.name + " port 1";
  return choice;
#else
  throw InvalidArgumentError("transport ibverbs: this Gloo was built without ibverbs; use RINGTORCH_TRANSPORT=tcp");
#endif
}

bool is_tcp_device(const gloo::transport::Device& device) {
  return dynamic_cast<const gloo::transport::tcp::Device*>(&device) != nullptr;
}

}  // namespace ringtorch
