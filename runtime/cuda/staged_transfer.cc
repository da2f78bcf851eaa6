#include "runtime/cuda/staged_transfer.h"

#include <array>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "runtime/cuda/blas.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/pinned_pool.h"

namespace ringtorch {
namespace cuda {
namespace {

constexpr int kMaxDevices = 64;

cudaEvent_t new_event(int device) {
  cudaEvent_t event = nullptr;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags",
        str_cat("creating an event on cuda:", device));
  return event;
}

// Polls one event until it completes: a host wait on that event alone, with a deadline.
void wait_event(cudaEvent_t event, std::chrono::steady_clock::time_point deadline, const std::string& what) {
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  for (;;) {
    const cudaError_t status = cudaEventQuery(event);
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) check(status, "cudaEventQuery", what);
    const auto now = std::chrono::steady_clock::now();
    if (now > deadline) {
      throw TimeoutError(str_cat(what,
                                 ": not finished by the operation's deadline (a copy between the GPU and pinned "
                                 "host memory is stuck behind work on the caller's stream: a kernel that does "
                                 "not end? If that work is merely long, raise RINGTORCH_TIMEOUT or the call's "
                                 "timeout)"));
    }
    if (now < spin_until) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

}  // namespace

void* side_stream(int device) {
  static std::mutex mutex;
  static std::array<cudaStream_t, kMaxDevices> streams{};
  if (device < 0 || device >= kMaxDevices) throw InvalidArgumentError(str_cat("side_stream: no device cuda:", device));
  std::lock_guard<std::mutex> lock(mutex);
  if (!streams[device]) {
    DeviceScope scope(device);
    check(cudaStreamCreateWithFlags(&streams[device], cudaStreamNonBlocking), "cudaStreamCreateWithFlags",
          str_cat("creating ringtorch's copy stream on cuda:", device));
  }
  return streams[device];
}

struct StagedTransfer::State {
  int device = 0;
  char* device_data = nullptr;
  std::vector<ByteRange> pieces;
  cudaStream_t caller = nullptr;
  cudaStream_t side = nullptr;
  PinnedPool::Block block;
  std::vector<cudaEvent_t> in_events;  // piece k is in host memory
  cudaEvent_t done = nullptr;          // every queued copy is done
  bool finished = false;

  std::string describe(size_t k) const {
    return str_cat("copying piece ", k + 1, " of ", pieces.size(), " (", pieces[k].bytes, " bytes) of a cuda:", device,
                   " tensor through pinned host memory");
  }
};

StagedTransfer::StagedTransfer(int device, void* device_data, std::vector<ByteRange> pieces, void* caller_stream,
                               bool copy_in)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.device = device;
  s.device_data = static_cast<char*>(device_data);
  s.pieces = std::move(pieces);
  s.caller = static_cast<cudaStream_t>(caller_stream);
  s.side = static_cast<cudaStream_t>(side_stream(device));
  size_t total = 0;
  for (const ByteRange& piece : s.pieces) total = std::max(total, piece.offset + piece.bytes);
  s.block = PinnedPool::process_pool().acquire(total);
  DeviceScope scope(device);
  s.done = new_event(device);
  if (!copy_in) return;
  // The side stream starts after everything already queued on the caller's stream (the kernels
  // that produced the data).
  cudaEvent_t ready = new_event(device);
  check(cudaEventRecord(ready, s.caller), "cudaEventRecord", "ordering the copy after the caller's stream");
  const cudaError_t waited = cudaStreamWaitEvent(s.side, ready, 0);
  cudaEventDestroy(ready);  // released once the wait is satisfied; safe to destroy now
  check(waited, "cudaStreamWaitEvent", "ordering the copy after the caller's stream");
  char* host = static_cast<char*>(s.block.data());
  for (size_t k = 0; k < s.pieces.size(); ++k) {
    const ByteRange& piece = s.pieces[k];
    s.in_events.push_back(new_event(device));
    check(
        cudaMemcpyAsync(host + piece.offset, s.device_data + piece.offset, piece.bytes, cudaMemcpyDeviceToHost, s.side),
        "cudaMemcpyAsync", s.describe(k));
    check(cudaEventRecord(s.in_events.back(), s.side), "cudaEventRecord", s.describe(k));
  }
}

StagedTransfer::~StagedTransfer() {
  if (!state_) return;
  State& s = *state_;
  std::optional<DeviceScope> scope;
  try {
    scope.emplace(s.device);
  } catch (const std::exception&) {
    // Clean up on whatever device is current: destroying events and waiting work regardless.
  }
  if (!s.finished) {
    // An error path: copies may still be queued on the side stream. They are local copies,
    // bounded by the bus, so waiting for them here is safe; the pinned block goes back to the
    // pool only after.
    if (cudaEventRecord(s.done, s.side) == cudaSuccess) cudaEventSynchronize(s.done);
  }
  for (cudaEvent_t event : s.in_events) cudaEventDestroy(event);
  if (s.done) cudaEventDestroy(s.done);
}

size_t StagedTransfer::pieces() const { return state_->pieces.size(); }

void* StagedTransfer::host() const { return state_->block.data(); }

void StagedTransfer::wait_in(size_t k, std::chrono::steady_clock::time_point deadline) const {
  const State& s = *state_;
  if (k >= s.in_events.size()) return;  // no copy in was asked for
  DeviceScope scope(s.device);
  wait_event(s.in_events[k], deadline, s.describe(k));
}

void StagedTransfer::copy_out(size_t k, float scale) {
  State& s = *state_;
  const ByteRange& piece = s.pieces[k];
  DeviceScope scope(s.device);
  check(cudaMemcpyAsync(s.device_data + piece.offset, static_cast<char*>(s.block.data()) + piece.offset, piece.bytes,
                        cudaMemcpyHostToDevice, s.side),
        "cudaMemcpyAsync", s.describe(k));
  if (scale != 1.0f) {
    scale_in_place(reinterpret_cast<float*>(s.device_data + piece.offset), static_cast<int64_t>(piece.bytes / 4), scale,
                   s.side);
  }
}

void StagedTransfer::finish(std::chrono::steady_clock::time_point deadline) {
  State& s = *state_;
  DeviceScope scope(s.device);
  check(cudaEventRecord(s.done, s.side), "cudaEventRecord", "finishing a staged CUDA collective");
  // Work the caller queues from now on sees the result even before the host wait below ends.
  check(cudaStreamWaitEvent(s.caller, s.done, 0), "cudaStreamWaitEvent",
        "ordering the caller's stream after the copy back");
  wait_event(s.done, deadline, str_cat("copying a collective's result back to cuda:", s.device));
  s.finished = true;
}

}  // namespace cuda
}  // namespace ringtorch
