// Which network interface Gloo's TCP transport binds to.
//
// Order: an explicit interface (ProcessGroupOptions::iface, else RINGTORCH_SOCKET_IFNAME; a name
// or a comma list, the first that exists wins), else the local address whose route reaches the
// store's host (MASTER_ADDR), else loopback when the store has no host (file://). Never the
// address gethostname() resolves to: in containers that is often unroutable, a classic cause of
// hangs in connectFullMesh.
#pragma once

#include <gloo/transport/device.h>

#include <memory>
#include <string>

namespace ringtorch {

struct DeviceChoice {
  std::shared_ptr<gloo::transport::Device> device;
  // "interface eth0 (RINGTORCH_SOCKET_IFNAME)", "10.0.0.3 (the route to the store host 10.0.0.1)",
  // "127.0.0.1 (the store has no host; ...)", "ibverbs device mlx5_0 port 1"
  std::string why;
};

// Throws InvalidArgumentError for an interface list with no existing interface, IoError when no
// local address routes to `store_host`.
DeviceChoice make_tcp_device(const std::string& iface_list, const std::string& store_host);

// `transport`: "tcp", "ibverbs", or empty (RINGTORCH_TRANSPORT, else tcp). For ibverbs, `iface`
// names the IB device (default: the first one); InvalidArgumentError when there is none.
DeviceChoice make_device(const std::string& transport, const std::string& iface, const std::string& store_host);

// Whether `device` is Gloo's TCP transport: only its pairs have an IP address beside which the
// synchronous lane (sync_lane.h) can open its own connections.
bool is_tcp_device(const gloo::transport::Device& device);

}  // namespace ringtorch
