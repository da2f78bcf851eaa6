// Which devices a training process uses: ringtrain's --device auto|cpu|cuda[:N] and --gpus
// (the seeds' device_ids). A pure function of the flags, LOCAL_RANK and the number of visible
// CUDA devices, so every rule is testable on machines without a GPU.
//
//   --device cpu            -> cpu
//   --device cuda           -> cuda:LOCAL_RANK (modulo the device count: ranks then share GPUs)
//   --device cuda:N         -> cuda:N
//   --device auto (default) -> as cuda when a CUDA device is visible, else cpu, with a note
//   --gpus 0,1              -> cuda:0 and cuda:1, DataParallel inside the process (needs cuda
//                              or auto; with auto and no CUDA device: cpu, with a note)
#pragma once

#include <c10/core/Device.h>

#include <string>
#include <vector>

namespace ringtorch {

struct DeviceSelection {
  std::vector<c10::Device> devices;  // devices[0] holds the primary model; more than one: DataParallel
  std::string note;                  // non-empty: say it once (e.g. "no CUDA device visible: training on CPU")
  std::string describe() const;      // "cpu", "cuda:1", "cuda:0,cuda:1"
};

// Throws InvalidArgumentError naming the flag and value: unknown --device, a CUDA device that
// does not exist, --gpus with --device cpu, a repeated or negative id.
DeviceSelection select_devices(const std::string& device, const std::vector<int>& gpus, int local_rank,
                               int cuda_device_count);

// "0,1,3" -> {0, 1, 3}; throws InvalidArgumentError naming --gpus.
std::vector<int> parse_device_ids(const std::string& text);

}  // namespace ringtorch
