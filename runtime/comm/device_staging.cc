#include "runtime/comm/device_staging.h"

#include <ATen/ATen.h>

namespace ringtorch {

at::Tensor DeviceStaging::host(const at::Tensor& t, bool copy_in, bool copy_back) {
  if (!t.defined() || !t.is_cuda()) return t;
  at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
  // A blocking device-to-host copy on the current stream: ordered after the producer's
  // kernels, and it synchronises that stream only.
  if (copy_in) host.copy_(t, /*non_blocking=*/false);
  if (copy_back) back_.emplace_back(t, host);
  return host;
}

void DeviceStaging::copy_back() const {
  for (const auto& [device, host] : back_) device.copy_(host, /*non_blocking=*/false);
}

}  // namespace ringtorch
