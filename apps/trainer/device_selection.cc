#include "apps/trainer/device_selection.h"

#include <algorithm>
#include <set>

#include <ringtorch/error.h>

#include "base/parse.h"
#include "rendezvous/init_method.h"

namespace ringtorch {
namespace {

std::string join_ids(const std::vector<int>& ids) {
  std::string text;
  for (int id : ids) text += (text.empty() ? "" : ",") + std::to_string(id);
  return text;
}

c10::Device cuda(int index) { return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index)); }

}  // namespace

std::string DeviceSelection::describe() const {
  std::string text;
  for (const auto& d : devices) text += (text.empty() ? "" : ",") + d.str();
  return text;
}

std::vector<int> parse_device_ids(const std::string& text) {
  std::vector<int> ids;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    ids.push_back(parse_int_in_range(text.substr(start, comma - start), 0, 1023, "--gpus"));
    start = comma + 1;
  }
  return ids;
}

DeviceSelection select_devices(const std::string& device, const std::vector<int>& gpus, int local_rank,
                               int cuda_device_count) {
  DeviceSelection selection;
  const bool is_auto = device == "auto", is_cpu = device == "cpu";
  const bool is_cuda = device == "cuda" || device.rfind("cuda:", 0) == 0;
  if (!is_auto && !is_cpu && !is_cuda) {
    throw InvalidArgumentError(str_cat("--device ", device, ": use auto, cpu, cuda or cuda:N"));
  }
  if (std::set<int>(gpus.begin(), gpus.end()).size() != gpus.size()) {
    throw InvalidArgumentError(str_cat("--gpus ", join_ids(gpus), ": a device is listed twice"));
  }
  if (is_cpu) {
    if (!gpus.empty()) throw InvalidArgumentError(str_cat("--gpus ", join_ids(gpus), ": needs --device cuda or auto"));
    selection.devices = {c10::Device(c10::DeviceType::CPU)};
    return selection;
  }
  if (cuda_device_count == 0) {
    if (is_cuda) {
      throw InvalidArgumentError(str_cat("--device ", device, ": no CUDA device is visible to this process (",
                                         "no GPU, CUDA_VISIBLE_DEVICES, or a LibTorch built without CUDA); use ",
                                         "--device auto or cpu"));
    }
    selection.devices = {c10::Device(c10::DeviceType::CPU)};
    selection.note = gpus.empty()
                         ? "no CUDA device visible: training on CPU"
                         : str_cat("no CUDA device visible: --gpus ", join_ids(gpus), " ignored, training on CPU");
    return selection;
  }
  auto check = [&](int id, const std::string& flag) {
    if (id >= cuda_device_count) {
      throw InvalidArgumentError(str_cat(flag, ": cuda:", id, " does not exist; ", cuda_device_count,
                                         " CUDA device(s) are visible (cuda:0 to cuda:", cuda_device_count - 1, ")"));
    }
  };
  if (!gpus.empty()) {
    if (device.rfind("cuda:", 0) == 0) {
      throw InvalidArgumentError(str_cat("--device ", device, " with --gpus ", join_ids(gpus), ": give one of them"));
    }
    for (int id : gpus) {
      check(id, "--gpus " + join_ids(gpus));
      selection.devices.push_back(cuda(id));
    }
    return selection;
  }
  if (device.rfind("cuda:", 0) == 0) {
    const int id = parse_int_in_range(device.substr(5), 0, 1023, "--device");
    check(id, "--device " + device);
    selection.devices = {cuda(id)};
    return selection;
  }
  selection.devices = {cuda(local_rank % cuda_device_count)};
  if (local_rank >= cuda_device_count) {
    selection.note =
        str_cat("LOCAL_RANK ", local_rank, " but ", cuda_device_count,
                " CUDA device(s): ranks share GPUs (this one uses cuda:", local_rank % cuda_device_count, ")");
  }
  return selection;
}

}  // namespace ringtorch
