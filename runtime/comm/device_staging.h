// CUDA tensors in the process group. Gloo and the shared-memory path move host memory, so a
// CUDA tensor travels through a host copy: pinned memory from PyTorch's caching host
// allocator (reused between calls: the pinned buffer pool), copied in when the operation is
// submitted and copied back when it completes. Ranks whose tensors live on a GPU and ranks on
// CPU can therefore share one group: on the wire, every rank's data is host memory.
//
// Stream semantics, without any device-wide synchronisation:
// - copy in: on the submitting thread, on its current stream, after the kernels queued there
//   before the call (the producer of the data); it waits for that stream only.
// - copy back: on the thread that ran the operation, waiting for that copy only; the Work
//   completes after it, so whoever waits on the Work sees the result on the device.
// CPU tensors pass through untouched (no copy).
//
// Thread-safety: one object per operation; built on the submitting thread, copy_back() called
// once by the executing thread.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>
#include <vector>

namespace ringtorch {

class DeviceStaging {
 public:
  // `t` itself when it is a CPU tensor. For a CUDA tensor: a host tensor of the same shape and
  // dtype, holding t's data when `copy_in`, and copied back into `t` by copy_back() when
  // `copy_back`.
  at::Tensor host(const at::Tensor& t, bool copy_in, bool copy_back);
  void copy_back() const;
  // Something to copy back (host copies made only for input stay alive in the operation's
  // closure, which captures them).
  bool copies_back() const { return !back_.empty(); }

 private:
  std::vector<std::pair<at::Tensor, at::Tensor>> back_;  // (device tensor, its host copy)
};

}  // namespace ringtorch
