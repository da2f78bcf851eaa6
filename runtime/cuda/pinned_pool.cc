#include "runtime/cuda/pinned_pool.h"

#include <utility>

#include "runtime/cuda/cuda_check.h"

namespace ringtorch {
namespace cuda {

PinnedPool::Block::Block(Block&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      capacity_(std::exchange(other.capacity_, 0)) {}

PinnedPool::Block& PinnedPool::Block::operator=(Block&& other) noexcept {
  if (this != &other) {
    if (pool_) pool_->give_back(data_, capacity_);
    pool_ = std::exchange(other.pool_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

PinnedPool::Block::~Block() {
  if (pool_) pool_->give_back(data_, capacity_);
}

PinnedPool::~PinnedPool() { release_cached(); }

PinnedPool& PinnedPool::process_pool() {
  static PinnedPool* pool = new PinnedPool();
  return *pool;
}

size_t PinnedPool::size_class(size_t bytes) {
  size_t capacity = size_t{1} << 20;
  while (capacity < bytes) capacity <<= 1;
  return capacity;
}

PinnedPool::Block PinnedPool::acquire(size_t bytes) {
  const size_t capacity = size_class(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(capacity);
    if (it != free_.end()) {
      void* data = it->second;
      free_.erase(it);
      return Block(this, data, capacity);
    }
  }
  void* data = nullptr;
  // Portable: usable from every device's streams, whichever device is current here.
  check(cudaHostAlloc(&data, capacity, cudaHostAllocPortable), "cudaHostAlloc",
        str_cat("allocating ", capacity, " bytes of pinned host memory for staging a CUDA tensor"));
  return Block(this, data, capacity);
}

size_t PinnedPool::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t bytes = 0;
  for (const auto& entry : free_) bytes += entry.first;
  return bytes;
}

void PinnedPool::release_cached() {
  std::multimap<size_t, void*> to_free;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    to_free.swap(free_);
  }
  for (auto& [capacity, data] : to_free) cudaFreeHost(data);
}

void PinnedPool::give_back(void* data, size_t capacity) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.emplace(capacity, data);
}

}  // namespace cuda
}  // namespace ringtorch
